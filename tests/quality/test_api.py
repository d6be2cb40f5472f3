"""The quality library's interface: options from config (typo hints, round trip,
severities), bad input as named findings or a clear refusal, the CPU fallback of a CUDA
decode, episodes.parquet, batches against one job, and verdict."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from robopipe.errors import DatasetError
from robopipe.harness import faults
from robopipe.quality import CHECKS, QualityOptions, check_batch, verdict


def test_options_from_config_names_the_nearest_key():
    with pytest.raises(ValueError, match="unknown quality option 'sample_sec'.*'sample_s'"):
        QualityOptions.from_config({"sample_sec": 1})
    with pytest.raises(ValueError, match="did you mean 'black_camera'"):
        QualityOptions.from_config({"severity": {"black_camerra": "off"}})
    with pytest.raises(ValueError, match="decode must be one of sample, all"):
        QualityOptions.from_config({"decode": "every"})
    with pytest.raises(ValueError, match="frozen_camera_s must be > 0"):
        QualityOptions.from_config({"frozen_camera_s": 0})


def test_options_round_trip_through_config():
    options = QualityOptions.from_config(
        {"decode": "all", "frozen_camera_s": 3, "severity": {"timestamp_drift": "off"}}
    )
    assert options.frozen_camera_s == 3.0 and options.decode == "all"
    config = options.to_config()
    assert json.loads(json.dumps(config)) == config
    assert QualityOptions.from_config(config) == options
    assert QualityOptions.from_config(None) == QualityOptions()


def test_severities_replace_and_switch_off(damaged, quality_of, tmp_path):
    faults.inject_black_camera(damaged, 1)
    faults.inject_timestamp_drift(damaged, 2)
    options = QualityOptions(severity={"black_camera": "error", "timestamp_drift": "off"})
    report = quality_of(damaged, tmp_path / "q", options)
    assert [(f["episode_index"], f["check"], f["severity"]) for f in report["findings"]] == [
        (1, "black_camera", "error")
    ]


def test_bad_files_are_named_findings(damaged, quality_of, tmp_path):
    faults.inject_unreadable_video(damaged, 1)
    faults.inject_missing_file(damaged, 3)
    (damaged / "data/chunk-000/episode_000005.parquet").unlink()
    report = quality_of(damaged, tmp_path / "q")
    found = {(f["episode_index"], f["check"], f["severity"]) for f in report["findings"]}
    assert found == {
        (1, "unreadable_video", "error"),
        (3, "missing_file", "error"),
        (5, "missing_file", "error"),
    }
    messages = " ".join(f["message"] for f in report["findings"])
    assert "episode_000003.mp4 is missing" in messages and "episode_000005.parquet" in messages
    table = pq.read_table(tmp_path / "q" / "episodes.parquet").to_pydict()
    assert table["missing_file"] == ["", "", "", "error", "", "error", "", ""]


def test_unknown_feature_is_a_finding(damaged, quality_of, tmp_path):
    info = json.loads((damaged / "meta/info.json").read_text())
    info["features"]["observation.audio"] = {"dtype": "audio", "shape": [1600]}
    (damaged / "meta/info.json").write_text(json.dumps(info))
    report = quality_of(damaged, tmp_path / "q")
    (found,) = report["findings"]
    assert (found["check"], found["severity"], found["episode_index"]) == (
        "unknown_feature", "info", None
    )  # fmt: skip
    assert found["feature"] == "observation.audio"


def test_a_folder_without_info_is_refused(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetError, match="no meta/info.json"):
        check_batch(str(tmp_path / "empty"), [0], QualityOptions(), tmp_path / "p.json")
    assert not (tmp_path / "p.json").exists()


def test_cuda_without_gpu_falls_back_to_cpu_and_says_why(clean_v21, quality_of, tmp_path):
    report = quality_of(clean_v21, tmp_path / "q", QualityOptions(device="cuda"))
    decode = report["decode"]
    assert (decode["device"], decode["used"]) == ("cuda", "cpu")
    assert decode["fallback"] and decode["gpu_files"] == 0
    assert decode["frames_decoded"] > 0


def test_episodes_parquet_has_a_column_per_check(damaged, quality_of, tmp_path):
    faults.inject_nan(damaged, 4)
    report = quality_of(damaged, tmp_path / "q")
    table = pq.read_table(tmp_path / "q" / "episodes.parquet")
    assert table.column_names[:2] == ["episode_index", "length"]
    assert set(CHECKS) <= set(table.column_names)
    assert str(table.schema.field("length").type) == "int64"
    assert table.column("nan_inf").to_pylist() == ["", "", "", "", "error", "", "", ""]
    assert table.column("length").to_pylist() == [
        json.loads((damaged / "meta/episodes.jsonl").read_text().splitlines()[e])["length"]
        for e in range(8)
    ]
    saved = json.loads((tmp_path / "q" / "quality.json").read_text())
    assert saved == report


def test_batches_give_the_report_of_one_job(damaged, quality_of, tmp_path):
    faults.inject_duplicate_episode(damaged, 6, of=1, near=True)
    faults.inject_idle_episode(damaged, 2)
    one = quality_of(damaged, tmp_path / "one")
    three = quality_of(damaged, tmp_path / "three", batches=3)
    assert one["findings"] == three["findings"] and len(one["findings"]) == 2


def test_verdict_names_the_failing_findings(damaged, quality_of, tmp_path):
    faults.inject_nan(damaged, 3, frame=6)
    faults.inject_black_camera(damaged, 5)
    report = quality_of(damaged, tmp_path / "q")
    assert verdict(report, "never") is None
    message = verdict(report, "error")
    assert "1 finding(s) at or above error" in message
    assert "episode 3: nan_inf (error) observation.state[0] frames 6-6" in message
    assert "black_camera" not in message
    assert "episode 5: black_camera (warning)" in verdict(report, "warning")
    clean = {**report, "findings": [f for f in report["findings"] if f["episode_index"] != 3]}
    assert verdict(clean, "error") is None
    with pytest.raises(ValueError, match="fail_on"):
        verdict(report, "sometimes")


def test_command_line_writes_the_report_and_applies_fail_on(damaged, tmp_path, capsys):
    from robopipe.quality.__main__ import main

    faults.inject_nan(damaged, 2)
    out = tmp_path / "q"
    assert main([str(damaged), str(out), "--batch-episodes", "3"]) == 0
    assert len(list((out / "parts").glob("*.json"))) == 3
    assert json.loads((out / "quality.json").read_text())["counts"]["error"] == 1
    assert main([str(damaged), str(out), "--fail-on", "error"]) == 1
    assert "episode 2: nan_inf (error)" in capsys.readouterr().err
    assert main([str(damaged), str(out), "--set", "decode=every"]) == 2

"""`snakemake edit`: an edit of a v3.0 folder as jobs, its outputs in results/<name>/v3.0;
a bad edit refused before any job runs; an interrupted edit resumes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from robopipe.conversion.serial import convert_dataset

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def source(make_v21, tmp_path_factory):
    out = tmp_path_factory.mktemp("src") / "v3.0"
    convert_dataset(
        make_v21(episodes=8, cameras=1), out, name="x",
        data_file_size_in_mb=0.004, video_file_size_in_mb=0.02,
    )  # fmt: skip
    return out


def _config(source, **operations):
    edits = {
        "x_clean": {"source": str(source), "operation": {"type": "delete_episodes",
                                                         "episode_indices": [0, 5]}},
        "x_split": {"source": str(source), "operation": {"type": "split",
                                                         "splits": {"train": 0.75, "val": 0.25}}},
        "x_merged": {"operation": {"type": "merge", "sources": ["x_split_train", "x_split_val"]}},
    }  # fmt: skip
    for name, operation in operations.items():
        edits[name]["operation"] = operation
    return {"datasets": {}, "edits": edits}


def _rows(root):
    return pa.concat_tables(pq.read_table(f) for f in sorted((root / "data").rglob("*.parquet")))


def test_a_killed_edit_resumes(source, tmp_path, snakemake_cmd, run_snakemake, file_tree):
    before = file_tree(source)
    config = _config(source)
    plan = tmp_path / "results/x_clean/edit/plan.json"
    run = subprocess.Popen(
        snakemake_cmd(tmp_path, config, "--cores", "1", "edit"),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not list(tmp_path.glob("results/x_clean/edit/reports/data/*/*.json")):
            assert run.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait(timeout=60)
    planned = plan.stat().st_mtime_ns
    run_snakemake(tmp_path, config, "--unlock")  # the lock a killed Snakemake leaves
    result = run_snakemake(tmp_path, config, "--cores", "2", "edit")
    assert "rule edit_publish:" in result.stdout + result.stderr
    assert plan.stat().st_mtime_ns == planned  # what was done is not done again
    results = tmp_path / "results"
    assert _rows(results / "x_merged/v3.0").equals(_rows(source))
    clean = json.loads((results / "x_clean/v3.0/meta/info.json").read_text())
    assert clean["total_episodes"] == 6
    validation = json.loads((results / "x_clean/edit/validation.json").read_text())
    assert validation["reencoded"] == 0 and validation["cut"] >= 1
    assert file_tree(source) == before


@pytest.mark.parametrize(
    ("operation", "message"),
    [
        ({"x_clean": {"type": "delete_episodes", "episode_indices": [3, 8]}},
         "edit 'x_clean': dataset '{source}': episode 8: delete_episodes: no episode 8"),
        ({"x_split": {"type": "split", "splits": {"train": 0.5, "val": 0.25}}},
         "split fractions add up to 0.75, not 1"),
        ({"x_clean": {"type": "remove_feature", "feature_names": ["observation.stat"]}},
         "remove_feature: no feature 'observation.stat'"),
        ({"x_merged": {"type": "merge", "sources": ["x_split_train", "nowhere"]}},
         "source 'nowhere' is no dataset, no edit and no v3.0 folder"),
    ],
)  # fmt: skip
def test_a_bad_edit_is_refused_before_any_job(source, tmp_path, run_snakemake, operation, message):
    result = run_snakemake(tmp_path, _config(source, **operation), "--cores", "1", "edit",
                           check=False)  # fmt: skip
    assert result.returncode != 0
    assert message.format(source=source.resolve()) in result.stderr
    assert not (tmp_path / "results").exists()


def test_a_typo_gets_the_nearest_key(source, tmp_path, run_snakemake):
    config = _config(source)
    config["edits"]["x_clean"]["operation"]["episode_indice"] = [1]
    result = run_snakemake(tmp_path, config, "-n", "edit", check=False)
    assert result.returncode != 0
    assert "did you mean 'episode_indices'?" in result.stderr


def test_flagged_by_deletes_what_quality_flagged(source, tmp_path, run_snakemake):
    quality = tmp_path / "results/x/quality/quality.json"
    quality.parent.mkdir(parents=True)
    findings = [
        {"check": "frozen_camera", "severity": "error", "episode_index": 2},
        {"check": "frozen_camera", "severity": "warning", "episode_index": 4},
        {"check": "nan_inf", "severity": "error", "episode_index": 5},
    ]
    quality.write_text(json.dumps({"findings": findings}))
    config = {
        "datasets": {"x": {"path": str(source)}},
        "edits": {
            "x_flagged": {
                "source": "x",
                "operation": {"type": "delete_episodes", "flagged_by": ["frozen_camera"]},
            },
            "x_warned": {
                "source": "x",
                "operation": {
                    "type": "delete_episodes",
                    "flagged_by": ["frozen_camera"],
                    "severity": ["error", "warning"],
                },
            },
        },
    }
    run_snakemake(tmp_path, config, "--cores", "2", "edit")
    for name, deleted in (("x_flagged", [2]), ("x_warned", [2, 4])):
        root = tmp_path / f"results/{name}/v3.0"
        assert json.loads((root / "meta/info.json").read_text())["total_episodes"] == 8 - len(
            deleted
        )
        lengths = pq.read_table(source / "meta/episodes/chunk-000/file-000.parquet")["length"]
        kept = [n for i, n in enumerate(lengths.to_pylist()) if i not in deleted]
        assert _rows(root).num_rows == sum(kept)

"""The runner on a real converted dataset: results follow the schema, failures are clear."""

import datetime
import json
import subprocess
import sys
import time
from dataclasses import fields
from pathlib import Path

import jsonschema
import psutil
import pytest
import yaml

from robopipe.bench.ceiling import measure_ceiling
from robopipe.bench.runner import Settings, main, run_multi_node, run_scenario, start_fields
from robopipe.conversion.serial import convert_dataset
from robopipe.ranks import combine_rank_results
from robopipe.scenario_result import scenario_schema, write_scenario_result
from robopipe.workflow.bench import NOT_SETTINGS

REPO = Path(__file__).resolve().parents[2]
SCHEMA = scenario_schema()
QUICK = Settings(batch_size=4, warmup_batches=2, steady_s=0.5, probe_samples=8, shuffle_buffer=16)
LEROBOT_PYTHON = REPO / ".venv-lerobot/bin/python"


@pytest.mark.parametrize(
    "scenario",
    [
        "robopipe_map_local_single_cpu_w0_n1",
        "robopipe_map_local_sarm_cpu_w1_n1",
        "robopipe_map_http_single_cpu_w1_n1",
        "robopipe_stream_http_single_cpu_w2_n1",
        "robopipe_stream_s3_single_cpu_w0_n1",
    ],
)
def test_scenario_result_follows_schema(v30, tmp_path, scenario, monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    before = time.time()
    children = {child.pid for child in psutil.Process().children(recursive=True)}
    result = run_scenario("tiny", v30, scenario, QUICK)
    jsonschema.validate(result, SCHEMA)
    # the DataLoader workers have ended: none is left for the garbage collector to end
    left = [c for c in psutil.Process().children(recursive=True) if c.pid not in children]
    assert all(c.status() == psutil.STATUS_ZOMBIE for c in left if c.is_running()), left
    # when measuring started; no SLURM job, so no dispatch time; one rank, so no skew
    assert before < result["measure_start_unix"] < time.time()
    assert result["dispatch_s"] is None and result["start_skew_s"] is None
    assert result["startup_to_measure_s"] > 0
    (rank,) = result["ranks"]
    assert rank["measure_start_unix"] == result["measure_start_unix"]
    assert rank["barrier_wait_s"] is None and rank["dispatch_s"] is None
    assert result["scenario"] == scenario and result["samples"] > 0
    frames_per_sample = 2 * (8 if "sarm" in scenario else 1)  # 2 cameras
    assert result["frames"] == result["samples"] * frames_per_sample
    assert result["decoder_cache"]["misses"] >= 2
    assert result["fetch_share"] + result["decode_share"] == pytest.approx(1)
    remote = "_local_" not in scenario
    share = result["network_wait_share"]
    assert (share is not None) == remote and (share is None or 0 <= share < 1)
    assert result["gop_cache_mb"] == (64 if remote and "_map_" in scenario else None)
    assert result["gop_ahead"] == (32 if remote and "_map_" in scenario else None)
    assert result["batch_buffer_mb"] == 512
    tiny_batch_mb = 4 * frames_per_sample * 32 * 48 * 3 / 2**20  # batch 4 of 32x48 RGB frames
    assert result["batch_mb"] == pytest.approx(tiny_batch_mb)
    assert result["prefetch_factor"] == (None if "_w0_" in scenario else 2)
    assert result["peak_pss_mb"] > 0 and result["peak_rss_mb"] > 0
    write_scenario_result(result, tmp_path / "r.json", tmp_path / "r.csv")
    header, row = (tmp_path / "r.csv").read_text().splitlines()
    assert "latency_ms_p99" in header.split(",") and len(header.split(",")) == len(row.split(","))
    assert json.loads((tmp_path / "r.json").read_text()) == result


def test_two_ranks_combine(v30, tmp_path, monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    result = run_multi_node(
        "tiny", v30, "robopipe_stream_local_single_cpu_w1_n2", QUICK, tmp_path / "r.json"
    )
    jsonschema.validate(result, SCHEMA)
    assert [r["rank"] for r in result["ranks"]] == [0, 1]
    # the ranks waited for each other, then started measuring together
    starts = [r["measure_start_unix"] for r in result["ranks"]]
    assert result["start_skew_s"] == pytest.approx(max(starts) - min(starts))
    assert result["start_skew_s"] < 0.5
    assert all(r["barrier_wait_s"] >= 0 for r in result["ranks"])
    assert result["measure_start_unix"] == max(starts) and result["dispatch_s"] is None
    # from this process's start (pytest's) to the last rank's start
    assert result["startup_to_measure_s"] > max(r["startup_to_measure_s"] for r in result["ranks"])
    assert result["samples"] == sum(r["samples"] for r in result["ranks"])
    assert result["frames_per_s_per_node"] == pytest.approx(result["frames_per_s"] / 2)
    assert result["peak_pss_total_mb"] > result["peak_pss_mb"] > 0


def test_cli_fails_clearly_when_workers_cannot_all_get_work(v30, tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "robopipe.bench.runner", "--dataset", "tiny", "--root", str(v30),
         "--scenario", "robopipe_stream_local_single_cpu_w7_n1",
         "--json", str(tmp_path / "r.json"), "--csv", str(tmp_path / "r.csv")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 1
    assert "tiny/robopipe_stream_local_single_cpu_w7_n1" in done.stderr
    assert "disjoint non-empty" in done.stderr
    assert not (tmp_path / "r.json").exists()


def test_an_unknown_setting_is_refused_with_the_nearest_key(tmp_path, capsys):
    """Issue 39: ``steady_z`` for ``steady_s`` used to be dropped, and the run measured the
    default window; it is refused as the config schema's check refuses a misspelt key."""
    with pytest.raises(ValueError, match="unknown setting 'steady_z': did you mean 'steady_s'?"):
        Settings.from_config({"batch_size": 4, "steady_z": 30})
    with pytest.raises(ValueError, match="unknown setting 'zzz': valid: batch_size, image_dtype"):
        Settings.from_config({"zzz": 1})
    assert Settings.from_config({"steady_s": 30, "lerobot_python": None}).steady_s == 30
    args = ["--dataset", "tiny", "--root", str(tmp_path), "--scenario",
            "robopipe_map_local_single_cpu_w0_n1", "--json", str(tmp_path / "r.json"),
            "--csv", str(tmp_path / "r.csv")]  # fmt: skip
    for settings, message in [
        ('{"steady_z": 30}', "unknown setting 'steady_z': did you mean 'steady_s'?"),
        ("[30]", "a JSON object of Settings fields"),
        ("{steady_s: 30}", "--settings: Expecting property name"),
    ]:
        with pytest.raises(SystemExit) as exited:
            main([*args, "--settings", settings])
        assert exited.value.code == 2
        assert message in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()
    # the workflow's bench jobs pass the config's bench: section less NOT_SETTINGS: every key
    # the schema allows there is a setting or one of those
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    allowed = set(schema["properties"]["bench"]["properties"])
    assert allowed - set(NOT_SETTINGS) <= {f.name for f in fields(Settings)}


def test_lerobot_loader_needs_an_interpreter(v30):
    with pytest.raises(ValueError, match="lerobot_python"):
        run_scenario("tiny", v30, "lerobot_map_local_single_cpu_w0_n1", QUICK)


@pytest.mark.skipif(not LEROBOT_PYTHON.exists(), reason="no lerobot env (tools/lerobot_env.sh)")
def test_lerobot_map_through_its_own_interpreter(v30):
    settings = Settings(**{**QUICK.__dict__, "lerobot_python": str(LEROBOT_PYTHON)})
    result = run_scenario("tiny", v30, "lerobot_map_local_single_cpu_w0_n1", settings)
    jsonschema.validate(result, SCHEMA)
    assert result["frames"] == 2 * result["samples"] and result["decoder_cache"] is None


def test_ceiling(v30):
    out = measure_ceiling(str(v30), "tiny", frames=20)
    assert out["camera_count"] == 2 and out["frames_measured"] == 80
    assert out["sequential_frames_per_s_per_core"] > 0 and out["random_frames_per_s_per_core"] > 0
    assert out["sequential_cpu_ms_per_frame"] > 0 and out["random_cpu_ms_per_frame"] > 0


def test_ceiling_without_cameras(make_v21, tmp_path):
    source = make_v21(episodes=2, cameras=0, min_length=5, max_length=8)
    v30 = tmp_path / "v3.0"
    convert_dataset(source, v30, name="nocam")
    out = measure_ceiling(str(v30), "nocam", frames=20)
    assert out["camera_count"] == 0 and out["frames_measured"] == 0
    assert out["sequential_frames_per_s_per_core"] is None
    assert out["random_frames_per_s_per_core"] is None
    assert out["sequential_cpu_ms_per_frame"] is None


def test_prefetch_factor_falls_to_one_when_batches_exceed_the_budget(v30):
    budget = 2 * 4 * 16 * 32 * 48 * 3 / 2**20  # 2 sarm batches: not 3 of them (w1 x 1 + 2)
    settings = Settings(**{**QUICK.__dict__, "batches_in_flight_mb": budget})
    result = run_scenario("tiny", v30, "robopipe_stream_local_sarm_cpu_w1_n1", settings)
    jsonschema.validate(result, SCHEMA)
    assert result["batches_in_flight_mb"] == budget and result["prefetch_factor"] == 1
    assert result["frames"] == result["samples"] * 16


def test_combined_ranks_say_how_far_apart_they_started(tmp_path):
    paths = []
    for rank, start in enumerate([1000.25, 1000.0, 1000.5]):
        paths.append(tmp_path / f"r{rank}.json")
        result = {"rank": rank, "samples": 8, "frames": 16, "steady_wall_s": 1.0}
        paths[-1].write_text(json.dumps({**result, "measure_start_unix": start}))
    assert combine_rank_results(paths)["start_skew_s"] == 0.5
    old = tmp_path / "old.json"  # written before the ranks recorded their start
    old.write_text(json.dumps({"samples": 8, "frames": 16, "steady_wall_s": 1.0}))
    assert combine_rank_results([*paths, old])["start_skew_s"] is None


SQUEUE = """#!/bin/sh
# squeue -h -j JOB -o %S: the job's start time, as a SLURM job's squeue prints it
[ "$1 $2 $3 $4 $5" = "-h -j 4242 -o %S" ] || exit 1
echo {started}
"""


def test_dispatch_runs_from_the_slurm_jobs_start_to_measuring(tmp_path, monkeypatch):
    """In a SLURM job (SLURM_JOB_ID, squeue's start time; here a stand-in squeue that says the
    job started 30 s before measuring), dispatch_s is the time between."""
    measure_start = time.time()
    started = datetime.datetime.fromtimestamp(measure_start - 30).isoformat(timespec="seconds")
    (tmp_path / "squeue").write_text(SQUEUE.format(started=started))
    (tmp_path / "squeue").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{Path(sys.executable).parent}:/usr/bin:/bin")
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    fields = start_fields(measure_start)
    assert 30 <= fields["dispatch_s"] <= 31  # squeue's start time has 1 s resolution
    assert fields["measure_start_unix"] == measure_start
    assert fields["startup_to_measure_s"] > 0
    monkeypatch.delenv("SLURM_JOB_ID")
    assert start_fields(measure_start)["dispatch_s"] is None

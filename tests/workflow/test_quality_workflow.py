"""`snakemake quality` on a small v2.1 dataset with injected faults and on its v3.0 form (one
shared run): quality.json names each fault's check and episode, episodes.parquet has a row
per episode, the figures are drawn; `fail_on: error` fails the run naming the finding while
quality.json stays; a killed run resumes where it stopped."""

import json
import os
import signal
import subprocess
import time

import pandas as pd
import pytest

from robopipe.conversion.serial import convert_dataset
from robopipe.harness.faults import copy_dataset, inject_black_camera, inject_nan
from robopipe.layout import REPORT_QUALITY_FIGURES

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sources(make_v21, tmp_path_factory):
    """A 4-episode v2.1 dataset (1 camera, 10 fps, 3-4 s episodes) with a black camera
    stretch in episode 2, and its v3.0 conversion; then NaN in episode 1's state of the v2.1
    one (an error finding); and the faults of each."""
    base = tmp_path_factory.mktemp("quality")
    clean = make_v21(episodes=4, cameras=1, min_length=30, max_length=40, fps=10)
    v21 = copy_dataset(clean, base / "v21")
    black = inject_black_camera(v21, 2, start=5)
    v30 = base / "v30"
    convert_dataset(v21, v30, name="v30")
    faults = {"v21": [inject_nan(v21, 1, frame=3), black], "v30": [black]}
    return {"v21": v21, "v30": v30}, faults


def config_of(roots, shard_episodes=2, **quality):
    config = {
        "datasets": {name: {"path": str(root)} for name, root in roots.items()},
        "conversion": {"episodes_per_shard": shard_episodes},
    }
    if quality:
        config["quality"] = quality
    return config


@pytest.fixture(scope="module")
def run(sources, tmp_path_factory, run_snakemake):
    """One `snakemake quality` of both datasets; its working directory."""
    roots, _faults = sources
    workdir = tmp_path_factory.mktemp("run")
    run_snakemake(workdir, config_of(roots), "--cores", "2", "quality")
    return workdir


def report_of(workdir, name):
    return json.loads((workdir / f"results/{name}/quality/quality.json").read_text())


def test_quality_json_names_each_injected_fault(sources, run):
    _roots, faults = sources
    for name in ("v21", "v30"):
        report = report_of(run, name)
        assert report["dataset"] == name and report["episodes"] == 4
        found = {(f["check"], f["episode_index"]) for f in report["findings"]}
        for fault in faults[name]:
            assert (fault.check, fault.episode) in found, (name, fault)
        errors = {f["episode_index"] for f in report["findings"] if f["severity"] == "error"}
        assert errors <= {fault.episode for fault in faults[name]}, report["findings"]
        episodes = pd.read_parquet(run / f"results/{name}/quality/episodes.parquet")
        assert episodes["episode_index"].tolist() == [0, 1, 2, 3]
        assert episodes.loc[2, "black_camera"] == "warning"
        assert episodes["nan_inf"].tolist() == (
            ["", "error", "", ""] if name == "v21" else [""] * 4
        )
        verdict = json.loads((run / f"results/{name}/quality/verdict.json").read_text())
        assert verdict == {"fail_on": "never", "passed": True}
    # the v2.1 source in its plan's 2 shards, the v3.0 one in its 1 data file
    assert len(list(run.glob("results/v21/quality/batches/shard-*.json"))) == 2
    assert [p.name for p in run.glob("results/v30/quality/batches/*.json")] == [
        "chunk-000_file-000.json"
    ]


def test_the_quality_figures_are_drawn(run):
    for name in ("v21", "v30"):
        out = run / f"results/report/{name}/quality"
        for stem in REPORT_QUALITY_FIGURES:
            assert (out / f"{stem}.svg").stat().st_size > 0
            assert (out / f"{stem}.png").stat().st_size > 0
        assert "black_camera" in (out / "quality_cameras.svg").read_text()
    assert "nan_inf" in (run / "results/report/v21/quality/quality_signals.svg").read_text()


def test_fail_on_error_fails_the_run_naming_the_finding(sources, run, run_snakemake):
    roots, _faults = sources
    config = config_of(roots, fail_on="error")
    result = run_snakemake(run, config, "--cores", "2", "quality", check=False)
    out = result.stdout + result.stderr
    assert result.returncode != 0
    assert "nan_inf" in out and "observation.state" in out
    assert "rule quality_batch:" not in out  # fail_on decides the verdict only
    assert report_of(run, "v21")["findings"]  # the findings stay to be read
    # back to the default (never): the run passes again, the verdict alone rerun
    result = run_snakemake(run, config_of(roots), "--cores", "2", "quality")
    assert "rule quality_merge:" not in result.stdout + result.stderr


def test_a_killed_run_resumes(sources, run, tmp_path, snakemake_cmd, run_snakemake):
    roots, _faults = sources
    config = config_of({"v21": roots["v21"]}, shard_episodes=1)  # 4 batches, one at a time
    batches = tmp_path / "results/v21/quality/batches"
    run_one_job_at_a_time = snakemake_cmd(tmp_path, config, "--cores", "1", "quality")
    process = subprocess.Popen(
        run_one_job_at_a_time,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:  # killed once a second batch is written: the first is then recorded as complete
        deadline = time.monotonic() + 300
        while len(list(batches.glob("*.json"))) < 2 and process.poll() is None:
            assert time.monotonic() < deadline, "no 2 batches finished in 300 s"
            time.sleep(0.2)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=60)
    done = len(list(batches.glob("*.json")))
    assert done >= 2
    run_snakemake(tmp_path, config, "--unlock")
    result = run_snakemake(tmp_path, config, "--cores", "2", "quality")
    # each batch recorded complete is kept; the last one written may not have been recorded
    rerun = (result.stdout + result.stderr).count("rule quality_batch:")
    assert 4 - done <= rerun <= 4 - done + 1
    # the findings do not depend on how the episodes were batched
    assert report_of(tmp_path, "v21")["findings"] == report_of(run, "v21")["findings"]

"""The conversion as Snakemake runs it: dry run, jobs, output, bad input, kill and resume."""

import json
import os
import re
import shutil
import signal
import subprocess
import time
from base64 import urlsafe_b64decode
from pathlib import Path

import pytest

from robopipe.conversion.serial import convert_dataset

ROLLOVER = {
    "data_file_size_in_mb": 0.004,
    "video_file_size_in_mb": 0.02,
    "chunks_size": 3,
    "episodes_per_shard": 2,
}


def _config(source, **conversion):
    return {"datasets": {"ds": {"path": str(source), "conversion": conversion}}}


def _marked_incomplete(workdir: Path) -> set[str]:
    """The outputs Snakemake has marked as started but not recorded complete: one file each
    under ``.snakemake/incomplete``, named by the output's path in URL-safe base64 (split into
    parts of at most 254 characters, each but the last led by ``@``)."""
    root = workdir / ".snakemake/incomplete"
    return {
        urlsafe_b64decode("".join(part.lstrip("@") for part in p.relative_to(root).parts)).decode()
        for p in root.rglob("*")
        if p.is_file() and p.name != "migration_underway"
    }


@pytest.fixture(scope="module")
def source(make_v21):
    return make_v21(episodes=12, cameras=2)


def test_dry_run_lists_every_shard_and_aggregate_job(source, tmp_path, run_snakemake):
    result = run_snakemake(tmp_path, _config(source, **ROLLOVER), "-n", "--quiet", "rules")
    plan = convert_dataset(source, tmp_path / "ref", name="ds", **ROLLOVER, validate=False)
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", result.stdout, re.M))
    assert int(counts["shard"]) == len(plan.shards)
    assert int(counts["aggregate_data"]) == len(plan.data_files)
    assert int(counts["aggregate_video"]) == sum(len(f) for f in plan.video_files.values())
    assert not (tmp_path / "results").exists()


def test_workflow_output_equals_the_in_process_conversion(
    source, tmp_path, run_snakemake, file_tree
):
    run_snakemake(tmp_path, _config(source, **ROLLOVER), "--cores", "2", "convert")
    convert_dataset(source, tmp_path / "ref", name="ds", **ROLLOVER)
    published = file_tree(tmp_path / "results/ds/v3.0")
    assert published == file_tree(tmp_path / "ref")
    assert len([p for p in published if p.startswith("videos/")]) >= 4
    everything = [
        p.relative_to(tmp_path / "results/ds/v3.0")
        for p in (tmp_path / "results/ds/v3.0").rglob("*")
    ]
    assert {p.parts[0] for p in everything} == {"meta", "data", "videos"}  # nothing hidden
    assert not [p for p in everything if p.name.startswith(".")]
    validation = json.loads((tmp_path / "results/ds/validation.json").read_text())
    assert validation["episodes"] == 12
    assert (tmp_path / "results/jobs/ds/shard/shard-000000.tsv").is_file()
    # the plan job reused the parse-time plan (no footer read twice), and it made these files
    assert "the parse-time plan" in (tmp_path / "results/logs/ds/plan.log").read_text()


def test_bad_input_stops_the_run_with_a_clear_message(make_v21, tmp_path, run_snakemake):
    root = tmp_path / "src"
    shutil.copytree(make_v21(episodes=6), root)
    (root / "videos/chunk-000/observation.images.front/episode_000002.mp4").write_bytes(b"junk")
    result = run_snakemake(tmp_path, _config(root), "--cores", "2", "convert", check=False)
    assert result.returncode != 0
    assert (
        "dataset 'ds': episode 2: file videos/chunk-000/observation.images.front/"
        "episode_000002.mp4: cannot read video" in result.stderr
    )
    assert not (tmp_path / "results/ds/v3.0").exists()


def test_a_killed_run_resumes_without_redoing_finished_shards(
    source, tmp_path, snakemake_cmd, file_tree
):
    config = _config(source, **{**ROLLOVER, "episodes_per_shard": 1})
    reference = tmp_path / "uninterrupted"
    subprocess.run(
        snakemake_cmd(reference, config, "--cores", "1", "convert"), check=True, capture_output=True
    )
    work = tmp_path / "killed"
    process = subprocess.Popen(
        snakemake_cmd(work, config, "--cores", "1", "convert"),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    shards = work / "results/ds/shards"

    def recorded_complete() -> dict[str, int]:
        # A shard is finished once Snakemake has stamped it and then removed its incomplete
        # marker; one killed between the two (CI, stop 42: shard-000006 was redone) or before
        # the stamp is rerun by --rerun-incomplete.
        incomplete = _marked_incomplete(work)
        return {
            p.name: p.stat().st_mtime_ns
            for p in shards.glob("shard-*")
            if (p / ".snakemake_timestamp").exists()
            and p.relative_to(work).as_posix() not in incomplete
        }

    deadline = time.monotonic() + 120
    try:
        while len(recorded_complete()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=60)
    finished = recorded_complete()
    assert 2 <= len(finished) < 12, "the run should be killed midway"
    assert not (work / "results/ds/v3.0").exists()

    # a killed snakemake leaves its lock behind: unlock, then resume
    subprocess.run(snakemake_cmd(work, config, "--unlock"), check=True, capture_output=True)
    subprocess.run(
        snakemake_cmd(work, config, "--cores", "1", "--rerun-incomplete", "convert"),
        check=True,
        capture_output=True,
    )
    for name, mtime in finished.items():
        assert (shards / name).stat().st_mtime_ns == mtime, f"{name} was redone"
    assert file_tree(work / "results/ds/v3.0") == file_tree(reference / "results/ds/v3.0")

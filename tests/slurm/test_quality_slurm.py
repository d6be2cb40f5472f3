"""`snakemake quality` through the SLURM profile (the README's command) on the local
two-node cluster writes the quality.json of a local run, for a v2.1 folder and a v3.0 one
(whose batches come from a checkpoint)."""

import json

import pytest

from robopipe.conversion.serial import convert_dataset
from robopipe.harness.faults import copy_dataset, inject_black_camera

pytestmark = [pytest.mark.slow, pytest.mark.slurm]

# what differs between two runs of the same checks: the time decoding took
TIMINGS = ("decode_s",)


def _report(workdir, name):
    report = json.loads((workdir / f"results/{name}/quality/quality.json").read_text())
    for key in TIMINGS:
        report["decode"].pop(key)
    return report


def test_slurm_quality_writes_the_local_runs_quality_json(
    slurm_cluster, make_v21, tmp_path, run_snakemake, slurm_args
):
    root = copy_dataset(make_v21(episodes=4, cameras=1, fps=10, min_length=30, max_length=40),
                        tmp_path / "ds")  # fmt: skip
    inject_black_camera(root, 2, start=5)
    convert_dataset(root, tmp_path / "v30", name="v30")
    config = {
        "datasets": {"ds": {"path": str(root)}, "v30": {"path": str(tmp_path / "v30")}},
        "conversion": {"episodes_per_shard": 2},
    }
    run_snakemake(tmp_path / "local", config, "--cores", "2", "quality")
    run_snakemake(tmp_path / "slurm", config, *slurm_args, "quality")
    for name in ("ds", "v30"):
        local = _report(tmp_path / "local", name)
        found = {(f["check"], f["episode_index"]) for f in local["findings"]}
        assert ("black_camera", 2) in found
        assert _report(tmp_path / "slurm", name) == local
    # each small dataset's check, (plan,) batches and merge in one SLURM job per group; the
    # v3.0 one's merge, after its batches checkpoint, a SLURM job of its own
    folder = tmp_path / "slurm/.snakemake/slurm_logs"
    logs = [log.relative_to(folder).as_posix() for log in folder.rglob("*.log")]
    assert any(log.startswith("group_convert_ds_plan_quality_batch_quality_merge") for log in logs)
    assert any(log.startswith("group_convert_v30_quality_batch/") for log in logs), logs
    assert any(log.startswith("rule_quality_merge/v30/") for log in logs), logs

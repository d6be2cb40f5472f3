"""`snakemake quality` through the SLURM profile (the README's command) on the local
two-node cluster writes the quality.json of a local run."""

import json

import pytest

from robopipe.harness.faults import copy_dataset, inject_black_camera

pytestmark = [pytest.mark.slow, pytest.mark.slurm]

# what differs between two runs of the same checks: the time decoding took
TIMINGS = ("decode_s",)


def _report(workdir):
    report = json.loads((workdir / "results/ds/quality/quality.json").read_text())
    for key in TIMINGS:
        report["decode"].pop(key)
    return report


def test_slurm_quality_writes_the_local_runs_quality_json(
    slurm_cluster, make_v21, tmp_path, run_snakemake, slurm_args
):
    root = copy_dataset(make_v21(episodes=4, cameras=1, fps=10, min_length=30, max_length=40),
                        tmp_path / "ds")  # fmt: skip
    inject_black_camera(root, 2, start=5)
    config = {"datasets": {"ds": {"path": str(root)}}, "conversion": {"episodes_per_shard": 2}}
    run_snakemake(tmp_path / "local", config, "--cores", "2", "quality")
    run_snakemake(tmp_path / "slurm", config, *slurm_args, "quality")
    local = _report(tmp_path / "local")
    assert ("black_camera", 2) in {(f["check"], f["episode_index"]) for f in local["findings"]}
    assert _report(tmp_path / "slurm") == local
    # a small dataset: its check, plan, batches and merge in one SLURM job (group convert_ds)
    logs = list((tmp_path / "slurm/.snakemake/slurm_logs").rglob("*.log"))
    assert [log.parent.name.startswith("group_convert_ds") for log in logs] == [True]

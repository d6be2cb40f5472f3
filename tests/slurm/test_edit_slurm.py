"""`snakemake edit` on a real SLURM cluster: the same output as a local run, the file jobs
submitted as job arrays (profiles/slurm). The cluster edits the local run's conversion (a v3.0
path as the source), so that the cluster runs the edit jobs alone."""

import pytest

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def _edits(source: str) -> dict:
    return {
        "edits": {
            "ds_clean": {
                "source": source,
                "operation": {"type": "delete_episodes", "episode_indices": [1, 5]},
            },
            "ds_restated": {"source": "ds_clean", "operation": {"type": "recompute_stats"}},
        },
    }


def test_slurm_edits_publish_the_same_bytes_as_a_local_run(
    slurm_cluster, make_v21, tmp_path, run_snakemake, slurm_args, file_tree
):
    source = make_v21(episodes=8, cameras=1, min_length=20, max_length=40)
    local = tmp_path / "local"
    config = {"datasets": {"ds": {"path": str(source)}}, **_edits("ds")}
    run_snakemake(local, config, "--cores", "2", "edit")
    cluster = tmp_path / "slurm"
    result = run_snakemake(cluster, _edits(str(local / "results/ds/v3.0")), *slurm_args, "edit")
    for name in ("ds_clean", "ds_restated"):
        got = file_tree(cluster / f"results/{name}/v3.0")
        assert got and got == file_tree(local / f"results/{name}/v3.0"), name
    output = result.stdout + result.stderr
    assert "rule edit_video:" in output
    # the file jobs went to the cluster (the profile submits them as job arrays)
    root = cluster / ".snakemake/slurm_logs"
    rules = {p.relative_to(root).parts[0] for p in root.rglob("*.log")}
    assert {"rule_edit_data", "rule_edit_video", "rule_edit_meta"} <= rules, sorted(rules)
    assert "rule_edit_publish" not in rules  # a rename, run where Snakemake runs

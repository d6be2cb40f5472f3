"""robopipe.workflow.groups: the SLURM group of each job, by dataset size and source kind."""

from robopipe.workflow.groups import slurm_group


def test_small_dataset_one_group_per_stage():
    assert slurm_group("shard", "d", "path", 50, 1000) == "convert_d"
    assert slurm_group("publish", "d", "path", 50, 1000) == "convert_d"
    assert slurm_group("plan", "d", "path", 50, 1000) == "convert_d"
    assert slurm_group("plan", "d", "robomimic", 50, 1000) == "robomimic_d"
    assert slurm_group("plan", "d", "demo", 50, 1000) == "source_d"
    assert slurm_group("demo", "d", "demo", 50, 1000) == "source_d"
    assert slurm_group("robomimic_batch", "d", "robomimic", 1000, 1000) == "robomimic_d"


def test_large_or_unknown_dataset_spreads():
    for episodes in (1001, None):
        assert slurm_group("shard", "d", "repo_id", episodes, 1000) == "shards"
        assert slurm_group("aggregate_video", "d", "path", episodes, 1000) == "aggregates"
        assert slurm_group("aggregate_data", "d", "path", episodes, 1000) == "aggregates"
        assert slurm_group("validate", "d", "path", episodes, 1000) is None
        assert slurm_group("plan", "d", "path", episodes, 1000) is None


def test_jobs_a_checkpoint_replaces_run_alone():
    for rule in ("meta", "validate", "publish"):
        assert slurm_group(rule, "d", "demo", 50, 1000) is None
        assert slurm_group(rule, "d", "path", 50, 1000) == "convert_d"
    assert slurm_group("robomimic_v21", "d", "robomimic", 50, 1000) is None
    assert slurm_group("shard", "d", "demo", 50, 1000) == "convert_d"

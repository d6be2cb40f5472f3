"""robopipe.workflow.groups: the SLURM group of each job, by dataset size and plan stage."""

from robopipe.workflow.groups import slurm_group


def test_small_dataset_one_group_per_stage():
    assert slurm_group("shard", "d", "convert", 50, 1000) == "convert_d"
    assert slurm_group("publish", "d", "convert", 50, 1000) == "convert_d"
    assert slurm_group("plan", "d", "convert", 50, 1000) == "convert_d"
    assert slurm_group("plan", "d", "robomimic", 50, 1000) == "robomimic_d"
    assert slurm_group("plan", "d", "source", 50, 1000) == "source_d"
    assert slurm_group("demo", "d", "source", 50, 1000) == "source_d"
    assert slurm_group("robomimic_batch", "d", "robomimic", 1000, 1000) == "robomimic_d"


def test_large_or_unknown_dataset_runs_every_job_alone():
    # each job its own SLURM job: the profile submits a rule's many jobs as one job array
    for episodes in (1001, None):
        for rule in ("source_check_part", "shard", "aggregate_video", "aggregate_data"):
            assert slurm_group(rule, "d", "source", episodes, 1000) is None
        assert slurm_group("meta", "d", "convert", episodes, 1000) is None
        assert slurm_group("plan", "d", "convert", episodes, 1000) is None
        # but validate and publish, one after the other, are one SLURM job
        assert slurm_group("validate", "d", "convert", episodes, 1000) == "publish_d"
        assert slurm_group("publish", "d", "convert", episodes, 1000) == "publish_d"
        assert slurm_group("publish", "d", "source", episodes, 1000) is None


def test_jobs_a_checkpoint_replaces_run_alone():
    for rule in ("meta", "validate", "publish"):
        assert slurm_group(rule, "d", "source", 50, 1000) is None
        assert slurm_group(rule, "d", "convert", 50, 1000) == "convert_d"
    assert slurm_group("robomimic_v21", "d", "robomimic", 50, 1000) is None
    assert slurm_group("shard", "d", "source", 50, 1000) == "convert_d"

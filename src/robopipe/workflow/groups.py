"""SLURM job groups of the conversion and source rules (local runs ignore groups).

A job's fixed cost on a cluster (scheduling, and Snakemake starting inside the job) is paid
once per group job, but the jobs of a group job run one after the other, each starting a
Snakemake of its own (docs/cluster.md measured it). A small dataset's jobs form one group job
per stage, where that series is short; a stage ends at a checkpoint whose result the next
stage's jobs need (``robomimic_plan``: the batches; ``plan``, for a source made by a rule: the
shards). A large dataset's jobs are not grouped but for its last two (validate, publish): the
SLURM profile submits the many jobs of one rule (source check parts, shards, final files) as
one job array, whose elements run side by side on the cluster's nodes.
"""

from __future__ import annotations

# the stage of each rule that runs before conversion, for a small dataset; every other rule
# is in stage "convert"
SMALL_DATASET_STAGES = {
    "demo": "source",
    "robomimic_generate": "source",
    "robomimic_plan": "source",
    "robomimic_batch": "robomimic",
    "robomimic_v21": "robomimic",
    "robomimic_robo": "robomimic",
}
# default of config slurm.one_job_episodes
ONE_JOB_EPISODES = 1000
# rules whose inputs are read from a checkpoint's output (the plan, or the robomimic plan)
# when the source is made by a rule: Snakemake replaces such a job once the checkpoint has
# run, and a group holding the replaced job fails the dry run (KeyError in
# DAG.update_ready, Snakemake 9.x), so each of these runs as a job of its own
AFTER_CHECKPOINT = ("meta", "validate", "publish", "robomimic_v21", "quality_merge")
# the last two jobs of a large dataset, one SLURM job: publish is a rename, which would cost a
# job start of its own (10-20 s: docs/cluster.md); they run one after the other on one CPU
PUBLISH_GROUP = ("validate", "publish")


def slurm_group(
    rule: str, dataset: str, plan_stage: str, episodes: int | None, one_job_episodes: int
) -> str | None:
    """The ``group:`` of one job of a conversion or source rule.

    Args:
        rule: the rule's name (``shard``, ``plan``, ``demo``, ...).
        dataset: the dataset's name.
        plan_stage: the stage of its ``plan`` job (robopipe.sources.Source.plan_stage):
            ``convert`` for a source planned while the DAG is built (with the conversion),
            ``robomimic`` (with the robomimic batches) or ``source`` (with the source) for
            one planned by the ``plan`` checkpoint.
        episodes: its episode count, or None where it is unknown before a job runs.
        one_job_episodes: config ``slurm.one_job_episodes``: the most episodes a dataset may
            have to run as one group job per stage.

    Returns:
        ``<stage>_<dataset>`` for a small dataset (stage ``source``, ``robomimic`` or
        ``convert``), but None for the rules of :data:`AFTER_CHECKPOINT` of a source planned
        by the checkpoint; for a larger one, or one of unknown size, ``publish_<dataset>``
        for the rules of :data:`PUBLISH_GROUP` (where not after the checkpoint), else None (a
        SLURM job, or job array element, of its own).
    """
    if plan_stage != "convert" and rule in AFTER_CHECKPOINT:
        return None
    if episodes is None or episodes > one_job_episodes:
        return f"publish_{dataset}" if rule in PUBLISH_GROUP else None
    stage = plan_stage if rule == "plan" else SMALL_DATASET_STAGES.get(rule, "convert")
    return f"{stage}_{dataset}"

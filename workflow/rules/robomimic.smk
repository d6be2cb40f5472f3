# robomimic HDF5 -> LeRobot v2.1 in results/{dataset}/robomimic_v21 (then v3.0 by conversion.smk):
# a generated file or the configured one -> plan (checkpoint) -> one job per batch of demos
# (parquet, mp4 per camera, meta lines) -> one job linking the batches into the v2.1 folder.
from robopipe.layout import (
    JOB_STATS_FILE,
    LOG_FILE,
    ROBOMIMIC_BATCH_DIR,
    ROBOMIMIC_GENERATED,
    ROBOMIMIC_PLAN,
    ROBOMIMIC_V21_DIR,
    ROBO_FILE,
)


def robomimic_hdf5(wildcards):
    """input: the dataset's robomimic file (configured, or generated)."""
    return DATASETS[wildcards.dataset].hdf5()


def robomimic_batch_dirs(wildcards):
    """Every batch folder of the dataset's robomimic plan, in plan order."""
    return targets.robomimic_batch_dirs(
        checkpoints.robomimic_plan.get(dataset=wildcards.dataset).output.plan,
        wildcards.dataset,
    )


rule robomimic_generate:
    output:
        ROBOMIMIC_GENERATED,
    log:
        LOG_FILE.format(dataset="{dataset}", step="robomimic_generate"),
    benchmark:
        JOB_STATS_FILE.format(
            dataset="{dataset}", step="robomimic_generate/robomimic_generate"
        )
    group:
        slurm_group("robomimic_generate")
    conda:
        ROBOPIPE_ENV
    params:
        options=lambda w: DATASETS[w.dataset].generate_options(),
    script:
        "../../scripts/robomimic_generate.py"


checkpoint robomimic_plan:
    input:
        hdf5=robomimic_hdf5,
    output:
        plan=ROBOMIMIC_PLAN,
    log:
        LOG_FILE.format(dataset="{dataset}", step="robomimic_plan"),
    benchmark:
        JOB_STATS_FILE.format(dataset="{dataset}", step="robomimic_plan/robomimic_plan")
    group:
        slurm_group("robomimic_plan")
    conda:
        ROBOPIPE_ENV
    params:
        options=lambda w: DATASETS[w.dataset].robomimic_options(),
    script:
        "../../scripts/robomimic_plan.py"


rule robomimic_batch:
    input:
        plan=ROBOMIMIC_PLAN,
        hdf5=robomimic_hdf5,
    output:
        directory(ROBOMIMIC_BATCH_DIR),
    log:
        LOG_FILE.format(dataset="{dataset}", step="robomimic_batch/{batch}"),
    benchmark:
        JOB_STATS_FILE.format(dataset="{dataset}", step="robomimic_batch/{batch}")
    group:
        slurm_group("robomimic_batch")
    conda:
        ROBOPIPE_ENV
    script:
        "../../scripts/robomimic_batch.py"


rule robomimic_v21:
    input:
        plan=ROBOMIMIC_PLAN,
        batches=robomimic_batch_dirs,
    output:
        directory(ROBOMIMIC_V21_DIR),
    log:
        LOG_FILE.format(dataset="{dataset}", step="robomimic_v21"),
    benchmark:
        JOB_STATS_FILE.format(dataset="{dataset}", step="robomimic_v21/robomimic_v21")
    group:
        slurm_group("robomimic_v21")
    conda:
        ROBOPIPE_ENV
    script:
        "../../scripts/robomimic_v21.py"


# The seed paper's robo format of the dataset's robomimic file (robopipe.robomimic.robo): read
# by the robopipe_seq_tar benchmark loader.
rule robomimic_robo:
    input:
        hdf5=robomimic_hdf5,
    output:
        ROBO_FILE,
    log:
        LOG_FILE.format(dataset="{dataset}", step="robomimic_robo"),
    benchmark:
        JOB_STATS_FILE.format(dataset="{dataset}", step="robomimic_robo/robomimic_robo")
    group:
        slurm_group("robomimic_robo")
    conda:
        ROBOPIPE_ENV
    script:
        "../../scripts/robomimic_robo.py"

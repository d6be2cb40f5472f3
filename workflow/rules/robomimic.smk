# robomimic HDF5 -> LeRobot v2.1 in results/{dataset}/robomimic_v21 (then v3.0 by convert.smk):
# a generated file or the configured one -> plan (checkpoint) -> one job per batch of demos
# (parquet, mp4 per camera, meta lines) -> one job linking the batches into the v2.1 folder.


rule robomimic_generate:
    output:
        "results/{dataset}/robomimic/generated.hdf5",
    log:
        "results/logs/{dataset}/robomimic_generate.log",
    benchmark:
        "results/jobs/{dataset}/robomimic_generate/robomimic_generate.tsv"
    group:
        slurm_group("robomimic_generate")
    conda:
        ROBOPIPE_ENV
    params:
        options=robomimic_generate_options,
    script:
        "../../scripts/robomimic_generate.py"


checkpoint robomimic_plan:
    input:
        hdf5=robomimic_hdf5,
    output:
        plan="results/{dataset}/robomimic/plan.json",
    log:
        "results/logs/{dataset}/robomimic_plan.log",
    benchmark:
        "results/jobs/{dataset}/robomimic_plan/robomimic_plan.tsv"
    group:
        slurm_group("robomimic_plan")
    conda:
        ROBOPIPE_ENV
    params:
        options=robomimic_options,
    script:
        "../../scripts/robomimic_plan.py"


rule robomimic_batch:
    input:
        plan="results/{dataset}/robomimic/plan.json",
        hdf5=robomimic_hdf5,
    output:
        directory("results/{dataset}/robomimic/batches/{batch}"),
    log:
        "results/logs/{dataset}/robomimic_batch/{batch}.log",
    benchmark:
        "results/jobs/{dataset}/robomimic_batch/{batch}.tsv"
    group:
        slurm_group("robomimic_batch")
    conda:
        ROBOPIPE_ENV
    script:
        "../../scripts/robomimic_batch.py"


rule robomimic_v21:
    input:
        plan="results/{dataset}/robomimic/plan.json",
        batches=robomimic_batch_dirs,
    output:
        directory("results/{dataset}/robomimic_v21"),
    log:
        "results/logs/{dataset}/robomimic_v21.log",
    benchmark:
        "results/jobs/{dataset}/robomimic_v21/robomimic_v21.tsv"
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
        "results/logs/{dataset}/robomimic_robo.log",
    benchmark:
        "results/jobs/{dataset}/robomimic_robo/robomimic_robo.tsv"
    group:
        slurm_group("robomimic_robo")
    conda:
        ROBOPIPE_ENV
    script:
        "../../scripts/robomimic_robo.py"

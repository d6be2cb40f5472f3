# robomimic HDF5 -> LeRobot v2.1 in results/{dataset}/robomimic_v21 (then v3.0 by convert.smk):
# a generated file or the configured one -> plan (checkpoint) -> one job per batch of demos
# (parquet, mp4 per camera, meta lines) -> one job linking the batches into the v2.1 folder.

import json


wildcard_constraints:
    batch=r"batch-\d+",


ROBOMIMIC_NOT_OPTIONS = ("path", "generate")


def robomimic_entry(wildcards):
    return config["datasets"][wildcards.dataset]["robomimic"]


def robomimic_hdf5(wildcards):
    """The dataset's robomimic file: the configured `path`, or the generated file."""
    entry = robomimic_entry(wildcards)
    if "path" in entry:
        return entry["path"]
    return f"results/{wildcards.dataset}/robomimic/generated.hdf5"


def robomimic_options(wildcards):
    """params: robopipe.robomimic.convert.RobomimicOptions keywords from the config."""
    entry = robomimic_entry(wildcards)
    return {k: v for k, v in entry.items() if k not in ROBOMIMIC_NOT_OPTIONS}


def robomimic_generate_options(wildcards):
    """params: robopipe.robomimic.generate.generate_robomimic keywords from the config."""
    return robomimic_entry(wildcards)["generate"]


def robomimic_batch_dirs(wildcards):
    """Every batch folder of the dataset's robomimic plan, in plan order."""
    plan_file = checkpoints.robomimic_plan.get(dataset=wildcards.dataset).output.plan
    with open(plan_file, encoding="utf-8") as f:
        batches = json.load(f)["batches"]
    return [f"results/{wildcards.dataset}/robomimic/batches/{b['id']}" for b in batches]


rule robomimic_generate:
    output:
        "results/{dataset}/robomimic/generated.hdf5",
    log:
        "results/logs/{dataset}/robomimic_generate.log",
    benchmark:
        "results/benchmarks/{dataset}/robomimic_generate/robomimic_generate.tsv"
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
        "results/benchmarks/{dataset}/robomimic_plan/robomimic_plan.tsv"
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
        "results/benchmarks/{dataset}/robomimic_batch/{batch}.tsv"
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
        "results/benchmarks/{dataset}/robomimic_v21/robomimic_v21.tsv"
    script:
        "../../scripts/robomimic_v21.py"

# Dataloading benchmark: one job per scenario {loader}_{source}_{mode}_{decode}_w{workers}_n{nodes},
# expanded from config["bench"]["matrix"]; one decode-ceiling job per dataset; an H.264 copy of
# a dataset for the cuda (NVDEC) scenarios. Outputs follow the bench contract.
# Measuring jobs hold the `bench` resource: with `resources: [bench=1, network=1]` in the
# default profile they run one at a time locally, so they do not disturb each other's figures.


rule bench_scenario:
    input:
        dataset=bench_dataset_input,
        pushed=bench_pushed_input,
    output:
        json="results/bench/{dataset}/{scenario}.json",
        csv="results/bench/{dataset}/{scenario}.csv",
    log:
        "results/logs/{dataset}/bench_scenario/{scenario}.log",
    benchmark:
        "results/jobs/{dataset}/bench_scenario/{scenario}.tsv"
    wildcard_constraints:
        scenario=WILDCARD_CONSTRAINTS["scenario"],
    conda:
        ROBOPIPE_ENV
    threads: bench_threads
    resources:
        network=bench_network,
        bench=1,
        # read by the SLURM executor (workflow/profiles/slurm), ignored locally
        nodes=bench_nodes,
        tasks=bench_nodes,
        cpus_per_task=bench_threads,
        mem_mb=bench_mem_mb,
        mpi=bench_mpi,
        gres=bench_gres,
    params:
        settings=bench_settings,
    script:
        "../scripts/bench_scenario.py"


rule bench_ceiling:
    input:
        dataset=PUBLISHED_INFO,
    output:
        json="results/bench/{dataset}/ceiling.json",
    log:
        "results/logs/{dataset}/bench_ceiling/ceiling.log",
    benchmark:
        "results/jobs/{dataset}/bench_ceiling/ceiling.tsv"
    conda:
        ROBOPIPE_ENV
    resources:
        bench=1,
    params:
        frames=config["bench"].get("ceiling_frames", 300),
    script:
        "../scripts/bench_ceiling.py"


rule h264_copy:
    input:
        dataset=PUBLISHED_INFO,
    output:
        dataset="results/{dataset}/h264/meta/info.json",
    log:
        "results/logs/{dataset}/h264_copy/h264.log",
    benchmark:
        "results/jobs/{dataset}/h264_copy/h264.tsv"
    conda:
        ROBOPIPE_ENV
    params:
        options=config["bench"].get("h264", {}),
    script:
        "../scripts/h264_copy.py"


rule bench:
    default_target: False
    input:
        all_bench_results(),

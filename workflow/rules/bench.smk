# Dataloading benchmark: one job per scenario
# {loader}_{source}_{mode}[_e{encoding}]_{decode}_w{workers}_n{nodes}, expanded from
# config["bench"]["matrix"]; one decode-ceiling job per dataset and per copy read (copies.smk
# makes the copies; cuda scenarios without an encoding read the h264g2 copy). Outputs follow
# the bench contract.
# Measuring jobs hold the `bench` resource: with `resources: [bench=1, network=1]` in the
# default profile they run one at a time locally, so they do not disturb each other's figures.


rule bench_scenario:
    input:
        dataset=bench_dataset_input,
        pushed=bench_pushed_input,
        robo=bench_robo_input,
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
        # read by the SLURM executor (profiles/slurm), ignored locally
        nodes=bench_nodes,
        tasks=bench_nodes,
        cpus_per_task=bench_threads,
        mem_mb=bench_mem_mb,
        mpi=bench_mpi,
        gres=bench_gres,
    params:
        settings=bench_settings,
    script:
        "../../scripts/bench_scenario.py"


rule bench_ceiling:
    input:
        dataset=ceiling_input,
    output:
        json="results/bench/{dataset}/ceiling{suffix}.json",
    log:
        "results/logs/{dataset}/bench_ceiling/ceiling{suffix}.log",
    benchmark:
        "results/jobs/{dataset}/bench_ceiling/ceiling{suffix}.tsv"
    wildcard_constraints:
        suffix=f"(?:_e{ENCODING_PATTERN})?",
    conda:
        ROBOPIPE_ENV
    resources:
        bench=1,
    params:
        frames=config["bench"].get("ceiling_frames", 300),
    script:
        "../../scripts/bench_ceiling.py"


rule bench:
    default_target: False
    input:
        all_bench_results(),

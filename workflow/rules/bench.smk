# Dataloading benchmark: one job per scenario {loader}_{source}_{mode}_{decode}_w{workers}_n{nodes},
# expanded from config["bench"]["matrix"]; one decode-ceiling job per dataset; an H.264 copy of
# a dataset for the cuda (NVDEC) scenarios. Outputs follow the bench contract.
# Measuring jobs hold the `bench` resource: with `resources: [bench=1, network=1]` in the
# default profile they run one at a time locally, so they do not disturb each other's figures.

from robopipe.bench.scenarios import WILDCARD_CONSTRAINTS, expand_matrix, parse_scenario

BENCH_NOT_SETTINGS = ("matrix", "ceiling_frames", "h264")


def bench_scenarios():
    """Every scenario name of the configured matrix; lerobot_* loaders only when
    config["bench"]["lerobot_python"] names an interpreter."""
    names = expand_matrix(config["bench"]["matrix"])
    if config["bench"].get("lerobot_python"):
        return names
    return [n for n in names if not n.startswith("lerobot_")]


def bench_results(dataset):
    """A dataset's benchmark outputs: every scenario's JSON and the ceiling JSON."""
    return [f"results/bench/{dataset}/{name}.json" for name in bench_scenarios()] + [
        f"results/bench/{dataset}/ceiling.json"
    ]


def bench_dataset_input(wildcards):
    """The dataset a scenario reads: the H.264 copy for cuda decode, else the v3.0 output."""
    if parse_scenario(wildcards.scenario).decode == "cuda":
        return f"results/{wildcards.dataset}/h264"
    return f"results/{wildcards.dataset}/v3.0"


def bench_settings(wildcards):
    """params: config["bench"] without the matrix (robopipe.bench.runner.Settings)."""
    return {k: v for k, v in config["bench"].items() if k not in BENCH_NOT_SETTINGS}


def bench_network(wildcards):
    """resources: 1 for a remote source, so network-bound scenarios never overlap."""
    return int(parse_scenario(wildcards.scenario).remote)


def bench_threads(wildcards):
    """threads: the DataLoader workers plus the main process."""
    return parse_scenario(wildcards.scenario).workers + 1


rule bench_scenario:
    input:
        dataset=bench_dataset_input,
    output:
        json="results/bench/{dataset}/{scenario}.json",
        csv="results/bench/{dataset}/{scenario}.csv",
    log:
        "results/logs/{dataset}/bench_scenario/{scenario}.log",
    benchmark:
        "results/benchmarks/{dataset}/bench_scenario/{scenario}.tsv"
    wildcard_constraints:
        scenario=WILDCARD_CONSTRAINTS["scenario"],
    threads: bench_threads
    resources:
        network=bench_network,
        bench=1,
    params:
        settings=bench_settings,
    script:
        "../../scripts/bench_scenario.py"


rule bench_ceiling:
    input:
        dataset="results/{dataset}/v3.0",
    output:
        json="results/bench/{dataset}/ceiling.json",
    log:
        "results/logs/{dataset}/bench_ceiling/ceiling.log",
    benchmark:
        "results/benchmarks/{dataset}/bench_ceiling/ceiling.tsv"
    resources:
        bench=1,
    params:
        frames=config["bench"].get("ceiling_frames", 300),
    script:
        "../../scripts/bench_ceiling.py"


rule h264_copy:
    input:
        dataset="results/{dataset}/v3.0",
    output:
        dataset=directory("results/{dataset}/h264"),
    log:
        "results/logs/{dataset}/h264_copy/h264.log",
    benchmark:
        "results/benchmarks/{dataset}/h264_copy/h264.tsv"
    params:
        options=config["bench"].get("h264", {}),
    script:
        "../../scripts/h264_copy.py"

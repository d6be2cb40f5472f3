# Dataloading benchmark: one job per scenario
# {loader}_{source}_{mode}[_e{encoding}]_{decode}_w{workers}_n{nodes}, expanded from
# config["bench"]["matrix"]; one decode-ceiling job per dataset and per copy read (copies.smk
# makes the copies; cuda scenarios without an encoding read the h264g2 copy). Outputs follow
# the bench contract.
# Measuring jobs hold the `bench` resource: with `resources: [bench=1, network=1]` in the
# default profile they run one at a time locally, so they do not disturb each other's figures.
from robopipe.layout import (
    BENCH_RESULT,
    BENCH_SAMPLES,
    CEILING_FILE,
    JOB_STATS_FILE,
    LOG_FILE,
)
from robopipe.bench.scenarios import WILDCARD_CONSTRAINTS
from robopipe.copies.encodings import ENCODING_PATTERN


def episodes_selected(dataset):
    """Whether the loaders read some episodes of `dataset` only (a v3.0 dataset's
    `episodes:`): a loader that cannot select episodes does not run."""
    return DATASETS[dataset].read_episodes() is not None


def bench_scenarios(dataset):
    """The scenarios of the configured matrix that apply to `dataset`."""
    return bench_jobs.source_scenarios(config["bench"], DATASETS[dataset])


def scenario_resource(key):
    """A resource of a scenario's job (robopipe.workflow.bench.resources)."""
    return lambda wildcards: bench_jobs.resources(wildcards.scenario)[key]


rule bench_scenario:
    input:
        dataset=lambda w: bench_jobs.scenario_input(DATASETS[w.dataset], w.scenario),
        ready=ready_input,
        pushed=lambda w: bench_jobs.pushed_input(
            config["bench"], DATASETS[w.dataset], w.scenario
        ),
        robo=lambda w: bench_jobs.robo_input(w.dataset, w.scenario),
    output:
        json=BENCH_RESULT,
        csv=BENCH_SAMPLES,
    log:
        LOG_FILE.format(dataset="{dataset}", step="bench_scenario/{scenario}"),
    benchmark:
        JOB_STATS_FILE.format(dataset="{dataset}", step="bench_scenario/{scenario}")
    wildcard_constraints:
        scenario=WILDCARD_CONSTRAINTS["scenario"],
    conda:
        ROBOPIPE_ENV
    threads: scenario_resource("threads")
    resources:
        network=scenario_resource("network"),
        bench=1,
        # read by the SLURM executor (profiles/slurm), ignored locally
        nodes=scenario_resource("nodes"),
        tasks=scenario_resource("nodes"),
        cpus_per_task=scenario_resource("threads"),
        mem_mb=scenario_resource("mem_mb"),
        mpi=scenario_resource("mpi"),
        gres=scenario_resource("gres"),
    params:
        settings=lambda w: bench_jobs.dataset_settings(
            config["bench"], DATASETS[w.dataset]
        ),
    script:
        "../../scripts/bench_scenario.py"


rule bench_ceiling:
    input:
        dataset=lambda w: bench_jobs.ceiling_input(DATASETS[w.dataset], w.suffix),
        ready=ready_input,
    output:
        json=CEILING_FILE,
    log:
        LOG_FILE.format(dataset="{dataset}", step="bench_ceiling/ceiling{suffix}"),
    benchmark:
        JOB_STATS_FILE.format(dataset="{dataset}", step="bench_ceiling/ceiling{suffix}")
    wildcard_constraints:
        suffix=f"(?:_e{ENCODING_PATTERN})?",
    conda:
        ROBOPIPE_ENV
    resources:
        bench=1,
    params:
        options=lambda w: bench_jobs.ceiling_options(config["bench"]),
        # a folder, or a remote v3.0 dataset's URL and fsspec options
        root=lambda w: bench_jobs.ceiling_root(DATASETS[w.dataset], w.suffix),
        storage_options=lambda w: bench_jobs.ceiling_storage_options(
            DATASETS[w.dataset], w.suffix
        ),
    script:
        "../../scripts/bench_ceiling.py"


rule bench:
    default_target: False
    input:
        [
            path
            for name in dataset_names()
            for path in bench_jobs.results(name, bench_scenarios(name))
        ],

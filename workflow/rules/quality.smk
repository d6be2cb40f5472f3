# Content quality (robopipe.quality): which episodes are bad. One quality_batch job per batch
# of episodes (a v2.x source's conversion shard; a v3.0 source's data file, listed by the
# quality_batches checkpoint from meta/episodes: robopipe.workflow.quality), each reading its
# episodes' columns once and a sample of their frames; quality_merge runs the dataset-wide
# checks and writes quality.json and episodes.parquet; quality_verdict fails the run where
# `quality: fail_on` says so. The verdict is a job of its own because Snakemake deletes a
# failed job's outputs: the findings that fail the run stay in quality.json for the user to
# read. The figures are rule report_quality's (report.smk).
#
# From common.smk: DATASETS, dataset_names(), slurm_group(), stop(), ROBOPIPE_ENV.
from robopipe.layout import (
    CHECK_FILE,
    JOB_STATS_FILE,
    LOG_FILE,
    QUALITY_BATCH_FILE,
    QUALITY_BATCHES_FILE,
    QUALITY_DOCTOR_FILE,
    QUALITY_EPISODES_FILE,
    QUALITY_FILE,
    QUALITY_VERDICT_FILE,
    REPORT_QUALITY_DIR,
    REPORT_QUALITY_FIGURES,
)
from robopipe.workflow import quality as quality_jobs


def _quality_options():
    """Each dataset's QualityOptions (robopipe.workflow.quality.quality_options); a value the
    schema lets through but the options refuse stops the run, one line each."""
    options, problems = {}, []
    for name in dataset_names():
        try:
            options[name] = quality_jobs.quality_options(config, DATASETS[name].entry)
        except ValueError as exc:
            problems.append(f"robopipe: config: {config_path(name)}: quality: {exc}")
    if problems:
        stop(problems)
    return options


QUALITY_OPTIONS = _quality_options()


def quality_of(wildcards):
    """params: the dataset's quality options that decide what the jobs write."""
    return quality_jobs.job_options(QUALITY_OPTIONS[wildcards.dataset])


def quality_outputs():
    """The `quality` target: every dataset's verdict (after quality.json and
    episodes.parquet), lerobot-doctor's verdicts beside it, and the quality figures."""
    return [
        path
        for name in dataset_names()
        for path in [
            QUALITY_VERDICT_FILE.format(dataset=name),
            QUALITY_DOCTOR_FILE.format(dataset=name),  # quality_peer.smk
            *(
                f"{REPORT_QUALITY_DIR}/{stem}.svg".format(dataset=name)
                for stem in REPORT_QUALITY_FIGURES
            ),
        ]
    ]


def quality_report_inputs(wildcards):
    """input of report_quality: the dataset's quality.json, episodes.parquet and
    lerobot-doctor's doctor.json (rule quality_peer)."""
    return {
        "report": QUALITY_FILE.format(dataset=wildcards.dataset),
        "episodes": QUALITY_EPISODES_FILE.format(dataset=wildcards.dataset),
        "doctor": QUALITY_DOCTOR_FILE.format(dataset=wildcards.dataset),
    }


def quality_location(wildcards):
    """params: where the dataset's episodes are read (Source.quality_location)."""
    return DATASETS[wildcards.dataset].quality_location()


def quality_storage_options(wildcards):
    """params: the fsspec options of a remote source (Source.storage_options)."""
    return DATASETS[wildcards.dataset].storage_options()


def quality_batches_file(name):
    """The quality_batches checkpoint's output of a v3.0 dataset."""
    return checkpoints.quality_batches.get(dataset=name).output[0]


def quality_merge_group(wildcards):
    """group: of quality_merge: a v3.0 source's runs alone, after its batches checkpoint
    (robopipe.workflow.groups.AFTER_CHECKPOINT), a v2.x source's as slurm_group says."""
    if not DATASETS[wildcards.dataset].converted:
        return None
    return slurm_group("quality_merge")(wildcards)


# A v3.0 source's batches, one per data file, with its episodes: meta/episodes read once,
# after the check, in a job (a remote dataset is never read while the DAG is built).
checkpoint quality_batches:
    input:
        CHECK_FILE,
    output:
        QUALITY_BATCHES_FILE,
    log:
        LOG_FILE.format(dataset="{dataset}", step="quality_batches"),
    benchmark:
        JOB_STATS_FILE.format(
            dataset="{dataset}", step="quality_batches/quality_batches"
        )
    conda:
        ROBOPIPE_ENV
    params:
        root=quality_location,
        storage_options=quality_storage_options,
        selected=lambda w: DATASETS[w.dataset].read_episodes(),
        retry=lambda w: DATASETS[w.dataset].options.retry_budget.to_config(),
    script:
        "../../scripts/quality_batches.py"


rule quality_batch:
    input:
        unpack(lambda w: quality_jobs.batch_inputs(DATASETS, w.dataset)),
    output:
        QUALITY_BATCH_FILE,
    log:
        LOG_FILE.format(dataset="{dataset}", step="quality_batch/{quality_batch}"),
    benchmark:
        JOB_STATS_FILE.format(dataset="{dataset}", step="quality_batch/{quality_batch}")
    wildcard_constraints:
        quality_batch=quality_jobs.QUALITY_BATCH_PATTERN,
    group:
        slurm_group("quality_batch")
    conda:
        ROBOPIPE_ENV
    threads: 1
    params:
        root=quality_location,
        storage_options=quality_storage_options,
        options=quality_of,
        files=lambda w: quality_jobs.batch_signatures(
            DATASETS, w.dataset, w.quality_batch
        ),
    script:
        "../../scripts/quality_batch.py"


# The dataset-wide checks (duplicates, length outliers, the global stats) read the partial
# results only; the source passed its check first.
rule quality_merge:
    input:
        batches=lambda w: quality_jobs.batch_files(
            DATASETS,
            w.dataset,
            quality_batches_file,
            QUALITY_OPTIONS[w.dataset].batch_episodes,
        ),
        check=CHECK_FILE,
    output:
        report=QUALITY_FILE,
        episodes=QUALITY_EPISODES_FILE,
    log:
        LOG_FILE.format(dataset="{dataset}", step="quality_merge"),
    benchmark:
        JOB_STATS_FILE.format(dataset="{dataset}", step="quality_merge/quality_merge")
    group:
        quality_merge_group
    conda:
        ROBOPIPE_ENV
    params:
        root=quality_location,
        options=quality_of,
    script:
        "../../scripts/quality_merge.py"


rule quality_verdict:
    input:
        QUALITY_FILE,
    output:
        QUALITY_VERDICT_FILE,
    log:
        LOG_FILE.format(dataset="{dataset}", step="quality_verdict"),
    localrule: True
    conda:
        ROBOPIPE_ENV
    params:
        fail_on=lambda w: QUALITY_OPTIONS[w.dataset].fail_on,
    script:
        "../../scripts/quality_verdict.py"


rule quality:
    default_target: False
    input:
        quality_outputs(),

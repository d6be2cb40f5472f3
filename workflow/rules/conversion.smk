# v2.1 -> v3.0: check, plan, one job per shard, one per final file (which writes the file and
# then proves it against the source), meta, validate, publish.
# Every path is a template of robopipe.layout, shared with the code.
#
# What each job reads of a dataset's source is the source's to say (robopipe.sources): a local
# source's files are in the params of the jobs that read them, with their size and mtime, so
# that a changed, added or removed file reruns exactly those jobs (and the check).
from robopipe.peer_env import peer_python
from robopipe.layout import (
    CHECK_FILE,
    CHECK_PART_FILE,
    JOB_STATS_FILE,
    LOG_FILE,
    PLAN_FILE,
    PUBLISHED_INFO,
    SHARD_DIR,
    STAGED_DATA_FILE,
    STAGED_META_DIR,
    STAGED_VIDEO_FILE,
    VALIDATED_DATA_FILE,
    VALIDATED_VIDEO_FILE,
    VALIDATION_FILE,
    VIDEO_EPISODES_FILE,
)


def conversion_of(wildcards):
    """params: the dataset's conversion settings (config keys)."""
    return DATASETS[wildcards.dataset].options.to_dict()


def check_part_range(wildcards):
    """params of source_check_part: its episode indices, [first, stop) (stop None: the
    rest)."""
    return DATASETS[wildcards.dataset].check_ranges()[int(wildcards.part)]


def data_file_shards(wildcards):
    """input of aggregate_data: the shard folders the data file is made of, in order."""
    plan = plan_of(wildcards.dataset)
    return targets.data_file_shards(
        plan, wildcards.dataset, int(wildcards.chunk), int(wildcards.file)
    )


def all_video_episodes(wildcards):
    """input of meta: where each episode landed in each video file."""
    return targets.video_episodes_files(plan_of(wildcards.dataset), wildcards.dataset)


def staged_files(wildcards):
    """Every data and video file of the dataset, in its staging folder."""
    return targets.staged_files(plan_of(wildcards.dataset), wildcards.dataset)


def validation_reports(wildcards):
    """Every final file's validation report."""
    return targets.validation_reports(plan_of(wildcards.dataset), wildcards.dataset)


# A local v2.1 source of more than `check_episodes_per_job` episodes is checked by part jobs
# over ranges of episode indices (in parallel, each holding only its range); source_check
# then checks the metadata and merges them into the one report.
rule source_check_part:
    input:
        lambda w: DATASETS[w.dataset].check_inputs(),
    output:
        CHECK_PART_FILE,
    log:
        LOG_FILE.format(dataset="{dataset}", step="check/part-{part}"),
    benchmark:
        JOB_STATS_FILE.format(dataset="{dataset}", step="check/part-{part}")
    wildcard_constraints:
        part=r"\d{3}",
    priority: 100
    group:
        slurm_group("source_check_part")
    conda:
        ROBOPIPE_ENV
    threads: 1
    params:
        source=lambda w: DATASETS[w.dataset].check_location(),
        options=conversion_of,
        episodes=check_part_range,
        files=lambda w: DATASETS[w.dataset].check_part_signatures(*check_part_range(w)),
    script:
        "../../scripts/source_check_part.py"


rule source_check:
    input:
        lambda w: DATASETS[w.dataset].check_inputs(),
        parts=lambda w: DATASETS[w.dataset].check_parts(),
    output:
        CHECK_FILE,
    log:
        LOG_FILE.format(dataset="{dataset}", step="check"),
        report=LOG_FILE.format(dataset="{dataset}", step="check").replace(
            ".log", ".json"
        ),
    benchmark:
        JOB_STATS_FILE.format(dataset="{dataset}", step="check/check")
    # First: a bad source stops the run before most jobs start. Only publish takes the
    # report as input, so a changed source file reruns the check and the jobs that read that
    # file, not every job after the check.
    priority: 100
    group:
        slurm_group("source_check")
    conda:
        ROBOPIPE_ENV
    # Episodes are checked in a thread pool, which pays off only where opening a file waits on a
    # network filesystem (the SLURM profile sets 2): on local disks one thread is as fast, and
    # leaves the other cores to the plan and shard jobs.
    threads: 1
    params:
        # its family checks the source (robopipe.workflow.source_jobs.check); the other
        # params are what the check reads besides its input, so that a change of one reruns it
        source=lambda w: DATASETS[w.dataset],
        location=lambda w: DATASETS[w.dataset].check_location(),
        options=conversion_of,
        files=lambda w: DATASETS[w.dataset].check_signatures(),
        storage_options=lambda w: DATASETS[w.dataset].storage_options(),
        episodes=lambda w: DATASETS[w.dataset].read_episodes(),
        peer_python=peer_python(config.get("bench", {})),  # lerobot-lance-doctor's (v3.0)
    script:
        "../../scripts/source_check.py"


checkpoint plan:
    input:
        lambda w: DATASETS[w.dataset].plan_inputs(),
    output:
        plan=PLAN_FILE,
    log:
        LOG_FILE.format(dataset="{dataset}", step="plan"),
    benchmark:
        JOB_STATS_FILE.format(dataset="{dataset}", step="plan/plan")
    group:
        slurm_group("plan")
    conda:
        ROBOPIPE_ENV
    params:
        # its family plans the source (robopipe.workflow.source_jobs.plan); the other params
        # are what the plan reads besides its input, so that a change of one replans
        source=lambda w: DATASETS[w.dataset],
        folder=lambda w: DATASETS[w.dataset].folder,
        options=conversion_of,
        layout=lambda w: DATASETS.plan_layout(w.dataset),
        remote=lambda w: DATASETS[w.dataset].remote_listing(),
    script:
        "../../scripts/plan.py"


rule shard:
    input:
        plan=PLAN_FILE,
    output:
        directory(SHARD_DIR),
    log:
        LOG_FILE.format(dataset="{dataset}", step="shard/{shard}"),
    benchmark:
        JOB_STATS_FILE.format(dataset="{dataset}", step="shard/{shard}")
    # The rows go shards -> data file, a chain, while video files are independent jobs: start
    # the chain early so that it does not hold up validate after the last video file.
    priority: 50
    group:
        slurm_group("shard")
    conda:
        ROBOPIPE_ENV
    params:
        files=lambda w: DATASETS.shard_signatures(w.dataset, w.shard),
    script:
        "../../scripts/shard.py"


# Each final-file job writes its file, then proves it against the source in the same process
# while it is in the page cache (robopipe.conversion.validate): every row of a data file, every
# packet of a video file. A file that fails is deleted with the job's outputs.
rule aggregate_data:
    input:
        plan=PLAN_FILE,
        shards=data_file_shards,
    output:
        data=STAGED_DATA_FILE,
        report=VALIDATED_DATA_FILE,
    log:
        LOG_FILE.format(
            dataset="{dataset}", step="aggregate_data/chunk-{chunk}_file-{file}"
        ),
    benchmark:
        JOB_STATS_FILE.format(
            dataset="{dataset}", step="aggregate_data/chunk-{chunk}_file-{file}"
        )
    priority: 50
    group:
        slurm_group("aggregate_data")
    conda:
        ROBOPIPE_ENV
    script:
        "../../scripts/aggregate_data.py"


rule aggregate_video:
    input:
        plan=PLAN_FILE,
    output:
        video=STAGED_VIDEO_FILE,
        episodes=VIDEO_EPISODES_FILE,
        report=VALIDATED_VIDEO_FILE,
    log:
        LOG_FILE.format(
            dataset="{dataset}",
            step="aggregate_video/{video_key}_chunk-{chunk}_file-{file}",
        ),
    benchmark:
        JOB_STATS_FILE.format(
            dataset="{dataset}",
            step="aggregate_video/{video_key}_chunk-{chunk}_file-{file}",
        )
    group:
        slurm_group("aggregate_video")
    conda:
        ROBOPIPE_ENV
    params:
        files=lambda w: DATASETS.video_signatures(
            w.dataset, w.video_key, int(w.chunk), int(w.file)
        ),
    script:
        "../../scripts/aggregate_video.py"


rule meta:
    input:
        plan=PLAN_FILE,
        video_episodes=all_video_episodes,
        shards=lambda w: DATASETS.stats_shards(w.dataset),
        source=lambda w: DATASETS[w.dataset].meta_inputs(),
    output:
        directory(STAGED_META_DIR),
    log:
        LOG_FILE.format(dataset="{dataset}", step="meta"),
    benchmark:
        JOB_STATS_FILE.format(dataset="{dataset}", step="meta/meta")
    group:
        slurm_group("meta")
    conda:
        ROBOPIPE_ENV
    script:
        "../../scripts/meta.py"


# `validate` checks the staged dataset as a whole (meta rows, and the first and last frame of
# every video file looked up as a loader does) once every final file has proven itself.
rule validate:
    input:
        plan=PLAN_FILE,
        meta=STAGED_META_DIR,
        files=staged_files,
        reports=validation_reports,
    output:
        VALIDATION_FILE,
    log:
        LOG_FILE.format(dataset="{dataset}", step="validate"),
    benchmark:
        JOB_STATS_FILE.format(dataset="{dataset}", step="validate/validate")
    group:
        slurm_group("validate")
    conda:
        ROBOPIPE_ENV
    params:
        peer_python=peer_python(config.get("bench", {})),  # lerobot-lance-doctor's
    script:
        "../../scripts/validate.py"


# The declared output is the dataset's meta/info.json, not the folder: a directory() output
# would get Snakemake's hidden .snakemake_timestamp, and a published dataset holds only
# meta/, data/ and videos/. The script moves the whole folder into place at once.
rule publish:
    input:
        check=CHECK_FILE,
        validation=VALIDATION_FILE,
        plan=PLAN_FILE,
        meta=STAGED_META_DIR,
        files=staged_files,
    output:
        PUBLISHED_INFO,
    log:
        LOG_FILE.format(dataset="{dataset}", step="publish"),
    benchmark:
        JOB_STATS_FILE.format(dataset="{dataset}", step="publish/publish")
    wildcard_constraints:
        dataset=NOT_EDIT_NAMES,
    group:
        slurm_group("publish")
    conda:
        ROBOPIPE_ENV
    params:
        # a remote source's cache, removed once published (unless keep_cache: true)
        cache=lambda w: DATASETS[w.dataset].cache_to_remove(),
    script:
        "../../scripts/publish.py"


rule convert:
    default_target: False
    input:
        converted_datasets(),


rule check:
    default_target: False
    input:
        expand(CHECK_FILE, dataset=dataset_names()),

# v2.1 -> v3.0: check, plan, one job per shard, one per final file (which writes the file and
# then proves it against the source), meta, validate, publish.
# Every path is a template of robopipe.layout, shared with the code.
#
# A local source's files are in the params of the jobs that read them, with their size and
# mtime: a changed, added or removed file reruns exactly those jobs (and the check). They are
# not inputs: Snakemake's scheduler stats every input of every ready job on each scheduling
# round, which for 972 episodes was 300,000 stat calls and a quarter of the run's CPU time.
from robopipe.bench.peers import peer_python
from robopipe.formats.v21_repairs import shards_compute_stats
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
    V21_EPISODES_STATS_PATH,
    V21_INFO_PATH,
    VALIDATED_DATA_FILE,
    VALIDATED_VIDEO_FILE,
    VALIDATION_FILE,
    VIDEO_EPISODES_FILE,
)


def conversion_of(wildcards):
    """params: the dataset's conversion settings (config keys)."""
    return DATASETS.options(wildcards.dataset).to_dict()


def check_source_input(wildcards):
    """input of source_check: a local source's info.json (its other files are in the
    params), nothing for a remote v3.0 dataset (checked where it is), or the folder a rule
    makes."""
    if DATASETS.is_local(wildcards.dataset):
        return [f"{DATASETS.source_dir(wildcards.dataset)}/{V21_INFO_PATH}"]
    if DATASETS.is_remote_v30(wildcards.dataset):
        return []
    if DATASETS.is_remote_v21(wildcards.dataset):
        return [PLAN_FILE]  # the plan job lists the source into its manifest
    return [DATASETS.source_dir(wildcards.dataset)]


def check_location(wildcards):
    """params of source_check: where the dataset is checked (a remote v3.0 dataset's URL,
    else its folder)."""
    if DATASETS.is_v30(wildcards.dataset):
        return DATASETS.read_location(wildcards.dataset)
    return DATASETS.source_dir(wildcards.dataset)


def check_parts(wildcards):
    """input parts of source_check: the part jobs' findings where the source is checked in
    parts (Datasets.check_ranges), else none (the job checks every episode itself)."""
    ranges = DATASETS.check_ranges(wildcards.dataset)
    if len(ranges) == 1:
        return []
    return [
        CHECK_PART_FILE.format(dataset=wildcards.dataset, part=f"{i:03d}")
        for i in range(len(ranges))
    ]


def check_signatures(wildcards):
    """params of source_check: a digest of a local source's meta files and file names (an
    added or removed file reruns the check), and, where it checks every episode itself, of
    its episodes' files (their size and mtime); "" for any other source."""
    name = wildcards.dataset
    if not DATASETS.is_local(name):
        return ""
    tree = DATASETS.check_tree_digest(name)
    if len(DATASETS.check_ranges(name)) > 1:
        return tree
    return digest([tree, DATASETS.check_part_digest(name, 0, None)])


def check_part_range(wildcards):
    """params of source_check_part: its episode indices, [first, stop) (stop None: the
    rest)."""
    return DATASETS.check_ranges(wildcards.dataset)[int(wildcards.part)]


def check_part_signatures(wildcards):
    """params of source_check_part: a digest of its episodes' files' size and mtime."""
    first, stop = check_part_range(wildcards)
    return DATASETS.check_part_digest(wildcards.dataset, first, stop)


def plan_source_input(wildcards):
    """input of plan: a local source's meta files but the stats (a change replans), nothing
    for a remote one (the job lists it), else the folder a rule makes."""
    if DATASETS.is_remote_v21(wildcards.dataset):
        return []
    return [
        path
        for path in DATASETS.meta_files(wildcards.dataset)
        if not path.endswith(V21_EPISODES_STATS_PATH)
    ] or [DATASETS.source_dir(wildcards.dataset)]


def parse_time_layout(wildcards):
    """params of plan: a digest of what the parse-time plan of a local source decided
    (episodes, files, shards), so that a source change that moves an episode replans."""
    if not DATASETS.is_local(wildcards.dataset):
        return ""
    return plan_of(wildcards.dataset).layout_digest()


def shard_signatures(wildcards):
    """params of shard: a digest of the size and mtime of each parquet of the shard's
    episodes (a local source); Snakemake holds every job's params for the whole run, so a
    digest, not the per-file values."""
    name = wildcards.dataset
    if not DATASETS.is_local(name):
        return ""
    episodes = plan_of(name).shard_episodes(wildcards.shard)
    paths = DATASETS.source_paths(name, [e.source_episode_index for e in episodes])
    return digest(DATASETS.signatures_of(name, paths))


def video_signatures(wildcards):
    """params of aggregate_video: a digest of the size and mtime of each source mp4 of its
    file (a local source)."""
    name = wildcards.dataset
    if not DATASETS.is_local(name):
        return ""
    key, chunk, file = wildcards.video_key, int(wildcards.chunk), int(wildcards.file)
    return digest(DATASETS.signatures_of(name, DATASETS.source_videos(name, key, chunk, file)))


def data_file_shards(wildcards):
    """input of aggregate_data: the shard folders the data file is made of, in order."""
    plan = plan_of(wildcards.dataset)
    return targets.data_file_shards(
        plan, wildcards.dataset, int(wildcards.chunk), int(wildcards.file)
    )


def stats_shards(wildcards):
    """input of meta: the shard folders, where a repair computes stats in them."""
    if not shards_compute_stats(DATASETS.options(wildcards.dataset)):
        return []
    return targets.shard_dirs(plan_of(wildcards.dataset), wildcards.dataset)


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
        check_source_input,
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
        source=check_location,
        options=conversion_of,
        episodes=check_part_range,
        files=check_part_signatures,
    script:
        "../../scripts/source_check_part.py"


rule source_check:
    input:
        check_source_input,
        parts=check_parts,
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
        source=check_location,
        options=conversion_of,
        files=check_signatures,
        v30=lambda w: DATASETS.is_v30(w.dataset),
        storage_options=lambda w: DATASETS.storage_options(w.dataset),
        episodes=lambda w: DATASETS.episodes(w.dataset) if DATASETS.is_v30(w.dataset) else None,
        peer_python=peer_python(config.get("bench", {})),  # lerobot-lance-doctor's (v3.0)
    script:
        "../../scripts/source_check.py"


checkpoint plan:
    input:
        plan_source_input,
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
        source=source_of,
        options=conversion_of,
        layout=parse_time_layout,
        remote=lambda w: DATASETS.remote_listing(w.dataset),
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
        files=shard_signatures,
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
        files=video_signatures,
    script:
        "../../scripts/aggregate_video.py"


rule meta:
    input:
        plan=PLAN_FILE,
        video_episodes=all_video_episodes,
        shards=stats_shards,
        source=lambda w: DATASETS.meta_files(w.dataset),
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
    params:
        # a remote source's cache, removed once published (unless keep_cache: true)
        cache=lambda w: DATASETS.cache_to_remove(w.dataset),
    benchmark:
        JOB_STATS_FILE.format(dataset="{dataset}", step="publish/publish")
    group:
        slurm_group("publish")
    conda:
        ROBOPIPE_ENV
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

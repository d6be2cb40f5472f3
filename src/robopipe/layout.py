"""Path templates and size defaults of the LeRobot formats, as named constants.

Source: lerobot 0.6.1 ``datasets/utils.py`` (v3.0 templates and defaults) and lerobot 0.3.x
(v2.1 templates). The v3.0 chunk/file separator is a hyphen: ``chunk-000/file-000``.
"""

from __future__ import annotations

# v2.1 (one parquet and one mp4 per camera per episode)
V21_DATA_PATH = "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet"
V21_VIDEO_PATH = "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4"
V21_INFO_PATH = "meta/info.json"
V21_EPISODES_PATH = "meta/episodes.jsonl"
V21_EPISODES_STATS_PATH = "meta/episodes_stats.jsonl"
V21_TASKS_PATH = "meta/tasks.jsonl"
# the top folders of a dataset: a v2.1 source's that the conversion reads, a v3.0 target's
DATASET_FOLDERS = ("meta", "data", "videos")

# v3.0 (episodes packed into chunked files)
CHUNK_FILE_PATTERN = "chunk-{chunk_index:03d}/file-{file_index:03d}"
DATA_PATH = "data/" + CHUNK_FILE_PATTERN + ".parquet"
VIDEO_PATH = "videos/{video_key}/" + CHUNK_FILE_PATTERN + ".mp4"
EPISODES_PATH = "meta/episodes/" + CHUNK_FILE_PATTERN + ".parquet"
INFO_PATH = "meta/info.json"
STATS_PATH = "meta/stats.json"
TASKS_PATH = "meta/tasks.parquet"

# robopipe's workflow outputs, as Snakemake templates: the rules' outputs and the code that
# names them use these. {chunk} and {file} are 3-digit strings (format with :func:`chunk_file`).
RESULTS_DIR = "results/{dataset}"
PLAN_FILE = RESULTS_DIR + "/plan.json"
# the main Snakemake's parse-time plan of a local source, which the plan job reuses where no
# source file changed (robopipe.conversion.plan.reuse_plan); beside Snakemake's own state
PARSE_TIME_PLAN_FILE = ".snakemake/robopipe/{dataset}/plan.json"
SHARD_DIR = RESULTS_DIR + "/shards/{shard}"
SHARD_DATA = "data.parquet"  # a shard job's rows, in SHARD_DIR
SHARD_STATS = "stats.json"  # stats the compute_missing_stats repair computed, in SHARD_DIR
CHECK_FILE = RESULTS_DIR + "/check.json"
# one source check part job's findings, merged into CHECK_FILE ({part}: a 3-digit string)
CHECK_PART_FILE = RESULTS_DIR + "/check_parts/part-{part}.json"
STAGING_DIR = RESULTS_DIR + "/staging"
STAGED_META_DIR = STAGING_DIR + "/meta"
STAGED_DATA_FILE = STAGING_DIR + "/data/chunk-{chunk}/file-{file}.parquet"
STAGED_VIDEO_FILE = STAGING_DIR + "/videos/{video_key}/chunk-{chunk}/file-{file}.mp4"
# where an aggregate_video job put each episode of its file (relative to RESULTS_DIR)
VIDEO_EPISODES = "video_episodes/{video_key}/chunk-{chunk}/file-{file}.json"
VIDEO_EPISODES_FILE = RESULTS_DIR + "/" + VIDEO_EPISODES
# each final file's validation report, then the whole dataset's
VALIDATED_DATA_FILE = RESULTS_DIR + "/validation/data/chunk-{chunk}/file-{file}.json"
VALIDATED_VIDEO_FILE = RESULTS_DIR + "/validation/videos/{video_key}/chunk-{chunk}/file-{file}.json"
VALIDATION_FILE = RESULTS_DIR + "/validation.json"
PUBLISHED_DIR = RESULTS_DIR + "/v3.0"
ROBO_FILE = RESULTS_DIR + "/robomimic/robo.tar"  # a robomimic file's robo archive
PUBLISHED_INFO = PUBLISHED_DIR + "/" + "meta/info.json"
PUSH_FILE = RESULTS_DIR + "/push.json"  # what `snakemake push` did
# training copies (robopipe.copies): the v3.0 copy, its measurements, its per-file jobs' outputs
COPY_DIR = RESULTS_DIR + "/copies/{encoding}"
COPY_INFO = COPY_DIR + "/v3.0/meta/info.json"
COPY_FILE = COPY_DIR + "/copy.json"
COPY_STAGING = COPY_DIR + "/staging"
COPY_PART = COPY_STAGING + "/{part}"  # one copy_file job's output (a relative data/video path)
COPY_PART_RESULT = COPY_PART + ".json"  # and its measurements
# sources that a rule makes (v2.1 folders) and the robomimic stages before them
DEMO_DIR = RESULTS_DIR + "/demo"
# a remote v2.1 source: its listing (the plan job writes it) and the default cache folder the
# jobs fetch its files into (robopipe.source_cache)
SOURCE_MANIFEST = RESULTS_DIR + "/source.sqlite"
SOURCE_CACHE_DIR = RESULTS_DIR + "/source_cache"
# the local copy of a remote v3.0 dataset, made only where a job needs local files
LOCAL_COPY_DIR = RESULTS_DIR + "/local_copy"
ROBOMIMIC_V21_DIR = RESULTS_DIR + "/robomimic_v21"
ROBOMIMIC_GENERATED = RESULTS_DIR + "/robomimic/generated.hdf5"
ROBOMIMIC_PLAN = RESULTS_DIR + "/robomimic/plan.json"
ROBOMIMIC_BATCH_DIR = RESULTS_DIR + "/robomimic/batches/{batch}"
# content quality (robopipe.quality; workflow/rules/quality.smk): one partial result per batch
# of episodes ({quality_batch}: a v2.1 source's conversion shard, ``shard-000000``, or a v3.0
# source's data file, ``chunk-000_file-000``), merged into the dataset's quality.json and
# episodes.parquet (one row per episode, one column per check); the verdict of ``fail_on``
QUALITY_DIR = RESULTS_DIR + "/quality"
# a v3.0 source's batches: each data file's episodes, from meta/episodes (checkpoint
# quality_batches; a v2.x source's are its plan's shards)
QUALITY_BATCHES_FILE = QUALITY_DIR + "/batches.json"
QUALITY_BATCH_FILE = QUALITY_DIR + "/batches/{quality_batch}.json"
QUALITY_FILE = QUALITY_DIR + "/quality.json"
QUALITY_EPISODES_FILE = QUALITY_DIR + "/episodes.parquet"
QUALITY_VERDICT_FILE = QUALITY_DIR + "/verdict.json"
# lerobot-doctor's verdicts of the same dataset beside robopipe's (robopipe.bench.quality_peer)
QUALITY_DOCTOR_FILE = QUALITY_DIR + "/doctor.json"
LOGS_DIR = "results/logs/{dataset}"
LOG_FILE = LOGS_DIR + "/{step}.log"
JOB_STATS_FILE = "results/jobs/{dataset}/{step}.tsv"  # Snakemake's benchmark: TSV of a job
# the dataloading benchmark: one JSON (and CSV) per scenario, decode ceilings (suffix
# ``_e{encoding}`` for a copy, empty for the converted dataset), lerobot's conversion time
BENCH_DIR = "results/bench/{dataset}"
BENCH_RESULT = BENCH_DIR + "/{scenario}.json"
BENCH_SAMPLES = BENCH_DIR + "/{scenario}.csv"
CEILING_FILE = BENCH_DIR + "/ceiling{suffix}.json"
LEROBOT_CONVERT_FILE = BENCH_DIR + "/lerobot_convert.json"
# the report: one folder of figures and tables per dataset, and the summary of all
REPORT_DIR = "results/report"
REPORT_DATASET_DIR = REPORT_DIR + "/{dataset}"
REPORT_SUMMARY = REPORT_DATASET_DIR + "/summary.csv"
REPORT_ALL_SUMMARY = REPORT_DIR + "/summary.csv"
REPORT_LOG = "results/logs/report.log"
# one dataset's figures: stems under REPORT_DATASET_DIR, each written as .svg and .png, with
# the category and label that file the SVG in the HTML report (workflow/rules/report.smk)
REPORT_FIGURES = {
    "throughput": ("Dataloading", "throughput"),
    "latency": ("Dataloading", "latency p50/p95/p99"),
    "first_batch": ("Dataloading", "first-batch latency"),
    "peak_rss": ("Dataloading", "peak RSS"),
    "scaling_workers": ("Scaling", "workers"),
    "scaling_nodes": ("Scaling", "nodes"),
    "conversion_rules": ("Conversion", "per rule"),
    "conversion_shards": ("Conversion", "per shard"),
    "lerobot_convert": ("Conversion", "vs lerobot"),
    "copies": ("Dataloading", "which copy"),
    "paper_cache_modes": ("robomimic paper", "cache modes"),
    "paper_batch_size": ("robomimic paper", "batch size"),
    "paper_seq_length": ("robomimic paper", "sequence length"),
}
# one dataset's quality figures (robopipe.report.quality): stems under REPORT_QUALITY_DIR,
# each .svg and .png, with their label in the HTML report (category Quality)
REPORT_QUALITY_DIR = REPORT_DATASET_DIR + "/quality"
REPORT_QUALITY_FIGURES = {
    "quality_checks": "findings per check",
    "quality_episodes": "episodes x checks",
    "quality_cameras": "flagged camera stretches",
    "quality_signals": "flagged signals",
}

# lerobot 0.6.1 datasets/utils.py:88-90
DEFAULT_DATA_FILE_SIZE_IN_MB = 100
DEFAULT_VIDEO_FILE_SIZE_IN_MB = 200
DEFAULT_CHUNK_SIZE = 1000

# lerobot 0.6.1 lerobot_dataset.py:55
DEFAULT_TOLERANCE_S = 1e-4

# lerobot's DEFAULT_FEATURES (0.6.1 utils/constants.py; the same in 0.3.x, whose v2.1 writer
# appends them to every info.json): the columns every data file has, declared last.
DEFAULT_FEATURE_SPECS = {
    "timestamp": {"dtype": "float32", "shape": [1], "names": None},
    "frame_index": {"dtype": "int64", "shape": [1], "names": None},
    "episode_index": {"dtype": "int64", "shape": [1], "names": None},
    "index": {"dtype": "int64", "shape": [1], "names": None},
    "task_index": {"dtype": "int64", "shape": [1], "names": None},
}
DEFAULT_FEATURES = tuple(DEFAULT_FEATURE_SPECS)


def data_path(chunk_index: int, file_index: int) -> str:
    """Relative path of a v3.0 data file, e.g. ``data/chunk-000/file-003.parquet``."""
    return DATA_PATH.format(chunk_index=chunk_index, file_index=file_index)


def video_path(video_key: str, chunk_index: int, file_index: int) -> str:
    """Relative path of a v3.0 video file, e.g. ``videos/<video_key>/chunk-000/file-000.mp4``."""
    return VIDEO_PATH.format(video_key=video_key, chunk_index=chunk_index, file_index=file_index)


def chunk_file(chunk_index: int, file_index: int) -> dict[str, str]:
    """The ``{chunk}`` and ``{file}`` wildcards of a workflow template, e.g.
    ``STAGED_DATA_FILE.format(dataset="x", **chunk_file(0, 3))``."""
    return {"chunk": f"{chunk_index:03d}", "file": f"{file_index:03d}"}


def episodes_path(chunk_index: int, file_index: int) -> str:
    """Relative path of a v3.0 episodes metadata file."""
    return EPISODES_PATH.format(chunk_index=chunk_index, file_index=file_index)


def next_chunk_file(chunk_index: int, file_index: int, chunks_size: int) -> tuple[int, int]:
    """The (chunk, file) after this one: lerobot 0.6.1 ``update_chunk_file_indices``.

    ``file_index`` counts up; after file ``chunks_size - 1`` the next file opens a new chunk
    directory at file 0, so each chunk directory holds ``chunks_size`` files.
    """
    if file_index == chunks_size - 1:
        return chunk_index + 1, 0
    return chunk_index, file_index + 1

"""The files a dataset's conversion, copy and report rules read and write, from its plan.

Every path is a template of :mod:`robopipe.layout` formatted for one dataset; ``plan`` is the
dataset's :class:`robopipe.conversion.plan.Plan`.
"""

from __future__ import annotations

import json

from robopipe.conversion.plan import Plan
from robopipe.copies.encodings import parse_encoding
from robopipe.layout import (
    JOB_STATS_FILE,
    ROBOMIMIC_BATCH_DIR,
    SHARD_DIR,
    STAGED_DATA_FILE,
    STAGED_VIDEO_FILE,
    VALIDATED_DATA_FILE,
    VALIDATED_VIDEO_FILE,
    VIDEO_EPISODES_FILE,
    chunk_file,
    data_path,
    video_path,
)

# a copy's files, relative to its root: what one copy_file job writes (wildcard {part})
COPY_PART_PATTERN = (
    r"(?:videos/[^/]+/chunk-\d{3}/file-\d{3}\.mp4|data/chunk-\d{3}/file-\d{3}\.parquet)"
)
# the steps of every conversion, as rule/name of their benchmark: TSV (JOB_STATS_FILE)
CONVERSION_STEPS = ("check/check", "plan/plan", "meta/meta", "validate/validate", "publish/publish")


def final_files(
    plan: Plan, dataset: str, data_template: str, video_template: str | None = None
) -> list[str]:
    """One path per final file of the plan: ``data_template`` for each data file, then
    ``video_template`` for each video file of each camera (none when it is None), formatted
    with ``dataset``, ``chunk``, ``file`` (3-digit strings) and ``video_key``.

    E.g. ``final_files(plan, "demo", STAGED_DATA_FILE, STAGED_VIDEO_FILE)`` lists every staged
    file, ``final_files(plan, "demo", VALIDATED_DATA_FILE, VALIDATED_VIDEO_FILE)`` their
    validation reports.
    """
    paths = [
        data_template.format(dataset=dataset, **chunk_file(f.chunk, f.file))
        for f in plan.data_files
    ]
    if video_template is not None:
        paths += video_files(plan, dataset, video_template)
    return paths


def video_files(plan: Plan, dataset: str, template: str) -> list[str]:
    """``template`` formatted for each video file of each camera of the plan."""
    return [
        template.format(dataset=dataset, video_key=key, **chunk_file(f.chunk, f.file))
        for key, files in plan.video_files.items()
        for f in files
    ]


def staged_files(plan: Plan, dataset: str) -> list[str]:
    """Every data and video file of the dataset, in its staging folder."""
    return final_files(plan, dataset, STAGED_DATA_FILE, STAGED_VIDEO_FILE)


def validation_reports(plan: Plan, dataset: str) -> list[str]:
    """Every final file's validation report (rules aggregate_data and aggregate_video)."""
    return final_files(plan, dataset, VALIDATED_DATA_FILE, VALIDATED_VIDEO_FILE)


def video_episodes_files(plan: Plan, dataset: str) -> list[str]:
    """Where each episode landed in each video file: the aggregate_video jobs' JSON."""
    return video_files(plan, dataset, VIDEO_EPISODES_FILE)


def shard_dirs(plan: Plan, dataset: str, shard_ids=None) -> list[str]:
    """The folders of shards ``shard_ids`` (default: every shard of the plan), in order."""
    if shard_ids is None:
        shard_ids = [s.id for s in plan.shards]
    return [SHARD_DIR.format(dataset=dataset, shard=s) for s in shard_ids]


def data_file_shards(plan: Plan, dataset: str, chunk: int, file: int) -> list[str]:
    """The folders of the shards that data file ``chunk``/``file`` is made of, in order."""
    return shard_dirs(plan, dataset, plan.data_file(chunk, file).shards)


def plan_files(plan: Plan) -> tuple[list[str], list[str]]:
    """The planned data files and video files (every camera's), relative to the dataset root:
    of a conversion's plan, or of an edit's (``robopipe.edits.plan.EditPlan``: the same
    ``data_files`` and ``video_files``)."""
    data = [data_path(f.chunk, f.file) for f in plan.data_files]
    videos = [
        video_path(key, f.chunk, f.file) for key, files in plan.video_files.items() for f in files
    ]
    return data, videos


def copy_part_names(data_files: list[str], video_files: list[str], encoding: str) -> list[str]:
    """The files of a copy that one copy_file job each writes, relative to the dataset root:
    each mp4 of ``video_files``, or each parquet of ``data_files`` when the encoding moves
    frames into the data files.

    Raises:
        ValueError: ``encoding`` is not a valid encoding name (parse_encoding).
    """
    return list(video_files if parse_encoding(encoding).in_video_files else data_files)


def conversion_benchmarks(plan: Plan, dataset: str) -> list[str]:
    """The benchmark: TSV of every job that converts ``dataset`` (inputs of its report):
    :data:`CONVERSION_STEPS`, every shard and every final file (a remote source's files are
    fetched by those jobs). The demo rule's time is left out: generating the demo is not part
    of a conversion."""
    steps = list(CONVERSION_STEPS)
    steps += [f"shard/{s.id}" for s in plan.shards]
    steps += [f"aggregate_data/chunk-{f.chunk:03d}_file-{f.file:03d}" for f in plan.data_files]
    for key, files in plan.video_files.items():
        steps += [f"aggregate_video/{key}_chunk-{f.chunk:03d}_file-{f.file:03d}" for f in files]
    return [JOB_STATS_FILE.format(dataset=dataset, step=step) for step in steps]


def robomimic_batch_dirs(plan_file: str, dataset: str) -> list[str]:
    """Every batch folder of a robomimic plan (``robomimic_plan``'s JSON, ``{"batches":
    [{"id": ...}, ...]}``), in plan order."""
    with open(plan_file, encoding="utf-8") as f:
        batches = json.load(f)["batches"]
    return [ROBOMIMIC_BATCH_DIR.format(dataset=dataset, batch=b["id"]) for b in batches]

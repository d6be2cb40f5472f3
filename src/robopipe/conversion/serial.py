"""The whole v2.1 -> v3.0 conversion in one process: plan, shards, aggregates, meta, validate,
publish. The Snakemake workflow runs the same steps as separate jobs; this function is for
tests, notebooks and small datasets.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from robopipe.conversion.aggregate import aggregate_data, aggregate_video
from robopipe.atomic import write_json
from robopipe.layout import DEFAULT_TOLERANCE_S, data_path, video_episodes_path, video_path
from robopipe.conversion.meta import write_meta
from robopipe.conversion.plan import PlanOptions, make_plan
from robopipe.conversion.publish import publish
from robopipe.conversion.shard import build_shard
from robopipe.formats.v21_reader import load_source
from robopipe.conversion.validate import validate as validate_dataset


def convert_dataset(
    source_dir: str | Path,
    output_dir: str | Path,
    *,
    name: str = "dataset",
    data_file_size_in_mb: float = PlanOptions.data_file_size_in_mb,
    video_file_size_in_mb: float = PlanOptions.video_file_size_in_mb,
    chunks_size: int = PlanOptions.chunks_size,
    episodes_per_batch: int = PlanOptions.episodes_per_batch,
    skip_episodes: tuple[int, ...] = (),
    restamp_timestamps: bool = False,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
    validate: bool = True,
    validate_frames: str = "sample",
    work_dir: str | Path | None = None,
) -> dict:
    """Convert the v2.1 dataset in ``source_dir`` to v3.0 in ``output_dir``; return the plan.

    Intermediate files go to ``work_dir`` (default: a ``.<output name>.work`` sibling of
    ``output_dir``), removed on success. ``output_dir`` appears only when everything,
    validation included, succeeded. Options are those of :class:`robopipe.conversion.plan.PlanOptions`
    and :func:`robopipe.conversion.validate.validate`.

    Raises:
        DatasetError: bad input (see the plan, shard and validate steps).
    """
    output_dir = Path(output_dir)
    work = Path(work_dir) if work_dir else output_dir.with_name(f".{output_dir.name}.work")
    source = load_source(source_dir, name)
    options = PlanOptions(
        data_file_size_in_mb=data_file_size_in_mb,
        video_file_size_in_mb=video_file_size_in_mb,
        chunks_size=chunks_size,
        episodes_per_batch=episodes_per_batch,
        skip_episodes=tuple(skip_episodes),
    )
    plan = make_plan(source, options)
    write_json(work / "plan.json", plan)
    shard_dirs = {s["id"]: work / "shards" / s["id"] for s in plan["shards"]}
    for shard_id, shard_dir in shard_dirs.items():
        build_shard(
            source,
            plan,
            shard_id,
            shard_dir,
            restamp_timestamps=restamp_timestamps,
            tolerance_s=tolerance_s,
        )
    staging = work / "staging"
    for f in plan["files"]["data"]:
        aggregate_data(
            [shard_dirs[s] for s in f["shards"]], staging / data_path(f["chunk"], f["file"])
        )
    video_episodes = []
    for key, files in plan["files"]["videos"].items():
        for f in files:
            video_episodes.append(work / video_episodes_path(key, f["chunk"], f["file"]))
            aggregate_video(
                source,
                plan,
                key,
                f["chunk"],
                f["file"],
                staging / video_path(key, f["chunk"], f["file"]),
                video_episodes[-1],
            )
    write_meta(
        source, plan, video_episodes, staging / "meta", restamp_timestamps=restamp_timestamps
    )
    if validate:
        validate_dataset(source, plan, staging, frames=validate_frames, tolerance_s=tolerance_s)
    publish(staging, plan, output_dir)
    shutil.rmtree(work)
    return plan

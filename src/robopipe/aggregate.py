"""Aggregate jobs: one final v3.0 data or video file from its planned shards.

Each final file is written once, from its list of shards, so the aggregates of a dataset are
independent and run in parallel (lerobot's own aggregation appends to the destination file
episode by episode).
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from robopipe.atomic import atomic_path, link_or_copy
from robopipe.shard import SHARD_DATA, SHARD_EPISODES, shard_video
from robopipe.video import concat_videos


def aggregate_data(shard_dirs: list[Path], output: Path) -> None:
    """Write the data file ``output`` from the shards' ``data.parquet``, in order.

    Each shard becomes one row group, so the peak memory is one shard, not one file.

    Raises:
        ValueError: the shards' schemas differ.
    """
    with atomic_path(output) as tmp:
        writer = None
        try:
            for shard_dir in shard_dirs:
                table = pq.read_table(Path(shard_dir) / SHARD_DATA)
                if writer is None:
                    writer = pq.ParquetWriter(tmp, table.schema)
                elif not table.schema.equals(writer.schema):
                    raise ValueError(f"{shard_dir}: columns differ from the first shard's")
                writer.write_table(table, row_group_size=max(table.num_rows, 1))
        finally:
            if writer is not None:
                writer.close()


def aggregate_video(shard_dirs: list[Path], video_key: str, output: Path) -> None:
    """Write one camera's video file ``output`` from the shards' mp4s, by stream copy.

    Shard ``k`` is placed at the sum of the durations of the episodes before it, in ticks (from
    each shard's ``episodes.json``), so every episode lands exactly at the ``from_timestamp``
    the episodes metadata records. A file made of a single shard is hard-linked (or copied
    where links are not possible): no remux at all.
    """
    inputs = [Path(d) / shard_video(video_key) for d in shard_dirs]
    with atomic_path(output) as tmp:
        if len(inputs) == 1:
            link_or_copy(inputs[0], tmp)
            return
        durations = [
            sum(ep["videos"][video_key]["duration_ticks"] for ep in _shard_episodes(d))
            for d in shard_dirs
        ]
        concat_videos(inputs, tmp, durations_ticks=durations)


def _shard_episodes(shard_dir: Path) -> list[dict]:
    return json.loads((Path(shard_dir) / SHARD_EPISODES).read_text(encoding="utf-8"))

"""Aggregate jobs: one final v3.0 data file from its shards, or one video file from its
episodes' mp4s (with, beside it, where each episode landed: the meta job's input).

Each final file is written once, from its planned list of shards or episodes, so the
aggregates of a dataset are independent and run in parallel (lerobot's own aggregation
appends to the destination file episode by episode).
"""

from __future__ import annotations

from pathlib import Path

from robopipe.atomic import atomic_path, write_json
from robopipe.conversion.plan import Plan
from robopipe.formats.v21_reader import V21Source
from robopipe.layout import SHARD_DATA
from robopipe.remux import VideoError, concat_videos


def aggregate_data(shard_dirs: list[Path], output: Path) -> None:
    """Write the data file ``output`` from the shards' ``data.parquet``, in order.

    Each episode becomes one parquet row group, in episode order, as lerobot 0.6.1's recorder
    and its ``aggregate`` write data files (``write_table_one_row_group_per_episode``): a
    reader gets one episode with one ``read_row_group``. (lerobot's v2.1 -> v3.0 converter
    writes one row group per file; the values, schema and metadata are the same either way.)
    The shards are read row group by row group (:func:`robopipe.conversion.shard.build_shard`
    writes one per episode), so the peak memory is one episode, not one shard or one file.

    Raises:
        ValueError: the shards' schemas differ.
    """
    import pyarrow.parquet as pq  # here: the aggregate_video jobs need no pyarrow (0.2 s)

    with atomic_path(output) as tmp:
        writer = None
        try:
            for shard_dir in shard_dirs:
                shard = pq.ParquetFile(Path(shard_dir) / SHARD_DATA)
                if writer is None:
                    writer = pq.ParquetWriter(tmp, shard.schema_arrow)
                elif not shard.schema_arrow.equals(writer.schema):
                    raise ValueError(f"{shard_dir}: columns differ from the first shard's")
                for group in range(shard.num_row_groups):
                    rows = shard.read_row_group(group, use_threads=False)  # one small episode
                    for episode in episode_slices(rows):
                        writer.write_table(episode, row_group_size=episode.num_rows)
        finally:
            if writer is not None:
                writer.close()


def episode_slices(table):
    """The rows of each episode of ``table`` (runs of equal ``episode_index``), in order.

    Zero-copy slices; a table without rows has none.
    """
    import numpy as np

    episode_index = table.column("episode_index").to_numpy()
    starts = [0, *(np.flatnonzero(episode_index[1:] != episode_index[:-1]) + 1).tolist()]
    ends = [*starts[1:], table.num_rows]
    return [table.slice(a, b - a) for a, b in zip(starts, ends, strict=True) if b > a]


def aggregate_video(
    source: V21Source,
    plan: Plan,
    video_key: str,
    chunk: int,
    file: int,
    output: Path,
    episodes_json: Path,
) -> None:
    """Write one camera's final video file ``output`` from its episodes' mp4s, by stream copy.

    The episodes are those the plan assigns to ``(chunk, file)`` of ``video_key``; each lands
    at the sum of the earlier episodes' stream durations, in ticks, exactly the
    ``from_timestamp`` the episodes metadata records (:func:`robopipe.remux.concat_videos`).
    ``episodes_json`` receives ``{"video_key", "time_base", "stream", "episodes":
    [{"episode_index", "offset_ticks", "duration_ticks", "packets", "payload_xxh3",
    "timing_xxh3"}]}``: where each episode landed (for the meta job) and the digests of the
    source packets it copied (for :func:`robopipe.conversion.validate.validate_video_file`).

    Raises:
        DatasetError: an episode mp4 cannot be read (truncated, corrupt, another time base
            than the file's first episode), or its frame count differs from the episode's
            parquet rows.
    """
    episodes = [e for e in plan.episodes if e.videos[video_key] == (chunk, file)]
    if not episodes:
        raise ValueError(f"plan has no {video_key} file chunk {chunk} file {file}")
    inputs = [source.video_file(e.source_episode_index, video_key) for e in episodes]
    with atomic_path(output) as tmp:
        try:
            remuxed = concat_videos(inputs, tmp)
        except VideoError as exc:
            ep = episodes[inputs.index(exc.path)]
            raise source.error(exc.reason, episode=ep.source_episode_index, file=exc.path) from exc
        for ep, path, result in zip(episodes, inputs, remuxed, strict=True):
            if result.frames != ep.length:
                raise source.error(
                    f"{result.frames} frames in the mp4 but {ep.length} rows in the parquet",
                    episode=ep.source_episode_index,
                    file=path,
                )
    time_base = str(remuxed[0].time_base)
    landed = [
        {
            "episode_index": ep.episode_index,
            "offset_ticks": r.offset_ticks,
            "duration_ticks": r.duration_ticks,
            **r.digest,
        }
        for ep, r in zip(episodes, remuxed, strict=True)
    ]
    write_json(
        episodes_json,
        {
            "video_key": video_key,
            "time_base": time_base,
            "stream": vars(remuxed[0].params),
            "episodes": landed,
        },
        indent=None,
    )

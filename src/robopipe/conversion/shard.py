"""The shard job: one batch of consecutive episodes, packed for its final files.

A shard writes, into one directory (moved into place only when complete), ``data.parquet``:
the episodes' rows, the source's columns and values (``episode_index`` and ``index``
renumbered only when episodes are skipped; ``timestamp`` rewritten as ``frame_index / fps``
only with ``restamp_timestamps``).

Video is not touched here: each final video file is remuxed once, straight from the episode
mp4s, by its aggregate job (:func:`robopipe.conversion.aggregate.aggregate_video`), which also
checks each mp4's frame count against the episode's rows. A second pass through an
intermediate shard mp4 would double the packet copying for no parallelism, since one job
writes each final file either way; probing every mp4 here as well would open each file twice.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from robopipe.atomic import atomic_path, write_json
from robopipe.conversion.plan import Plan, PlannedEpisode
from robopipe.conversion.repairs import (
    episode_task_index,
    repair_table,
    repairs_of,
    with_default_features,
)
from robopipe.formats.v21_reader import V21Source
from robopipe.layout import DEFAULT_TOLERANCE_S, SHARD_DATA, SHARD_STATS
from robopipe.sources.v20 import VERSION as VERSION_V20
from robopipe.sources.v20 import leading_data_files
from robopipe.stats import episode_stats_from_files, v20_episode_stats


def build_shard(
    source: V21Source,
    plan: Plan,
    shard_id: str,
    out_dir: Path,
    *,
    restamp_timestamps: bool = False,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
) -> None:
    """Write the shard ``shard_id`` of ``plan`` into ``out_dir`` (atomically).

    The repairs the plan's options turn on (
    :mod:`robopipe.conversion.repairs`) are applied to each episode's rows; with
    ``compute_missing_stats``, the stats of episodes that ``episodes_stats.jsonl`` lacks go to
    ``stats.json`` (``{source episode index: stats}``) beside the rows, for the meta job; of a
    v2.0 source, every episode's, as lerobot 0.3's v2.0 -> v2.1 step computes them
    (:func:`robopipe.stats.v20_episode_stats`).

    Raises:
        DatasetError: an episode's parquet is unreadable or its schema differs from the
            first episode's; its timestamps are off ``frame_index / fps`` by more than
            ``tolerance_s`` (without ``restamp_timestamps``); a repair cannot be applied
            (a float64 value that float32 cannot hold, an episode without a single task).
    """
    episodes = plan.shard_episodes(shard_id)
    renumber = bool(plan.options.skip_episodes)
    repairs = repairs_of(plan.options)
    with atomic_path(out_dir) as tmp:
        tmp.mkdir()
        tables = [
            _episode_table(source, ep, renumber, restamp_timestamps, tolerance_s, repairs)
            for ep in episodes
        ]
        if source.info["codebase_version"] == VERSION_V20:
            if source.remote:  # the rows whose times the frames are sampled at
                source.fetch(leading_data_files(source, max(ep.length for ep in episodes)))
            computed = {
                ep.source_episode_index: v20_episode_stats(
                    source.root,
                    source.info,
                    ep.source_episode_index,
                    ep.length,
                    source.data_file(ep.source_episode_index),
                    {k: source.video_file(ep.source_episode_index, k) for k in source.video_keys},
                )
                for ep in episodes
            }
            write_json(tmp / SHARD_STATS, computed, indent=None)
        elif repairs.get("compute_missing_stats"):
            # which episodes have stats, a line at a time: not every episode's stats
            from robopipe.conversion.check import _stats_episodes

            have = _stats_episodes(source)
            computed = {
                ep.source_episode_index: episode_stats_from_files(
                    table,
                    # the default features too where info.json does not declare them
                    with_default_features(source.info["features"], table.schema),
                    {k: source.video_file(ep.source_episode_index, k) for k in source.video_keys},
                )
                for ep, table in zip(episodes, tables, strict=True)
                if ep.source_episode_index not in have
            }
            write_json(tmp / SHARD_STATS, computed, indent=None)
        schema = tables[0].schema
        for ep, table in zip(episodes, tables, strict=True):
            if not table.schema.equals(schema):
                raise source.error(
                    f"columns differ from episode {episodes[0].source_episode_index}'s: "
                    f"{table.schema} vs {schema}",
                    episode=ep.source_episode_index,
                    file=source.data_file(ep.source_episode_index),
                )
        # uncompressed, plain-encoded, no statistics: the shard is read once, by
        # aggregate_data, which encodes and compresses the output; one row group per
        # episode, which aggregate_data reads one at a time
        with pq.ParquetWriter(
            tmp / SHARD_DATA,
            schema,
            compression="none",
            use_dictionary=False,
            write_statistics=False,
        ) as writer:
            for table in tables:
                if table.num_rows:
                    writer.write_table(table, row_group_size=table.num_rows)


def _episode_table(
    source: V21Source,
    ep: PlannedEpisode,
    renumber: bool,
    restamp: bool,
    tolerance_s: float,
    repairs: dict[str, bool],
) -> pa.Table:
    src_index = ep.source_episode_index
    path = source.data_file(src_index)
    try:
        table = pq.ParquetFile(path).read(use_threads=False)  # small files: no thread pool
    except Exception as exc:  # ArrowInvalid, OSError: corrupt or truncated file
        raise source.error(f"unreadable parquet: {exc}", episode=src_index, file=path) from None
    try:
        table = repair_table(
            table,
            source.info["features"],
            repairs,
            index_start=ep.dataset_from_index,
            task_index=episode_task_index(source.episodes[src_index], source.tasks),
        )
    except ValueError as exc:
        raise source.error(str(exc), episode=src_index, file=path) from None
    fps = source.fps
    frame_index = table.column("frame_index").to_numpy()
    if restamp:
        ts_type = table.schema.field("timestamp").type
        table = _set_column(table, "timestamp", pa.array(frame_index / fps, type=ts_type))
    else:
        worst, at = timestamp_error(table.column("timestamp").to_numpy(), frame_index, fps)
        if worst > tolerance_s:
            raise source.error(
                f"timestamp differs from frame_index / fps by {worst:.6f} s at frame {at} "
                f"(tolerance_s={tolerance_s}); the source's timestamps are off while video "
                "frames sit at frame_index / fps: set `restamp_timestamps: true` to rewrite "
                "them as frame_index / fps",
                episode=src_index,
                file=path,
            )
    if renumber:
        n = table.num_rows
        index_type = table.schema.field("index").type
        start = ep.dataset_from_index
        table = _set_column(table, "index", pa.array(np.arange(start, start + n), index_type))
        episode_type = table.schema.field("episode_index").type
        episode = pa.array(np.full(n, ep.episode_index), episode_type)
        table = _set_column(table, "episode_index", episode)
    return table


def timestamp_error(timestamps: np.ndarray, frame_index: np.ndarray, fps: int) -> tuple[float, int]:
    """Largest ``|timestamp - frame_index / fps|`` in seconds, and the frame index where it is.

    Both arrays have shape ``(T,)``; timestamps are float seconds (float32 in LeRobot).
    """
    if len(timestamps) == 0:
        return 0.0, 0
    error = np.abs(timestamps.astype(np.float64) - frame_index / fps)
    at = int(np.argmax(error))
    return float(error[at]), int(frame_index[at])


def _set_column(table: pa.Table, name: str, values: pa.Array) -> pa.Table:
    return table.set_column(table.schema.get_field_index(name), table.schema.field(name), values)

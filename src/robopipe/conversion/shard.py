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
from robopipe.checks.rules import timestamp_error
from robopipe.conversion.plan import Plan, PlannedEpisode
from robopipe.formats.v21_reader import V21Source
from robopipe.formats.v21_repairs import (
    episode_task_index,
    output_features,
    repair_table,
    repairs_of,
    undeclared_columns_to,
)
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

    The repairs the plan's options turn on (:mod:`robopipe.formats.v21_repairs`) are applied
    to each episode's rows; the stats they compute (:func:`_computed_stats`) go to
    ``stats.json`` (``{source episode index: stats}``) beside the rows, for the meta job; of
    a v2.0 source, every episode's, as lerobot 0.3's v2.0 -> v2.1 step computes them
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
                ep.source_episode_index: _v20_stats(source, ep, table, repairs, restamp_timestamps)
                for ep, table in zip(episodes, tables, strict=True)
            }
        else:
            computed = _computed_stats(source, episodes, tables, repairs)
        if computed is not None:
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


def _v20_stats(
    source: V21Source, ep: PlannedEpisode, table: pa.Table, repairs: dict, restamped: bool
) -> dict:
    """A v2.0 episode's stats (:func:`robopipe.stats.v20_episode_stats`) from its rows as the
    repairs left them (``table``), of every feature the output declares
    (:func:`output_features`), the frames looked up at the timestamps as restamped where
    ``restamped``: as lerobot's v2.0 -> v2.1 step would compute them on the repaired
    dataset."""
    src_index = ep.source_episode_index
    info = {
        **source.info,
        "features": output_features(source.info["features"], table.schema, repairs),
    }
    videos = {k: source.video_file(src_index, k) for k in source.video_keys}
    try:
        return v20_episode_stats(
            source.root, info, src_index, ep.length, table, videos, restamped=restamped
        )
    except ValueError as exc:
        raise source.error(str(exc), episode=src_index, file=source.data_file(src_index)) from None


def _computed_stats(
    source: V21Source,
    episodes: list[PlannedEpisode],
    tables: list[pa.Table],
    repairs: dict,
) -> dict[int, dict] | None:
    """The stats the repairs compute for the shard's episodes, by source episode index, or
    None when no repair computes any.

    With ``compute_missing_stats``, an episode that ``episodes_stats.jsonl`` lacks gets the
    stats of every feature the output declares (:func:`output_features`); with
    ``undeclared_columns: declare``, every other episode gets those of the columns the
    repair declares, which the meta job adds to its ``episodes_stats.jsonl`` entry. Both as
    :func:`robopipe.stats.episode_stats_from_files` computes them (lerobot's
    ``compute_episode_stats``).
    """
    compute_missing = repairs.get("compute_missing_stats")
    info_features = source.info["features"]
    declared = undeclared_columns_to("declare", tables[0].schema.names, info_features, repairs)
    if not (compute_missing or declared):
        return None
    have = None
    if compute_missing:
        # which episodes have stats, a line at a time: not every episode's stats
        have = source.stats_episodes()
    computed = {}
    for ep, table in zip(episodes, tables, strict=True):
        features = output_features(info_features, table.schema, repairs)
        if have is not None and ep.source_episode_index not in have:
            videos = {k: source.video_file(ep.source_episode_index, k) for k in source.video_keys}
            computed[ep.source_episode_index] = episode_stats_from_files(table, features, videos)
        elif declared:
            own = {name: features[name] for name in declared}
            computed[ep.source_episode_index] = episode_stats_from_files(table, own, {})
    return computed


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


def _set_column(table: pa.Table, name: str, values: pa.Array) -> pa.Table:
    return table.set_column(table.schema.get_field_index(name), table.schema.field(name), values)

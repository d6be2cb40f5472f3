"""Plan a v2.1 -> v3.0 conversion: every episode's final files, and the shards.

The file assignment is lerobot 0.6.1's (``scripts/convert_dataset_v21_to_v30.py:232`` for data,
``:331`` for each camera): each stream (data, and each camera on its own) fills files in episode
order and rolls over *before* adding an episode when ``size + episode_size >= limit`` and the
file already holds an episode. Data sizes are the source parquet's uncompressed size
(``io_utils.get_parquet_file_size_in_mb``: sum of ``total_uncompressed_size`` over row groups
and columns), video sizes the mp4's size on disk, both in MiB. ``(chunk, file)`` advance with
:func:`robopipe.layout.next_chunk_file`.

Shards group at most ``episodes_per_batch`` consecutive episodes and never straddle a final
file of any stream, so each final file is made from whole shards.

The plan reads only metadata (``meta/*.json*``, parquet footers, file sizes), so it is cheap
enough to compute while Snakemake builds the DAG.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from robopipe.layout import data_path, next_chunk_file, video_path
from robopipe.formats.v21_reader import V21Source

MIB = 2**20
PLAN_VERSION = 1


@dataclass(frozen=True)
class PlanOptions:
    """Conversion settings that shape the plan.

    Attributes:
        data_file_size_in_mb: rollover threshold of data files, MiB (lerobot default 100).
        video_file_size_in_mb: rollover threshold of each camera's video files, MiB (default 200).
        chunks_size: files per ``chunk-XXX`` directory (lerobot's ``DEFAULT_CHUNK_SIZE``, 1000).
        episodes_per_batch: most episodes in one shard job.
        skip_episodes: source episode indices left out; the kept episodes are renumbered
            ``0..N-1`` in source order (v3.0 requires contiguous episode indices).
    """

    data_file_size_in_mb: float = 100
    video_file_size_in_mb: float = 200
    chunks_size: int = 1000
    episodes_per_batch: int = 250
    skip_episodes: tuple[int, ...] = ()


def make_plan(source: V21Source, options: PlanOptions, *, check_stats: bool = True) -> dict:
    """Plan the conversion of ``source``.

    Returns a JSON-serialisable dict::

        {"version", "dataset", "source", "fps", "video_keys", "options": {...},
         "total_frames",
         "episodes": [{"episode_index", "source_episode_index", "length",
                       "dataset_from_index", "dataset_to_index",
                       "data": [chunk, file], "videos": {video_key: [chunk, file]}}],
         "shards": [{"id": "shard-000000", "episodes": [first, last + 1]}],
         "files": {"data": [{"chunk", "file", "shards": [id, ...]}],
                   "videos": {video_key: [{"chunk", "file", "shards": [...]}]}}}

    ``episode_index`` is the output index, ``source_episode_index`` the v2.1 one. With
    ``check_stats`` (the default) ``episodes_stats.jsonl`` is read too, so that a missing or
    incomplete file stops the run before any shard job; the workflow's parse-time plan of a
    local source leaves that to the ``plan`` job.

    Raises:
        DatasetError: a skipped episode does not exist, nothing is left to convert,
            ``episodes_stats.jsonl`` lacks an episode (with ``check_stats``), a data or
            video file is missing or its parquet footer is unreadable, or a parquet's row count
            differs from the episode's ``length`` in ``episodes.jsonl``.
    """
    skip = set(options.skip_episodes)
    unknown = sorted(skip - set(range(len(source.episodes))))
    if unknown:
        raise source.error(f"skip_episodes names episodes that do not exist: {unknown}")
    kept = [e["episode_index"] for e in source.episodes if e["episode_index"] not in skip]
    if not kept:
        raise source.error("no episodes left to convert")
    if check_stats:  # a missing or incomplete file fails the plan, not the meta job
        source.episodes_stats  # noqa: B018

    data_sizes, lengths = [], []
    video_sizes = {key: [] for key in source.video_keys}
    for src_index in kept:
        rows, size = _parquet_rows_and_size(source, src_index)
        expected = source.episodes[src_index]["length"]
        if rows != expected:
            raise source.error(
                f"parquet has {rows} rows but episodes.jsonl says length={expected}",
                episode=src_index,
                file=source.data_file(src_index),
            )
        lengths.append(rows)
        data_sizes.append(size)
        for key in source.video_keys:
            path = source.video_file(src_index, key)
            try:
                video_sizes[key].append(os.stat(path).st_size / MIB)
            except FileNotFoundError:
                raise source.error("video file is missing", episode=src_index, file=path) from None

    data_files = assign_files(data_sizes, options.data_file_size_in_mb, options.chunks_size)
    video_files = {
        key: assign_files(sizes, options.video_file_size_in_mb, options.chunks_size)
        for key, sizes in video_sizes.items()
    }
    episodes, start = [], 0
    for new_index, (src_index, length) in enumerate(zip(kept, lengths, strict=True)):
        episodes.append(
            {
                "episode_index": new_index,
                "source_episode_index": src_index,
                "length": length,
                "dataset_from_index": start,
                "dataset_to_index": start + length,
                "data": list(data_files[new_index]),
                "videos": {key: list(files[new_index]) for key, files in video_files.items()},
            }
        )
        start += length

    shards = make_shards(episodes, options.episodes_per_batch)
    return {
        "version": PLAN_VERSION,
        "dataset": source.name,
        "source": str(source.root.resolve()),
        "fps": source.fps,
        "video_keys": source.video_keys,
        "options": {
            "data_file_size_in_mb": options.data_file_size_in_mb,
            "video_file_size_in_mb": options.video_file_size_in_mb,
            "chunks_size": options.chunks_size,
            "episodes_per_batch": options.episodes_per_batch,
            "skip_episodes": sorted(skip),
        },
        "total_frames": start,
        "episodes": episodes,
        "shards": shards,
        "files": {
            "data": _files_of_stream(episodes, shards, lambda e: e["data"]),
            "videos": {
                key: _files_of_stream(episodes, shards, lambda e, k=key: e["videos"][k])
                for key in source.video_keys
            },
        },
    }


def assign_files(sizes_mb: list[float], limit_mb: float, chunks_size: int) -> list[tuple[int, int]]:
    """``(chunk, file)`` of each episode of one stream, by lerobot 0.6.1's rollover rule.

    Args:
        sizes_mb: each episode's size in MiB, in episode order.
        limit_mb: the stream's file size threshold in MiB.
        chunks_size: files per chunk directory.

    A file rolls over before an episode when ``size + episode_size >= limit_mb`` and it already
    holds an episode, so a file exceeds the limit only when one episode alone does.
    """
    assignment, current, size, count = [], (0, 0), 0.0, 0
    for ep_size in sizes_mb:
        if size + ep_size >= limit_mb and count > 0:
            current = next_chunk_file(*current, chunks_size)
            size, count = 0.0, 0
        assignment.append(current)
        size += ep_size
        count += 1
    return assignment


def make_shards(episodes: list[dict], episodes_per_batch: int) -> list[dict]:
    """Cut the episodes into shards of at most ``episodes_per_batch`` consecutive episodes.

    A new shard starts wherever the data file or any camera's file changes, so no shard
    straddles a final file. Shard ids are ``shard-NNNNNN`` in episode order.
    """
    if episodes_per_batch < 1:
        raise ValueError(f"episodes_per_batch must be >= 1, got {episodes_per_batch}")
    shards, first, previous = [], 0, None
    for ep in episodes:
        files = (tuple(ep["data"]), *(tuple(f) for f in ep["videos"].values()))
        index = ep["episode_index"]
        if previous is not None and (files != previous or index - first >= episodes_per_batch):
            shards.append([first, index])
            first = index
        previous = files
    shards.append([first, episodes[-1]["episode_index"] + 1])
    return [{"id": f"shard-{i:06d}", "episodes": bounds} for i, bounds in enumerate(shards)]


def _files_of_stream(episodes: list[dict], shards: list[dict], file_of) -> list[dict]:
    files: dict[tuple[int, int], list[str]] = {}
    for shard in shards:
        chunk, file = file_of(episodes[shard["episodes"][0]])
        files.setdefault((chunk, file), []).append(shard["id"])
    return [{"chunk": c, "file": f, "shards": ids} for (c, f), ids in files.items()]


def _parquet_rows_and_size(source: V21Source, episode_index: int) -> tuple[int, float]:
    # imported here: publish and every other job read plans, only planning reads footers
    import pyarrow.parquet as pq

    path = source.data_file(episode_index)
    try:
        metadata = pq.read_metadata(path)
    except FileNotFoundError:
        raise source.error("data file is missing", episode=episode_index, file=path) from None
    except Exception as exc:  # pyarrow raises ArrowInvalid / OSError for corrupt footers
        raise source.error(f"unreadable parquet: {exc}", episode=episode_index, file=path) from None
    size = 0
    for rg in range(metadata.num_row_groups):
        row_group = metadata.row_group(rg)
        for col in range(row_group.num_columns):
            size += row_group.column(col).total_uncompressed_size
    return metadata.num_rows, size / MIB


def planned_files(plan: dict) -> list[str]:
    """Relative paths of the data and video files the plan makes."""
    paths = [data_path(f["chunk"], f["file"]) for f in plan["files"]["data"]]
    for key, files in plan["files"]["videos"].items():
        paths += [video_path(key, f["chunk"], f["file"]) for f in files]
    return paths


def shard_of(plan: dict, shard_id: str) -> dict:
    """The shard entry with this id; ``KeyError`` if the plan has none."""
    for shard in plan["shards"]:
        if shard["id"] == shard_id:
            return shard
    raise KeyError(f"plan of dataset {plan['dataset']!r} has no shard {shard_id!r}")


def load_plan(path: str | Path) -> dict:
    """Read a plan written by :func:`make_plan` (``results/{dataset}/plan.json``)."""
    return json.loads(Path(path).read_text(encoding="utf-8"))

"""Validate a converted v3.0 dataset against its plan and its v2.1 source.

Checks, each failing with a :class:`~robopipe.errors.DatasetError` that names the episode and
file: the files present are the planned ones; row counts; ``index`` equals the row position
across ``sorted(data/*/*.parquet)`` (lerobot's loader relies on it); ``episode_index`` and
``frame_index`` per episode; the episodes metadata rows (row ``i`` is episode ``i``, frame
ranges, chunk/file indices); timestamps equal ``frame_index / fps`` within ``tolerance_s``;
and decoded frames bit-identical to the source's (native pixel format, no colour conversion),
either the first, middle and last frame of every episode or every frame.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from robopipe.conversion.plan import Plan
from robopipe.conversion.shard import timestamp_error
from robopipe.formats.v21_reader import V21Source
from robopipe.layout import DEFAULT_TOLERANCE_S, INFO_PATH, data_path, video_path
from robopipe.video import FrameReader, VideoError

FRAME_MODES = ("sample", "all")


def validate(
    source: V21Source,
    plan: Plan,
    root: Path,
    *,
    frames: str = "sample",
    tolerance_s: float = DEFAULT_TOLERANCE_S,
    threads: int | None = None,
) -> dict:
    """Check the v3.0 dataset at ``root``; return a summary of what was checked.

    Args:
        source: the v2.1 source it was converted from.
        plan: the conversion plan.
        root: the v3.0 dataset folder.
        frames: ``"sample"`` (first, middle and last frame of every episode and camera) or
            ``"all"`` (every frame).
        tolerance_s: allowed ``|timestamp - frame_index / fps|`` and frame lookup slack, s.
        threads: video files compared at once (PyAV decodes without the GIL); default: the
            CPUs this process may run on.

    Returns:
        ``{"episodes", "frames", "data_files", "video_files", "frames_compared"}``.

    Raises:
        DatasetError: the first check that fails.
    """
    if frames not in FRAME_MODES:
        raise ValueError(f"frames must be one of {FRAME_MODES}, got {frames!r}")
    root = Path(root)
    _check_files(source, plan, root)
    episodes_meta = _read_episodes_meta(root)
    _check_episode_rows(source, plan, episodes_meta)
    timestamps = _check_data(source, plan, root, tolerance_s)
    threads = threads or len(os.sched_getaffinity(0))
    compared = _check_frames(
        source, plan, root, episodes_meta, timestamps, frames, tolerance_s, threads
    )
    return {
        "episodes": len(plan.episodes),
        "frames": plan.total_frames,
        "data_files": len(plan.data_files),
        "video_files": sum(len(f) for f in plan.video_files.values()),
        "frames_compared": compared,
    }


def _check_files(source: V21Source, plan: Plan, root: Path) -> None:
    missing = [rel for rel in plan.file_paths() if not (root / rel).is_file()]
    if missing:
        raise source.error(f"planned output file is missing from {root}", file=missing[0])
    if not (root / INFO_PATH).is_file():
        raise source.error(f"{INFO_PATH} is missing from {root}")


def _read_episodes_meta(root: Path) -> pa.Table:
    files = sorted((root / "meta" / "episodes").glob("*/*.parquet"))
    return pa.concat_tables([pq.ParquetFile(f).read() for f in files])


def _check_episode_rows(source: V21Source, plan: Plan, meta: pa.Table) -> None:
    if meta.num_rows != len(plan.episodes):
        raise source.error(f"meta/episodes has {meta.num_rows} rows, expected {len(plan.episodes)}")
    columns = meta.select(
        [
            "episode_index",
            "dataset_from_index",
            "dataset_to_index",
            "data/chunk_index",
            "data/file_index",
            "length",
        ]
    ).to_pydict()
    for i, ep in enumerate(plan.episodes):
        got = {name: values[i] for name, values in columns.items()}
        want = {
            "episode_index": ep.episode_index,
            "dataset_from_index": ep.dataset_from_index,
            "dataset_to_index": ep.dataset_to_index,
            "data/chunk_index": ep.data[0],
            "data/file_index": ep.data[1],
            "length": ep.length,
        }
        if got != want:
            raise source.error(
                f"meta/episodes row {i} is {got}, expected {want}",
                episode=ep.source_episode_index,
            )


def _check_data(source: V21Source, plan: Plan, root: Path, tolerance_s: float) -> np.ndarray:
    """Check the data files; return the ``timestamp`` column of the whole dataset (float64)."""
    fps = source.fps
    position = 0
    timestamps = []
    by_file: dict[tuple[int, int], list[dict]] = {}
    for ep in plan.episodes:
        by_file.setdefault(tuple(ep.data), []).append(ep)
    for f in plan.data_files:
        rel = data_path(f.chunk, f.file)
        table = pq.ParquetFile(root / rel).read(
            columns=["index", "episode_index", "frame_index", "timestamp"]
        )
        index = table.column("index").to_numpy()
        expected = np.arange(position, position + table.num_rows)
        if not np.array_equal(index, expected):
            bad = int(np.flatnonzero(index != expected)[0])
            raise source.error(
                f"index column is not the row position: row {position + bad} has index "
                f"{index[bad]}",
                file=rel,
            )
        episode_index = table.column("episode_index").to_numpy()
        frame_index = table.column("frame_index").to_numpy()
        ts = table.column("timestamp").to_numpy().astype(np.float64)
        for ep in by_file[(f.chunk, f.file)]:
            lo, hi = ep.dataset_from_index - position, ep.dataset_to_index - position
            if lo < 0 or hi > table.num_rows:
                raise source.error(
                    f"episode rows {lo}..{hi - 1} are not in this file of {table.num_rows} rows",
                    episode=ep.source_episode_index,
                    file=rel,
                )
            if not (episode_index[lo:hi] == ep.episode_index).all():
                raise source.error(
                    f"episode_index column is not {ep.episode_index} in rows {lo}..{hi - 1}",
                    episode=ep.source_episode_index,
                    file=rel,
                )
            if not np.array_equal(frame_index[lo:hi], np.arange(hi - lo)):
                raise source.error(
                    "frame_index is not 0..length-1", episode=ep.source_episode_index, file=rel
                )
            worst, at = timestamp_error(ts[lo:hi], frame_index[lo:hi], fps)
            if worst > tolerance_s:
                raise source.error(
                    f"timestamp differs from frame_index / fps by {worst:.6f} s at frame {at} "
                    f"(tolerance_s={tolerance_s}); if the source's timestamps are off, convert "
                    "with `restamp_timestamps: true`",
                    episode=ep.source_episode_index,
                    file=rel,
                )
        timestamps.append(ts)
        position += table.num_rows
    if position != plan.total_frames:
        raise source.error(f"data files hold {position} rows, expected {plan.total_frames}")
    return np.concatenate(timestamps)


def _check_frames(
    source: V21Source,
    plan: Plan,
    root: Path,
    meta: pa.Table,
    timestamps: np.ndarray,
    mode: str,
    tolerance_s: float,
    threads: int,
) -> int:
    """Compare decoded frames, one video file per task on ``threads`` threads; the first
    failing file in plan order raises."""
    by_file: dict[tuple[str, int, int], list[dict]] = {}
    for key in plan.video_keys:
        for ep in plan.episodes:
            by_file.setdefault((key, *ep.videos[key]), []).append(ep)

    def check(item: tuple[tuple[str, int, int], list[dict]]) -> int:
        (key, chunk, file), episodes = item
        starts = meta.column(f"videos/{key}/from_timestamp").to_numpy()
        return _check_video_file(
            source, root, key, chunk, file, episodes, starts, timestamps, mode, tolerance_s
        )

    with ThreadPoolExecutor(max_workers=threads) as pool:
        return sum(pool.map(check, by_file.items()))


def _check_video_file(
    source: V21Source,
    root: Path,
    key: str,
    chunk: int,
    file: int,
    episodes: list[dict],
    starts: np.ndarray,
    timestamps: np.ndarray,
    mode: str,
    tolerance_s: float,
) -> int:
    compared = 0
    out_path = root / video_path(key, chunk, file)
    with FrameReader(out_path) as out:
        for ep in episodes:
            src_path = source.video_file(ep.source_episode_index, key)
            frames = range(ep.length)
            if mode == "sample":
                frames = sorted({0, ep.length // 2, ep.length - 1})
            with FrameReader(src_path) as src:
                for k in frames:
                    row_ts = timestamps[ep.dataset_from_index + k]
                    try:
                        got = out.frame_at(starts[ep.episode_index] + row_ts, tolerance_s)
                        want = src.frame_at(k / source.fps, tolerance_s)
                    except VideoError as exc:
                        raise source.error(
                            f"frame {k}: {exc.reason}",
                            episode=ep.source_episode_index,
                            file=exc.path,
                        ) from exc
                    if not np.array_equal(got, want):
                        raise source.error(
                            f"frame {k} of camera {key} differs from the source",
                            episode=ep.source_episode_index,
                            file=out_path.relative_to(root),
                        )
                    compared += 1
    return compared

"""The shard job: one batch of consecutive episodes, packed for its final files.

A shard writes, into one directory (moved into place only when complete):

- ``data.parquet``: the episodes' rows, the source's columns and values (``episode_index``
  and ``index`` renumbered only when episodes are skipped; ``timestamp`` rewritten as
  ``frame_index / fps`` only with ``restamp_timestamps``);
- ``episodes.json``: per episode its length and, per camera, the frame count and duration
  (ticks) read from the mp4 header, checked against the parquet's rows.

Video is not copied here: each final video file is remuxed once, straight from the episode
mp4s, by its aggregate job (:func:`robopipe.aggregate.aggregate_video`); a second pass through
an intermediate shard mp4 would double the packet copying for no parallelism, since one job
writes each final file either way.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from robopipe.atomic import atomic_path
from robopipe.layout import DEFAULT_TOLERANCE_S
from robopipe.plan import shard_of
from robopipe.source import V21Source
from robopipe.video import VideoError, probe_video

SHARD_DATA = "data.parquet"
SHARD_EPISODES = "episodes.json"


def build_shard(
    source: V21Source,
    plan: dict,
    shard_id: str,
    out_dir: Path,
    *,
    restamp_timestamps: bool = False,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
) -> None:
    """Write the shard ``shard_id`` of ``plan`` into ``out_dir`` (atomically).

    Raises:
        DatasetError: an episode's parquet is unreadable or its schema differs from the
            first episode's; its timestamps are off ``frame_index / fps`` by more than
            ``tolerance_s`` (without ``restamp_timestamps``); an mp4 is missing or its header
            unreadable (truncated, corrupt); an mp4's frame count differs from the parquet's
            row count.
    """
    first, stop = shard_of(plan, shard_id)["episodes"]
    episodes = plan["episodes"][first:stop]
    renumber = bool(plan["options"]["skip_episodes"])
    with atomic_path(out_dir) as tmp:
        tmp.mkdir()
        tables = [
            _episode_table(source, ep, renumber, restamp_timestamps, tolerance_s) for ep in episodes
        ]
        schema = tables[0].schema
        for ep, table in zip(episodes, tables, strict=True):
            if not table.schema.equals(schema):
                raise source.error(
                    f"columns differ from episode {episodes[0]['source_episode_index']}'s: "
                    f"{table.schema} vs {schema}",
                    episode=ep["source_episode_index"],
                    file=source.data_file(ep["source_episode_index"]),
                )
        # uncompressed: the shard is read once, by aggregate_data, which compresses the output
        pq.write_table(pa.concat_tables(tables), tmp / SHARD_DATA, compression="none")
        rows = [
            {"episode_index": ep["episode_index"], "length": ep["length"], "videos": {}}
            for ep in episodes
        ]
        for key in plan["video_keys"]:
            for row, ep in zip(rows, episodes, strict=True):
                path = source.video_file(ep["source_episode_index"], key)
                try:
                    info = probe_video(path)
                except VideoError as exc:
                    raise source.error(
                        exc.reason, episode=ep["source_episode_index"], file=path
                    ) from exc
                check_frame_count(source, ep, path, info.frames)
                row["videos"][key] = {
                    "frames": info.frames,
                    "duration_ticks": info.duration_ticks,
                    "time_base": str(info.time_base),
                }
        (tmp / SHARD_EPISODES).write_text(json.dumps(rows), encoding="utf-8")


def check_frame_count(source: V21Source, ep: dict, path: Path, frames: int) -> None:
    """Raise a :class:`DatasetError` unless the mp4 at ``path`` has one frame per row."""
    if frames != ep["length"]:
        raise source.error(
            f"{frames} frames in the mp4 but {ep['length']} rows in the parquet",
            episode=ep["source_episode_index"],
            file=path,
        )


def _episode_table(
    source: V21Source, ep: dict, renumber: bool, restamp: bool, tolerance_s: float
) -> pa.Table:
    src_index = ep["source_episode_index"]
    path = source.data_file(src_index)
    try:
        table = pq.ParquetFile(path).read()
    except Exception as exc:  # ArrowInvalid, OSError: corrupt or truncated file
        raise source.error(f"unreadable parquet: {exc}", episode=src_index, file=path) from None
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
        start = ep["dataset_from_index"]
        table = _set_column(table, "index", pa.array(np.arange(start, start + n), index_type))
        episode = pc.cast(
            pa.array(np.full(n, ep["episode_index"])), table.schema.field("episode_index").type
        )
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

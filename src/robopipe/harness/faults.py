"""Content faults written into a copy of a LeRobot v2.1 or v3.0 dataset, one per quality check.

Each ``inject_*`` function rewrites one episode of the dataset at ``root`` in place (so
call it on a copy: :func:`copy_dataset`) and returns a :class:`Fault` saying what it did: the
check that should flag it, the episode, and where applicable the feature, dimension and
frames. Data faults rewrite the episode's rows (v2.1: its parquet; v3.0: its rows of the
packed data file, the file's row groups kept) and then refresh the episode's stored stats
(and ``meta/stats.json`` where there is one) from the new rows, so that only
:func:`inject_wrong_stats` makes the stats disagree. Camera faults decode the episode's mp4
(v3.0: the packed mp4) with PyAV and encode it again with the frames changed, at the same
frame rate and codec (AV1 with SVT-AV1, else H.264), every frame at ``i / fps``.

Faults that change an episode's length (:func:`inject_length_outlier`,
:func:`inject_duplicate_episode` of an episode of another length) are for v2.1 only; convert
the damaged v2.1 copy (``robopipe.conversion.serial.convert_dataset``) for its v3.0 form.
Used by ``tests/quality`` and by the lerobot-doctor comparison benchmark.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import av
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from robopipe.layout import (
    INFO_PATH,
    STATS_PATH,
    V21_EPISODES_PATH,
    V21_EPISODES_STATS_PATH,
)
from robopipe.quality.dataset import column_array, forget_opened, open_dataset
from robopipe.remux import MP4, scheduling_kept
from robopipe.stats import aggregate_stats, numeric_stats

STATE = "observation.state"
ACTION = "action"


@dataclass(frozen=True)
class Fault:
    """One injected fault: what should find it, and where.

    Attributes:
        check: the quality check that should flag it (:data:`robopipe.quality.CHECKS`, or a
            structural one such as ``missing_file``).
        episode: the damaged episode.
        feature, dimension, frames: where in the episode (frames ``[first, last]``), where
            they apply.
        detail: what was done, in words.
    """

    check: str
    episode: int
    feature: str | None = None
    dimension: int | None = None
    frames: tuple[int, int] | None = None
    detail: str = ""
    extra: dict = field(default_factory=dict)


def copy_dataset(source: str | Path, dest: str | Path) -> Path:
    """A private copy of the dataset folder ``source`` at ``dest`` (real file copies, never
    links, so that damaging it cannot touch the original)."""
    return Path(shutil.copytree(source, dest, copy_function=shutil.copy2))


# ---------------------------------------------------------------------------- data faults
def inject_nan(
    root, episode: int, *, feature: str = STATE, frame: int = 3, dimension: int = 0,
    value: float = float("nan"),
) -> Fault:  # fmt: skip
    """Set ``feature[dimension]`` of one frame to ``value`` (NaN; pass ``inf`` for inf)."""

    def change(values):
        values[feature][frame, dimension] = value

    _edit_rows(root, episode, [feature], change)
    return Fault("nan_inf", episode, feature, dimension, (frame, frame), f"{value} at one frame")


def inject_frozen_signal(
    root, episode: int, *, feature: str = STATE, start: int = 2, frames: int = 20
) -> Fault:
    """Repeat ``feature``'s whole vector of frame ``start`` over ``frames`` frames (a stuck
    sensor)."""

    def change(values):
        values[feature][start : start + frames] = values[feature][start]

    _edit_rows(root, episode, [feature], change)
    stop = min(start + frames, int(open_dataset(str(root)).lengths[episode])) - 1
    return Fault("frozen_signal", episode, feature, None, (start, stop), "vector repeated")


def inject_constant_dimension(
    root, episode: int, *, feature: str = STATE, dimension: int = 1
) -> Fault:
    """Hold ``feature[dimension]`` at its first value through the episode, leaving the
    other dimensions as they are."""

    def change(values):
        values[feature][:, dimension] = values[feature][0, dimension]

    _edit_rows(root, episode, [feature], change)
    return Fault("constant_dimension", episode, feature, dimension, None, "dimension held")


def inject_clipped_dimension(
    root, episode: int, *, feature: str = STATE, dimension: int = 2, fraction: float = 0.3
) -> Fault:
    """Clamp ``feature[dimension]`` at the value that ``fraction`` of the episode's frames
    exceed (a saturated sensor: flat tops at one value)."""

    def change(values):
        column = values[feature][:, dimension]
        ceiling = np.quantile(column, 1 - fraction)
        values[feature][:, dimension] = np.minimum(column, ceiling.astype(column.dtype))

    _edit_rows(root, episode, [feature], change)
    return Fault("clipped_dimension", episode, feature, dimension, None, f"top {fraction} clamped")


def inject_action_jump(
    root, episode: int, *, feature: str = ACTION, frame: int = 5, dimension: int = 0,
    size: float = 50.0,
) -> Fault:  # fmt: skip
    """Add ``size`` times the dimension's range over the episode (at least 1) to one frame of
    ``feature[dimension]`` (a spike: a jump up and one back down)."""

    def change(values):
        column = values[feature][:, dimension]
        spread = float(np.ptp(column)) or 1.0
        column[frame] += np.asarray(size * spread, column.dtype)

    _edit_rows(root, episode, [feature], change)
    return Fault("action_jump", episode, feature, dimension, (frame - 1, frame), "spike")


def inject_idle_episode(
    root, episode: int, *, features=(STATE, ACTION), noise: float = 1e-6
) -> Fault:
    """Make the episode idle: every signal of ``features`` holds its first frame's value,
    plus a little noise (``noise`` times the value's magnitude, so the vector is not frozen
    exactly)."""

    def change(values):
        rng = np.random.default_rng(episode)
        for key in features:
            first = values[key][0].astype(np.float64)
            jitter = rng.standard_normal(values[key].shape) * noise * (np.abs(first) + 1e-3)
            values[key][:] = (first + jitter).astype(values[key].dtype)

    _edit_rows(root, episode, list(features), change)
    return Fault("idle_episode", episode, None, None, None, "signals held with noise")


def inject_timestamp_drift(root, episode: int, *, rate: float = 1.25) -> Fault:
    """Write the episode's ``timestamp`` as ``frame_index / fps * rate`` (a clock running at
    ``rate`` times the frame rate's)."""
    fps = float(open_dataset(str(root)).fps)

    def change(values):
        count = len(values["timestamp"])
        values["timestamp"][:] = (np.arange(count) / fps * rate).astype(values["timestamp"].dtype)

    _edit_rows(root, episode, ["timestamp"], change)
    return Fault("timestamp_drift", episode, "timestamp", None, None, f"clock rate x{rate}")


def inject_wrong_stats(
    root, episode: int, *, feature: str = STATE, stat: str = "mean", offset: float = 1.0
) -> Fault:
    """Add ``offset`` to every dimension of the episode's stored ``stat`` of ``feature``
    (v2.1 ``episodes_stats.jsonl``, v3.0 ``meta/episodes`` ``stats/*`` columns)."""
    stats = _stored_stats(root, episode)
    stats[feature][stat] = (np.asarray(stats[feature][stat], np.float64) + offset).tolist()
    _write_stats(root, episode, stats, refresh_global=False)
    return Fault("stats_mismatch", episode, feature, None, None, f"{stat} + {offset}")


def inject_duplicate_episode(
    root, episode: int, *, of: int, near: bool = False, noise: float = 1e-4
) -> Fault:
    """Make ``episode`` a copy of the earlier episode ``of``: its signals (every numeric
    feature but the bookkeeping columns) and its videos. ``near``: plus noise of ``noise``
    times each dimension's range. Episodes of different lengths: v2.1 only (the episode takes
    ``of``'s length)."""
    dataset = open_dataset(str(root))
    keys = dataset.signal_keys
    source = dataset.columns(of, keys)
    if dataset.lengths[of] != dataset.lengths[episode]:
        _set_length(root, episode, int(dataset.lengths[of]), copy_videos_of=of)
    else:
        for key in dataset.video_keys:
            if dataset.meta is None:
                shutil.copyfile(dataset.video_file(of, key), dataset.video_file(episode, key))
    rng = np.random.default_rng(episode)

    def change(values):
        for key in keys:
            copy = source[key].astype(np.float64)
            if near:
                spread = np.ptp(copy, axis=0) if copy.ndim > 1 else np.ptp(copy)
                copy = copy + rng.standard_normal(copy.shape) * noise * np.maximum(spread, 1e-6)
            values[key][:] = copy.reshape(values[key].shape).astype(values[key].dtype)

    _edit_rows(root, episode, keys, change)
    kind = "near" if near else "exact"
    return Fault("duplicate_episode", episode, None, None, None, f"{kind} copy of {of}", {"of": of})


def inject_length_outlier(root, episode: int, *, length: int = 3) -> Fault:
    """Cut the episode to its first ``length`` frames (rows, videos, metadata and the
    ``index`` column of every later episode). v2.1 only."""
    _set_length(root, episode, length)
    return Fault("episode_length_outlier", episode, None, None, None, f"cut to {length} frames")


# ---------------------------------------------------------------------------- camera faults
def inject_frozen_camera(
    root, episode: int, *, video_key: str | None = None, start: int = 2, seconds: float = 2.5
) -> Fault:
    """Show frame ``start`` of camera ``video_key`` (default: the first) for ``seconds``
    (a camera that froze), encoding the mp4 again."""
    dataset = open_dataset(str(root))
    key = video_key or dataset.video_keys[0]
    count = max(2, round(seconds * dataset.fps))
    stop = min(start + count, int(dataset.lengths[episode]))

    def change(frames):
        frames[start:stop] = frames[start]

    _edit_frames(root, episode, key, change)
    return Fault("frozen_camera", episode, key, None, (start, stop - 1), f"frame held {seconds} s")


def inject_black_camera(
    root, episode: int, *, video_key: str | None = None, start: int = 2, seconds: float = 1.5
) -> Fault:
    """Make camera ``video_key``'s picture (default: the first camera) black for ``seconds``
    from frame ``start``, encoding the mp4 again."""
    dataset = open_dataset(str(root))
    key = video_key or dataset.video_keys[0]
    count = max(1, round(seconds * dataset.fps))
    stop = min(start + count, int(dataset.lengths[episode]))

    def change(frames):
        frames[start:stop] = 0

    _edit_frames(root, episode, key, change)
    return Fault("black_camera", episode, key, None, (start, stop - 1), f"black {seconds} s")


def inject_unreadable_video(root, episode: int, *, video_key: str | None = None) -> Fault:
    """Overwrite the episode's mp4 of ``video_key`` (default: the first camera) with bytes
    that are no video. v2.1 (a v3.0 mp4 holds other episodes too)."""
    dataset = open_dataset(str(root))
    key = video_key or dataset.video_keys[0]
    Path(dataset.video_file(episode, key)).write_bytes(b"this is not an mp4 file\n" * 64)
    return Fault("unreadable_video", episode, key, None, None, "garbage bytes")


def inject_missing_file(root, episode: int, *, video_key: str | None = None) -> Fault:
    """Delete the episode's mp4 of ``video_key`` (default: the first camera); v2.1."""
    dataset = open_dataset(str(root))
    key = video_key or dataset.video_keys[0]
    os.remove(dataset.video_file(episode, key))
    return Fault("missing_file", episode, key, None, None, "mp4 deleted")


# ---------------------------------------------------------------------------- rewriting
def _edit_rows(root, episode: int, keys: list[str], change) -> None:
    """Apply ``change({key: writable ndarray})`` to ``keys`` of ``episode``'s rows, write
    them back and refresh the episode's stored stats."""
    forget_opened()
    dataset = open_dataset(str(root))
    path = dataset.data_file(episode)
    table = pq.read_table(path)
    if dataset.meta is None:
        rows = np.arange(table.num_rows)
    else:
        first = int(dataset.meta.episodes["dataset_from_index"][episode])
        index = table.column("index").to_numpy()
        rows = np.flatnonzero((index >= first) & (index < first + dataset.lengths[episode]))
    values = {key: column_array(table.column(key))[rows].copy() for key in keys}
    change(values)
    for key in keys:
        full = column_array(table.column(key)).copy()
        full[rows] = values[key]
        table = table.set_column(
            table.schema.get_field_index(key),
            table.schema.field(key),
            _like(full, table.column(key)),
        )
    _write_parquet(path, table)
    forget_opened()
    _refresh_stats(root, episode)


def _like(values: np.ndarray, column: pa.ChunkedArray) -> pa.Array:
    """``values`` as an arrow array of ``column``'s type."""
    kind = column.type
    if pa.types.is_fixed_size_list(kind) or pa.types.is_list(kind) or pa.types.is_large_list(kind):
        flat = pa.array(values.reshape(-1), type=kind.value_type)
        if pa.types.is_fixed_size_list(kind):
            return pa.FixedSizeListArray.from_arrays(flat, type=kind)
        offsets = np.arange(0, values.size + 1, values.shape[1], dtype=np.int32)
        return pa.ListArray.from_arrays(pa.array(offsets), flat, type=kind)
    return pa.array(values.reshape(-1), type=kind)


def _write_parquet(path: str, table: pa.Table) -> None:
    """Write ``table`` over ``path``, keeping the file's row-group sizes."""
    sizes = [g.num_rows for g in (pq.ParquetFile(path).metadata.row_group(i)
             for i in range(pq.ParquetFile(path).metadata.num_row_groups))]  # fmt: skip
    if sum(sizes) != table.num_rows:
        sizes = [table.num_rows]
    tmp = f"{path}.tmp"
    with pq.ParquetWriter(tmp, table.schema) as writer:
        start = 0
        for size in sizes:
            writer.write_table(table.slice(start, size), row_group_size=max(size, 1))
            start += size
    os.replace(tmp, path)


def _stored_stats(root, episode: int) -> dict:
    dataset = open_dataset(str(root))
    if dataset.meta is None:
        for line in Path(root, V21_EPISODES_STATS_PATH).read_text().splitlines():
            if line.strip() and json.loads(line)["episode_index"] == episode:
                return json.loads(line)["stats"]
        return {}
    stats = dataset.stored_episode_stats([episode]).get(episode, {})
    return {k: {s: v.tolist() for s, v in entry.items()} for k, entry in stats.items()}


def _refresh_stats(root, episode: int) -> None:
    """Recompute the stored stats of ``episode``'s numeric features from its rows (as
    :func:`robopipe.stats.numeric_stats`), keeping the camera stats."""
    dataset = open_dataset(str(root))
    stats = _stored_stats(root, episode)
    if not stats:
        return
    numeric = [k for k in stats if k in dataset.features and k not in dataset.video_keys]
    columns = dataset.columns(
        episode, [k for k in numeric if dataset.features[k]["dtype"] != "image"]
    )
    for key, values in columns.items():
        with np.errstate(invalid="ignore"):  # inf data gives NaN std, as lerobot's
            stats[key] = {k: v.tolist() for k, v in numeric_stats(values).items()}
    _write_stats(root, episode, stats, refresh_global=True)


def _write_stats(root, episode: int, stats: dict, *, refresh_global: bool) -> None:
    dataset = open_dataset(str(root))
    root = Path(root)
    if dataset.meta is None:
        path = root / V21_EPISODES_STATS_PATH
        lines = []
        for line in path.read_text().splitlines():
            if line.strip() and json.loads(line)["episode_index"] == episode:
                line = json.dumps({"episode_index": episode, "stats": stats})
            lines.append(line)
        path.write_text("".join(f"{line}\n" for line in lines))
    else:
        _write_v30_stats(root, episode, stats)
    if refresh_global and (root / STATS_PATH).is_file():
        forget_opened()
        every = open_dataset(str(root)).stored_episode_stats(range(dataset.num_episodes))
        listed = [
            {k: {s: np.asarray(v) for s, v in e.items()} for k, e in every[i].items()}
            for i in sorted(every)
        ]
        old = json.loads((root / STATS_PATH).read_text())
        with np.errstate(invalid="ignore"):  # NaN or inf data: NaN stats
            new = aggregate_stats(listed)
        old.update({k: v for k, v in new.items() if k in old})
        (root / STATS_PATH).write_text(json.dumps(old, indent=4))
    forget_opened()


def _write_v30_stats(root: Path, episode: int, stats: dict) -> None:
    for path in sorted((root / "meta" / "episodes").glob("chunk-*/file-*.parquet")):
        table = pq.read_table(path)
        rows = np.flatnonzero(table.column("episode_index").to_numpy() == episode)
        if not len(rows):
            continue
        row = int(rows[0])
        for key, entry in stats.items():
            for stat, value in entry.items():
                name = f"stats/{key}/{stat}"
                if name not in table.column_names:
                    continue
                column = table.column(name).to_pylist()
                column[row] = np.asarray(value).tolist()
                i = table.schema.get_field_index(name)
                table = table.set_column(
                    i, table.schema.field(name), pa.array(column, table.schema.field(name).type)
                )
        _write_parquet(str(path), table)


def _set_length(root, episode: int, length: int, *, copy_videos_of: int | None = None) -> None:
    """Give v2.1 ``episode`` ``length`` frames: its rows cut or repeated to that length
    (``copy_videos_of``: its videos copied from that episode, else cut), and every later
    episode's ``index`` column, ``episodes.jsonl`` and ``info.json`` made to agree."""
    dataset = open_dataset(str(root))
    if dataset.meta is not None:
        raise ValueError("a length change is written into a v2.1 copy; convert it for v3.0")
    root = Path(root)
    old = int(dataset.lengths[episode])
    path = dataset.data_file(episode)
    table = pq.read_table(path)
    take = np.minimum(np.arange(length), old - 1)
    table = table.take(pa.array(take))
    first = int(table.column("index")[0].as_py()) if length else 0
    table = _replace(table, "frame_index", np.arange(length))
    table = _replace(table, "index", first + np.arange(length))
    if length > old:  # rows repeated: timestamps go on at 1 / fps
        table = _replace(table, "timestamp", np.arange(length) / dataset.fps)
    _write_parquet(path, table)
    shift = length - old
    for later in range(episode + 1, dataset.num_episodes):
        later_path = dataset.data_file(later)
        later_table = pq.read_table(later_path)
        index = later_table.column("index").to_numpy() + shift
        _write_parquet(later_path, _replace(later_table, "index", index))
    lines = []
    for line in (root / V21_EPISODES_PATH).read_text().splitlines():
        if line.strip():
            entry = json.loads(line)
            if entry["episode_index"] == episode:
                entry["length"] = length
            line = json.dumps(entry)
        lines.append(line)
    (root / V21_EPISODES_PATH).write_text("".join(f"{line}\n" for line in lines))
    info = json.loads((root / INFO_PATH).read_text())
    info["total_frames"] = int(info["total_frames"]) + shift
    (root / INFO_PATH).write_text(json.dumps(info, indent=4))
    forget_opened()
    for key in dataset.video_keys:
        if copy_videos_of is not None:
            shutil.copyfile(
                dataset.video_file(copy_videos_of, key), dataset.video_file(episode, key)
            )
        else:
            _edit_frames(root, episode, key, lambda frames: None, length=length)
    _refresh_stats(root, episode)


def _replace(table: pa.Table, name: str, values: np.ndarray) -> pa.Table:
    """``table`` with the scalar column ``name`` replaced by ``values`` (its type kept)."""
    field = table.schema.field(name)
    return table.set_column(table.schema.get_field_index(name), field, pa.array(values, field.type))


def _edit_frames(root, episode: int, key: str, change, *, length: int | None = None) -> None:
    """Decode the mp4 holding ``episode``'s camera ``key``, apply ``change(frames)`` to the
    episode's frames (a writable uint8 (T, H, W, 3) view; ``length``: keep only its first
    ``length`` frames, v2.1), and encode the file again."""
    forget_opened()
    dataset = open_dataset(str(root))
    path = dataset.video_file(episode, key)
    with av.open(path, format=MP4) as container:
        stream = container.streams.video[0]
        codec = stream.codec_context.codec.canonical_name
        frames = np.stack([f.to_ndarray(format="rgb24") for f in container.decode(stream)])
    first = round(dataset.video_start_s(episode, key) * dataset.fps)
    count = int(dataset.lengths[episode]) if length is None else length
    change(frames[first : first + count])
    if length is not None:
        frames = frames[:length]
    _encode(path, frames, dataset.fps, codec)


def _encode(path: str, frames: np.ndarray, fps: float, codec: str) -> None:
    """Encode uint8 (T, H, W, 3) ``frames`` over ``path`` as lerobot's encoder does (GOP 2,
    CRF 30, yuv420p), each frame at ``i / fps``."""
    encoder = "libsvtav1" if codec == "av1" and "libsvtav1" in av.codecs_available else "libx264"
    options = {"g": "2", "crf": "30"}
    if encoder == "libsvtav1":
        options["svtav1-params"] = "lp=1"
    os.environ.setdefault("SVT_LOG", "1")
    tmp = f"{path}.tmp.mp4"
    with scheduling_kept(), av.open(tmp, "w", format="mp4") as out:
        stream = out.add_stream(encoder, round(fps), options=options)
        stream.pix_fmt = "yuv420p"
        stream.height, stream.width = frames.shape[1:3]
        for frame in [*frames, None]:
            video = None if frame is None else av.VideoFrame.from_ndarray(frame, format="rgb24")
            for packet in stream.encode(video):
                out.mux(packet)
    os.replace(tmp, path)

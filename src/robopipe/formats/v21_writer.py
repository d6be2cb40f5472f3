"""Write LeRobot v2.1 datasets the way lerobot 0.3.x's ``LeRobotDataset`` writer made them.

Layout (lerobot 0.3.x ``datasets/utils.py`` templates, kept in :mod:`robopipe.layout`)::

    meta/info.json  meta/episodes.jsonl  meta/episodes_stats.jsonl  meta/tasks.jsonl
    data/chunk-XXX/episode_XXXXXX.parquet              one per episode
    videos/chunk-XXX/<video_key>/episode_XXXXXX.mp4    one per camera per episode

What is reproduced from lerobot 0.3.x:

- ``info.json``: ``create_empty_dataset_info`` key order; the default features
  (``timestamp``, ``frame_index``, ``episode_index``, ``index``, ``task_index``) come last;
  a video feature's ``info`` is probed from its first episode's mp4 like ``get_video_info``.
- Episode parquet: what HF ``datasets`` writes for ``get_hf_features_from_features``: a 1-D
  feature of shape ``[N > 1]`` is ``fixed_size_list<element: dtype>[N]``, shape ``[1]`` is a
  plain column, video features have no column, and the schema carries a ``huggingface``
  metadata key ``{"info": {"features": {...}}}``.
- Videos: ``video_utils.encode_video_frames``: PyAV, ``add_stream(vcodec, fps,
  options={"g": "2", "crf": "30"})``, ``pix_fmt`` yuv420p, RGB frames in, encoder flushed.
- ``episodes_stats.jsonl``: ``compute_stats.compute_episode_stats`` on the frames given to the
  encoder and the values before the parquet casts them (see
  :func:`robopipe.stats.compute_episode_stats`).

A dataset can also be written in parts by several processes: each part's writer starts at a
given episode and frame index (``first_episode``, ``first_index``), writes only its episodes'
files and returns its meta lines with :meth:`V21Writer.part`; :func:`write_parts_meta` then
writes ``meta/`` for all parts.
"""

from __future__ import annotations

import copy
import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Self

import av
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from robopipe.atomic import atomic_path, write_json
from robopipe.errors import DatasetError
from robopipe.layout import (
    DEFAULT_CHUNK_SIZE,
    DEFAULT_FEATURE_SPECS,
    V21_DATA_PATH,
    V21_EPISODES_PATH,
    V21_EPISODES_STATS_PATH,
    V21_INFO_PATH,
    V21_TASKS_PATH,
    V21_VIDEO_PATH,
)
from robopipe.remux import scheduling_kept
from robopipe.stats import compute_episode_stats, sample_frames

log = logging.getLogger(__name__)

CODEBASE_VERSION = "v2.1"

# Codec name accepted here -> PyAV encoder. lerobot 0.3.x passes "libsvtav1" or "h264" to
# ``add_stream``; "h264" is pinned to libx264 so that the output does not depend on which
# H.264 encoder FFmpeg happens to prefer.
# "h264_lossless" (not a lerobot option) is libx264rgb at qp 0 on RGB frames (High 4:4:4
# Predictive, stored as gbrp): decoded frames equal the encoded ones bit for bit.
ENCODERS = {"libsvtav1": "libsvtav1", "h264": "libx264", "h264_lossless": "libx264rgb"}

# lerobot 0.3.x video_utils.encode_video_frames defaults.
VIDEO_PIX_FMT = "yuv420p"
VIDEO_GOP = 2
VIDEO_CRF = 30
LOSSLESS_PIX_FMT = "rgb24"


def _hf_feature(ft: Mapping) -> dict:
    # What HF datasets records for lerobot's Value / Sequence(length=N) features.
    value = {"dtype": ft["dtype"], "_type": "Value"}
    if list(ft["shape"]) == [1]:
        return value
    return {"feature": value, "length": int(ft["shape"][0]), "_type": "Sequence"}


def _arrow_type(ft: Mapping) -> pa.DataType:
    value = pa.from_numpy_dtype(np.dtype(ft["dtype"]))
    if list(ft["shape"]) == [1]:
        return value
    return pa.list_(pa.field("element", value), int(ft["shape"][0]))


class V21Writer:
    """Writes one LeRobot v2.1 dataset, episode by episode.

    Args:
        root: output folder; created if missing. Existing files of the same names are replaced.
        fps: frames per second of every episode and video (int).
        features: the non-default features, in the order they should appear in info.json,
            ``name -> {"dtype", "shape", "names"}``. Numeric features need a 1-D shape
            (``[1]`` for a scalar); cameras have ``dtype "video"`` and shape ``[H, W, 3]``
            (``names`` defaults to ``["height", "width", "channels"]``; ``info`` is probed).
        robot_type: written to info.json as is (may be None).
        codec: ``"libsvtav1"`` (lerobot's default, recorded as ``"av1"``), ``"h264"``
            (libx264, recorded as ``"h264"``) or ``"h264_lossless"`` (libx264rgb, qp 0,
            recorded as ``"h264"`` with pix_fmt ``"gbrp"``). When PyAV lacks libsvtav1 the
            writer falls back to libx264 and logs a warning; :attr:`codec` then reads
            ``"h264"``.
        chunks_size: episodes per ``chunk-XXX`` folder (lerobot's 1000).
        preset: libsvtav1 ``preset`` option, or None for the encoder default (as lerobot
            0.3.x). Ignored for h264.
        name: dataset name used in error messages; defaults to ``root``'s folder name.
        first_episode: index of the first episode written (a part of a dataset; default 0).
        first_index: global frame ``index`` of that episode's first frame (default 0).
        tasks: tasks numbered in this order before any episode adds its own (default none).

    Raises:
        ValueError: unknown codec, or a feature shape this writer does not support.
        RuntimeError: ``codec="h264"`` and PyAV has no libx264.

    Use :meth:`add_episode` for each episode, then :meth:`close` (or a ``with`` block) to write
    the meta files; nothing under ``meta/`` exists before that.
    """

    def __init__(
        self,
        root: str | Path,
        *,
        fps: int,
        features: Mapping[str, Mapping],
        robot_type: str | None = None,
        codec: str = "libsvtav1",
        chunks_size: int = DEFAULT_CHUNK_SIZE,
        preset: int | None = None,
        name: str | None = None,
        first_episode: int = 0,
        first_index: int = 0,
        tasks: Sequence[str] = (),
    ) -> None:
        if codec not in ENCODERS:
            raise ValueError(f"codec must be one of {sorted(ENCODERS)}, not {codec!r}")
        if codec == "libsvtav1" and "libsvtav1" not in av.codecs_available:
            log.warning("PyAV has no libsvtav1 encoder: writing H.264 (libx264) videos instead")
            codec = "h264"
        if ENCODERS[codec] not in av.codecs_available:
            raise RuntimeError(f"PyAV has no {ENCODERS[codec]} encoder")
        self.root = Path(root)
        self.name = name or self.root.name
        self.fps = int(fps)
        self.codec = codec
        self.preset = preset
        self.chunks_size = int(chunks_size)
        self.features = {k: _check_feature(k, dict(v)) for k, v in features.items()}
        for key in DEFAULT_FEATURE_SPECS:
            if key in self.features:
                raise ValueError(f"feature {key!r} is added by the writer; do not pass it")
        self.video_keys = [k for k, ft in self.features.items() if ft["dtype"] == "video"]
        self.column_keys = [k for k in self.features if k not in self.video_keys]
        self.robot_type = robot_type
        self.tasks: dict[str, int] = {task: i for i, task in enumerate(dict.fromkeys(tasks))}
        self.first_episode = int(first_episode)
        self.first_index = int(first_index)
        self.episodes: list[dict] = []
        self.episodes_stats: list[dict] = []
        self.total_frames = 0
        self._schema = self._arrow_schema()

    # ------------------------------------------------------------------ episodes
    def add_episode(
        self,
        frames: Mapping[str, np.ndarray],
        columns: Mapping[str, np.ndarray],
        task: str,
    ) -> int:
        """Write one episode's parquet and mp4s; return its episode index.

        Args:
            frames: ``video_key -> uint8 (T, H, W, 3)`` RGB frames, one entry per camera.
            columns: ``name -> (T, N)`` (or ``(T,)`` for shape ``[1]``) per numeric feature;
                cast to the feature's dtype.
            task: the episode's task (natural language). Tasks are numbered in order of
                first appearance.

        The writer adds ``timestamp = frame_index / fps`` (seconds, float32 in the parquet),
        ``frame_index``, ``episode_index``, the global ``index`` and ``task_index``.

        Raises:
            DatasetError: missing or extra keys, wrong shapes or dtypes, inconsistent or zero
                frame counts, or an encoder that did not return exactly one packet per frame.
        """
        ep = self.first_episode + len(self.episodes)
        length = self._check_episode(ep, frames, columns)
        task_index = self.tasks.setdefault(task, len(self.tasks))
        chunk = ep // self.chunks_size

        frame_index = np.arange(length, dtype=np.int64)
        values = {k: np.asarray(columns[k], dtype=self.features[k]["dtype"]) for k in columns}
        defaults = {
            # lerobot 0.3.x add_frame: timestamp = frame_index / fps, a float64 until the
            # parquet casts it to float32; stats are computed on the float64 values.
            "timestamp": frame_index / self.fps,
            "frame_index": frame_index,
            "episode_index": np.full(length, ep, dtype=np.int64),
            "index": np.arange(length, dtype=np.int64) + self.first_index + self.total_frames,
            "task_index": np.full(length, task_index, dtype=np.int64),
        }

        data_file = self.root / V21_DATA_PATH.format(episode_chunk=chunk, episode_index=ep)
        self._write_parquet(data_file, values, defaults)
        for key in self.video_keys:
            video_file = self.root / V21_VIDEO_PATH.format(
                episode_chunk=chunk, video_key=key, episode_index=ep
            )
            self._encode(video_file, frames[key], ep)
            if "info" not in self.features[key]:
                self.features[key]["info"] = probe_video_info(video_file)

        # lerobot sampled the frames it encoded for the image stats, not decoded ones
        episode_data = {
            key: sample_frames(frames[key]) if key in self.video_keys else values[key]
            for key in self.features
        } | defaults
        stats = compute_episode_stats(episode_data, self.video_keys)

        self.episodes.append({"episode_index": ep, "tasks": [task], "length": length})
        self.episodes_stats.append({"episode_index": ep, "stats": stats})
        self.total_frames += length
        return ep

    def _check_episode(self, ep: int, frames: Mapping, columns: Mapping) -> int:
        if set(frames) != set(self.video_keys):
            raise DatasetError(
                self.name,
                f"cameras {sorted(frames)} != video features {self.video_keys}",
                episode=ep,
            )
        if set(columns) != set(self.column_keys):
            raise DatasetError(
                self.name, f"columns {sorted(columns)} != features {self.column_keys}", episode=ep
            )
        lengths = {k: len(v) for k, v in [*frames.items(), *columns.items()]}
        length = next(iter(lengths.values()), 0)
        if length == 0 or any(n != length for n in lengths.values()):
            raise DatasetError(self.name, f"frame counts differ or are zero: {lengths}", episode=ep)
        for key in self.video_keys:
            arr = frames[key]
            want = (length, *self.features[key]["shape"])
            if arr.dtype != np.uint8 or arr.shape != want:
                raise DatasetError(
                    self.name,
                    f"camera {key!r}: frames are {arr.dtype} {arr.shape}, expected uint8 {want}",
                    episode=ep,
                )
        for key in self.column_keys:
            shape = tuple(np.shape(columns[key]))
            n = self.features[key]["shape"][0]
            if shape[1:] != (n,) and not (n == 1 and shape[1:] == ()):
                raise DatasetError(
                    self.name,
                    f"column {key!r} has shape {shape}, expected ({length}, {n})",
                    episode=ep,
                )
        return length

    def _arrow_schema(self) -> pa.Schema:
        fts = {k: self.features[k] for k in self.column_keys} | DEFAULT_FEATURE_SPECS
        hf = {"info": {"features": {k: _hf_feature(ft) for k, ft in fts.items()}}}
        return pa.schema(
            [pa.field(k, _arrow_type(ft)) for k, ft in fts.items()],
            metadata={"huggingface": json.dumps(hf)},
        )

    def _write_parquet(self, path: Path, values: Mapping, defaults: Mapping) -> None:
        arrays = []
        for field in self._schema:
            ft = self.features.get(field.name) or DEFAULT_FEATURE_SPECS[field.name]
            data = values.get(field.name, defaults.get(field.name))
            flat = np.ascontiguousarray(data, dtype=ft["dtype"]).reshape(-1)
            if pa.types.is_fixed_size_list(field.type):
                arrays.append(pa.FixedSizeListArray.from_arrays(pa.array(flat), type=field.type))
            else:
                arrays.append(pa.array(flat, field.type))
        with atomic_path(path) as tmp:
            pq.write_table(pa.Table.from_arrays(arrays, schema=self._schema), tmp)

    def _encode(self, path: Path, frames: np.ndarray, ep: int) -> None:
        """Encode ``frames`` (uint8 (T, H, W, 3)) to ``path`` like ``encode_video_frames``."""
        options = {"g": str(VIDEO_GOP), "crf": str(VIDEO_CRF)}
        pix_fmt = VIDEO_PIX_FMT
        if self.codec == "libsvtav1":
            # One level of parallelism: the SVT-AV1 4.1 bundled with PyAV 18 was seen to
            # deadlock (every thread in futex wait) in a few of a thousand multi-threaded
            # encodes on a busy machine; one thread per encoder is also faster here, where
            # episodes are small and the jobs already use every core.
            options["svtav1-params"] = "lp=1"
            if self.preset is not None:
                options["preset"] = str(self.preset)
        if self.codec == "h264_lossless":
            options, pix_fmt = {"g": str(VIDEO_GOP), "qp": "0"}, LOSSLESS_PIX_FMT
        # SVT-AV1 prints a banner per encoder unless its own log level says errors only.
        os.environ.setdefault("SVT_LOG", "1")
        packets = 0
        first_pts = None
        with atomic_path(path) as tmp, scheduling_kept():
            with av.open(str(tmp), "w", format="mp4") as out:
                stream = out.add_stream(ENCODERS[self.codec], self.fps, options=options)
                stream.pix_fmt = pix_fmt
                stream.height, stream.width = frames.shape[1:3]
                for frame in [*frames, None]:
                    video_frame = None
                    if frame is not None:
                        video_frame = av.VideoFrame.from_ndarray(frame, format="rgb24")
                    for packet in stream.encode(video_frame):
                        first_pts = packet.pts if first_pts is None else first_pts
                        packets += 1
                        out.mux(packet)
            if packets != len(frames) or first_pts != 0:
                raise DatasetError(
                    self.name,
                    f"encoder gave {packets} packets starting at pts {first_pts} "
                    f"for {len(frames)} frames",
                    episode=ep,
                    file=path.relative_to(self.root),
                )

    # ------------------------------------------------------------------ meta
    def info(self) -> dict:
        """The ``meta/info.json`` dict (lerobot 0.3.x ``create_empty_dataset_info`` order)."""
        n = len(self.episodes)
        return {
            "codebase_version": CODEBASE_VERSION,
            "robot_type": self.robot_type,
            "total_episodes": n,
            "total_frames": self.total_frames,
            "total_tasks": len(self.tasks),
            "total_videos": n * len(self.video_keys),
            "total_chunks": -(-n // self.chunks_size),
            "chunks_size": self.chunks_size,
            "fps": self.fps,
            "splits": {"train": f"0:{n}"} if n else {},
            "data_path": V21_DATA_PATH,
            "video_path": V21_VIDEO_PATH if self.video_keys else None,
            "features": copy.deepcopy(self.features | DEFAULT_FEATURE_SPECS),
        }

    def part(self) -> dict:
        """This writer's meta lines, for :func:`write_parts_meta` (a JSON-ready dict).

        Keys: ``first_episode``, ``first_index``, ``total_frames``, ``tasks`` (in task index
        order), ``episodes`` and ``episodes_stats`` (the jsonl lines), ``info`` (:meth:`info`
        of this part alone; its totals and splits are rewritten when the parts are merged).
        """
        return {
            "first_episode": self.first_episode,
            "first_index": self.first_index,
            "total_frames": self.total_frames,
            "tasks": list(self.tasks),
            "episodes": self.episodes,
            "episodes_stats": self.episodes_stats,
            "info": self.info(),
        }

    def close(self) -> None:
        """Write ``meta/`` (tasks, episodes, episodes_stats, then info.json), each atomically.

        Raises:
            ValueError: this writer writes a part (``first_episode`` or ``first_index`` not
                0); use :meth:`part` and :func:`write_parts_meta`.
        """
        if self.first_episode or self.first_index:
            raise ValueError("a part of a dataset has no meta/ of its own: use write_parts_meta")
        tasks = [{"task_index": i, "task": t} for t, i in self.tasks.items()]
        _write_jsonl(self.root / V21_TASKS_PATH, tasks)
        _write_jsonl(self.root / V21_EPISODES_PATH, self.episodes)
        _write_jsonl(self.root / V21_EPISODES_STATS_PATH, self.episodes_stats)
        write_json(self.root / V21_INFO_PATH, self.info())

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()


def write_parts_meta(root: str | Path, parts: Sequence[Mapping], name: str | None = None) -> None:
    """Write ``meta/`` of a dataset whose episodes were written in parts (:meth:`V21Writer.part`).

    ``parts`` are in episode order; their files must already be under ``root``. ``info.json``
    is the first part's with the totals and ``splits`` of the whole dataset.

    Raises:
        DatasetError: parts that do not follow each other (episode or frame indices with gaps
            or overlaps), that number tasks differently, or that disagree on fps or features.
    """
    root = Path(root)
    name = name or root.name
    if not parts:
        raise DatasetError(name, "no parts to merge")
    info = copy.deepcopy(parts[0]["info"])
    tasks: list[str] = []
    episodes, episodes_stats = [], []
    total_frames = 0
    for part in parts:
        ep = part["first_episode"]
        if ep != len(episodes) or part["first_index"] != total_frames:
            raise DatasetError(
                name,
                f"part starting at episode {ep}, frame {part['first_index']} does not follow "
                f"{len(episodes)} episodes of {total_frames} frames",
                episode=ep,
            )
        if part["tasks"][: len(tasks)] != tasks:
            raise DatasetError(name, f"part numbers tasks {part['tasks']}, not {tasks}", episode=ep)
        for key in ("fps", "features", "chunks_size"):
            if part["info"][key] != info[key]:
                raise DatasetError(name, f"part has another {key} than the first part", episode=ep)
        tasks = list(part["tasks"])
        episodes += part["episodes"]
        episodes_stats += part["episodes_stats"]
        total_frames += part["total_frames"]
    n = len(episodes)
    videos = sum(ft["dtype"] == "video" for ft in info["features"].values())
    info.update(
        total_episodes=n,
        total_frames=total_frames,
        total_tasks=len(tasks),
        total_videos=n * videos,
        total_chunks=-(-n // info["chunks_size"]),
        splits={"train": f"0:{n}"},
    )
    _write_jsonl(root / V21_TASKS_PATH, [{"task_index": i, "task": t} for i, t in enumerate(tasks)])
    _write_jsonl(root / V21_EPISODES_PATH, episodes)
    _write_jsonl(root / V21_EPISODES_STATS_PATH, episodes_stats)
    write_json(root / V21_INFO_PATH, info)


def probe_video_info(path: str | Path) -> dict:
    """A video feature's ``info`` dict, read from an mp4 like lerobot 0.3.x ``get_video_info``.

    Keys, in lerobot's order: ``video.height``, ``video.width``, ``video.codec`` (FFmpeg's
    canonical name, e.g. ``"av1"``), ``video.pix_fmt``, ``video.is_depth_map`` (False),
    ``video.fps`` (int of the stream's base rate), ``video.channels`` (3 for yuv420p),
    ``has_audio``.
    """
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        info = {
            "video.height": stream.height,
            "video.width": stream.width,
            "video.codec": stream.codec_context.codec.canonical_name,
            "video.pix_fmt": stream.pix_fmt,
            "video.is_depth_map": False,
            "video.fps": int(stream.base_rate),
            "video.channels": 3,
            "has_audio": len(container.streams.audio) > 0,
        }
    return info


def _check_feature(key: str, ft: dict) -> dict:
    shape = [int(n) for n in ft["shape"]]
    if ft["dtype"] == "video":
        if len(shape) != 3 or shape[2] != 3:
            raise ValueError(f"video feature {key!r}: shape must be [H, W, 3], not {shape}")
        ft.setdefault("names", ["height", "width", "channels"])
    elif len(shape) != 1:
        raise ValueError(f"feature {key!r}: only 1-D numeric features are written, not {shape}")
    return {"dtype": ft["dtype"], "shape": shape, "names": ft.get("names")} | (
        {"info": ft["info"]} if "info" in ft else {}
    )


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    # lerobot 0.3.x writes these with the jsonlines package: json.dumps defaults, UTF-8.
    with atomic_path(path) as tmp:
        tmp.write_text(
            "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8"
        )

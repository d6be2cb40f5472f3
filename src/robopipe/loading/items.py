"""Build LeRobotDataset-shaped items from an episode's rows and its video frames.

An item (lerobot 0.6.1 ``DatasetReader.get_item``, ``dataset_reader.py:312-354``) holds every
data column at the item's row (features of shape [1] as 0-d tensors), ``task`` (the string),
and per camera ``observation.images.<cam>`` (C, H, W) uint8, or float32 in [0, 1]. A key with
``delta_timestamps`` holds its window instead, (T, ...), plus ``<key>_is_pad`` (T,) bool. The
video time of a row is the episode's ``videos/<cam>/from_timestamp`` plus the row's
``timestamp``; a window's rows are clamped to the episode first.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
from fsspec.implementations.local import LocalFileSystem

from robopipe import retry
from robopipe.formats.v30_reader import DatasetMeta, open_file, read_meta
from robopipe.layout import DEFAULT_TOLERANCE_S
from robopipe.loading.decoder import Counters, DecoderCache
from robopipe.loading.stored_frames import StoredFrames
from robopipe.loading.windows import check_delta_timestamps, delta_indices, window_rows

IMAGE_DTYPES = ("uint8", "float32")
DECODE_DEVICES = ("cpu", "cuda")


class ItemReader:
    """Turns (episode, row in episode) into an item; shared by the map-style and streaming
    datasets.

    Args:
        meta: the dataset's metadata.
        delta_timestamps: key -> offsets in seconds, or None.
        image_dtype: ``"uint8"`` or ``"float32"`` (divided by 255, like lerobot's default).
        decode_device: ``"cpu"`` or ``"cuda"``.
        tolerance_s: max |pts - timestamp| of a decoded frame (lerobot's default 1e-4 s).
        decoder_cache_size: decoders kept per process.
        seek_mode: torchcodec seek mode, ``"approximate"`` or ``"exact"``.

    Raises:
        ValueError: bad image_dtype, decode_device, or delta_timestamps (unknown key, not a
            multiple of 1/fps).
    """

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        name: str | None = None,
        storage_options: dict | None = None,
        retry_budget: retry.RetryBudget = retry.DEFAULT_BUDGET,
        **options,
    ) -> ItemReader:
        """Read the v3.0 metadata at ``url`` (``robopipe.formats.v30_reader.read_meta``; every
        remote read retried within ``retry_budget``) and build a reader over it; ``options``
        are this class's keyword arguments."""
        meta = read_meta(url, name=name, storage_options=storage_options, retry_budget=retry_budget)
        return cls(meta, **options)

    def __init__(
        self,
        meta: DatasetMeta,
        *,
        delta_timestamps: dict[str, list[float]] | None = None,
        image_dtype: str = "uint8",
        decode_device: str = "cpu",
        tolerance_s: float = DEFAULT_TOLERANCE_S,
        decoder_cache_size: int = 16,
        seek_mode: str = "approximate",
    ) -> None:
        if image_dtype not in IMAGE_DTYPES:
            raise ValueError(f"image_dtype must be one of {IMAGE_DTYPES}, got {image_dtype!r}")
        if decode_device not in DECODE_DEVICES:
            raise ValueError(f"decode_device must be one of {DECODE_DEVICES}")
        delta_timestamps = dict(delta_timestamps or {})
        unknown = set(delta_timestamps) - set(meta.camera_keys) - set(meta.data_keys)
        if unknown:
            raise ValueError(f"delta_timestamps keys {sorted(unknown)} are not dataset features")
        check_delta_timestamps(delta_timestamps, meta.fps, tolerance_s)
        self.meta = meta
        self.offsets = delta_indices(delta_timestamps, meta.fps)
        self.image_dtype = image_dtype
        self.tolerance_s = tolerance_s
        self.counters = Counters()
        self.decoders = DecoderCache(
            self._open_video, decoder_cache_size, decode_device, seek_mode, self.counters
        )
        self.stored = StoredFrames(meta) if meta.stored_frame_keys else None
        self._pool: ThreadPoolExecutor | None = None
        self._pool_pid: int | None = None

    def __getstate__(self):
        state = self.__dict__.copy()
        state.update(_pool=None, _pool_pid=None)
        return state

    def _open_video(self, relative: str):
        path = self.meta.path(relative)
        if isinstance(self.meta.fs, LocalFileSystem):
            return path
        budget = self.meta.retry_budget
        return open_file(self.meta.fs, path, budget, block_size=1 << 20, cache_type="readahead")

    def item(self, episode: int, rows: dict[str, np.ndarray], position: int) -> dict:
        """The item at row ``position`` of ``episode``, whose data columns are ``rows``."""
        start = time.perf_counter()
        length = len(rows["index"])
        item = {key: torch.from_numpy(np.array(rows[key][position])) for key in rows}
        video_rows = {}
        for key, offsets in self.offsets.items():
            window, is_pad = window_rows(position, length, offsets)
            item[f"{key}_is_pad"] = torch.from_numpy(is_pad)
            if key in self.meta.camera_keys:
                video_rows[key] = window
            else:
                item[key] = torch.from_numpy(rows[key][window])
        item["task"] = self.meta.tasks[int(rows["task_index"][position])]
        fetch_s = time.perf_counter() - start
        frames = self._decode_cameras(episode, rows, video_rows, position)
        for cam, data in frames.items():
            data = data if cam in self.offsets else data[0]
            item[cam] = data if self.image_dtype == "uint8" else data.float() / 255
        self.counters.add(fetch_s=fetch_s, samples=1)
        return item

    def _decode_cameras(self, episode, rows, video_rows, position) -> dict[str, torch.Tensor]:
        frames = {}
        for cam in self.meta.stored_frame_keys:
            start = time.perf_counter()
            positions = video_rows.get(cam, np.array([position]))
            frames[cam] = self.stored.read(cam, episode, positions)
            self.counters.add(decode_s=time.perf_counter() - start, frames=len(positions))
        return {**frames, **self._decode_videos(episode, rows, video_rows, position)}

    def video_requests(
        self, episode: int, rows: dict[str, np.ndarray], position: int, video_rows=None
    ) -> dict[str, tuple[str, np.ndarray]]:
        """Per video camera, (relative mp4 path, (T,) float64 seconds in that file) of the
        frames the item at row ``position`` of ``episode`` shows (its window's, clamped)."""
        if video_rows is None:
            length = len(rows["index"])
            video_rows = {
                key: window_rows(position, length, offsets)[0]
                for key, offsets in self.offsets.items()
                if key in self.meta.video_keys
            }
        jobs = {}
        for cam in self.meta.video_keys:
            ts = rows["timestamp"][video_rows.get(cam, np.array([position]))].astype(np.float64)
            start = self.meta.episodes[f"videos/{cam}/from_timestamp"][episode]
            jobs[cam] = (self.meta.video_file(cam, episode), start + ts)
        return jobs

    def _decode_videos(self, episode, rows, video_rows, position) -> dict[str, torch.Tensor]:
        jobs = self.video_requests(episode, rows, position, video_rows)
        if not jobs:  # a dataset without video cameras
            return {}
        if len(jobs) == 1:
            ((cam, (path, ts)),) = jobs.items()
            return {cam: self._decode(path, ts, episode)}
        pool = self._thread_pool()
        futures = {cam: pool.submit(self._decode, p, ts, episode) for cam, (p, ts) in jobs.items()}
        return {cam: f.result() for cam, f in futures.items()}

    def _decode(self, relative: str, timestamps: np.ndarray, episode: int) -> torch.Tensor:
        return self.decoders.decode(relative, timestamps, self.tolerance_s, self.meta.name, episode)

    def _thread_pool(self) -> ThreadPoolExecutor:
        """One pool per process (created lazily, so a forked worker makes its own)."""
        if self._pool_pid != os.getpid():
            self._pool = ThreadPoolExecutor(max_workers=len(self.meta.video_keys))
            self._pool_pid = os.getpid()
        return self._pool

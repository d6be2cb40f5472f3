"""Video decoding: a per-process LRU cache of torchcodec decoders, and shared counters.

Frame lookup follows lerobot 0.6.1 ``decode_video_frames_torchcodec`` (``video_utils.py:349``):
frame index = ``round(ts * average_fps)``, ``get_frames_at(indices)``, then every decoded
frame's pts must be within ``tolerance_s`` of its query timestamp.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
import time
from collections import OrderedDict

import numpy as np
import torch
from torchcodec.decoders import VideoDecoder

from robopipe.errors import DatasetError

COUNTER_FIELDS = (
    "hits",
    "misses",
    "evictions",
    "fetch_s",
    "decode_s",
    "wait_s",
    "frames",
    "samples",
    "cpu_fallback",
)
FIELD_INDEX = {field: i for i, field in enumerate(COUNTER_FIELDS)}
MAX_SLOTS = 65  # the main process + up to 64 DataLoader workers
_RESET_LOCK = threading.Lock()


class Counters:
    """Loader counters shared by the main process and its DataLoader workers.

    One row per process (slot 0 = main process, slot w+1 = DataLoader worker w), so each row
    has one writer and needs no lock; ``totals()`` sums the rows. Held in shared memory
    (``multiprocessing.RawArray``), it survives fork and is inherited by spawned workers.
    Fields: ``COUNTER_FIELDS`` (seconds are wall-clock seconds summed over threads;
    ``wait_s``: seconds a loader waited on the network for bytes it needed).
    """

    def __init__(self) -> None:
        self._array = mp.RawArray("d", MAX_SLOTS * len(COUNTER_FIELDS))
        self._local: tuple[int, threading.Lock, int] | None = None

    def __getstate__(self):
        return {"_array": self._array, "_local": None}

    def add(self, **values: float) -> None:
        """Add each value to its field (``COUNTER_FIELDS``) of this process's row
        (thread-safe within the process), e.g. ``add(decode_s=0.002, frames=1)``."""
        if self._local is None or self._local[0] != os.getpid():  # a new process
            info = torch.utils.data.get_worker_info()
            slot = 0 if info is None else info.id + 1
            self._local = (os.getpid(), threading.Lock(), slot * len(COUNTER_FIELDS))
        _, lock, row = self._local
        with lock:
            for field, value in values.items():
                self._array[row + FIELD_INDEX[field]] += value

    def totals(self) -> dict[str, float]:
        """Every field summed over all processes."""
        rows = np.frombuffer(self._array, dtype=np.float64).reshape(MAX_SLOTS, -1)
        return dict(zip(COUNTER_FIELDS, rows.sum(axis=0).tolist(), strict=True))


class DecoderCache:
    """LRU cache of torchcodec ``VideoDecoder`` objects keyed by file path, one per process.

    Like lerobot 0.6.1's ``VideoDecoderCache`` (``video_utils.py``) it closes the file handle
    of an evicted decoder; unlike it, it counts hits, misses and evictions (in ``counters``)
    and is rebuilt empty in a forked or spawned worker (decoders cannot cross processes).

    Args:
        open_file: callable path -> source for ``VideoDecoder`` (a local path string or a
            binary file object); file objects are closed on eviction.
        max_size: decoders kept per process.
        device: ``"cpu"`` or ``"cuda"`` (NVDEC; frames come back on the GPU).
        seek_mode: torchcodec's ``"approximate"`` (trust the header's fps, no scan on open)
            or ``"exact"`` (scan every packet on open).
    """

    def __init__(self, open_file, max_size: int, device: str, seek_mode: str, counters: Counters):
        self.open_file = open_file
        self.max_size = max_size
        self.device = device
        self.seek_mode = seek_mode
        self.counters = counters
        self.cpu_fallback: bool | None = None
        self._pid = None
        self._lock = threading.Lock()
        self._decoders: OrderedDict[str, tuple[VideoDecoder, object]] = OrderedDict()

    def __getstate__(self):
        state = self.__dict__.copy()
        state.update(_decoders=OrderedDict(), _pid=None, _lock=None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def get(self, path: str) -> VideoDecoder:
        """The decoder of ``path``, opened on a miss (evicting the least recently used)."""
        if self._pid != os.getpid():  # a forked or spawned worker starts empty
            with _RESET_LOCK:
                if self._pid != os.getpid():
                    self._decoders = OrderedDict()
                    self._lock = threading.Lock()
                    self._pid = os.getpid()
        with self._lock:
            if path in self._decoders:
                self._decoders.move_to_end(path)
                self.counters.add(hits=1)
                return self._decoders[path][0]
            self.counters.add(misses=1)
            source = self.open_file(path)
            decoder = VideoDecoder(
                source, device=self.device, seek_mode=self.seek_mode, num_ffmpeg_threads=1
            )
            self._decoders[path] = (decoder, source)
            while len(self._decoders) > self.max_size:
                _, (_, old_source) = self._decoders.popitem(last=False)
                if hasattr(old_source, "close"):
                    old_source.close()
                self.counters.add(evictions=1)
            return decoder

    def decode(
        self, path: str, timestamps: np.ndarray, tolerance_s: float, dataset: str, episode: int
    ) -> torch.Tensor:
        """Frames at ``timestamps`` (seconds from the start of the file), (T, C, H, W) uint8.

        Raises:
            DatasetError: a timestamp beyond the last frame, or a decoded frame whose pts
                differs from its timestamp by ``tolerance_s`` or more (lerobot's
                ``FrameTimestampError``).
        """
        start = time.perf_counter()
        decoder = self.get(path)
        fps = decoder.metadata.average_fps
        indices = [round(float(t) * fps) for t in timestamps]
        if max(indices) >= len(decoder) or min(indices) < 0:
            raise DatasetError(
                dataset,
                f"timestamps {list(map(float, timestamps))} s reach frame {max(indices)} but "
                f"the file has {len(decoder)} frames",
                episode=episode,
                file=path,
            )
        batch = decoder.get_frames_at(indices)
        error = np.abs(batch.pts_seconds.numpy() - np.asarray(timestamps, dtype=np.float64))
        if (error >= tolerance_s).any():
            worst = int(error.argmax())
            raise DatasetError(
                dataset,
                f"frame at timestamp {float(timestamps[worst]):.6f} s has pts "
                f"{float(batch.pts_seconds[worst]):.6f} s, {float(error[worst]):.6f} s away "
                f">= tolerance_s {tolerance_s} (timestamp column and video disagree)",
                episode=episode,
                file=path,
            )
        if self.device != "cpu" and self.cpu_fallback is None:
            self.cpu_fallback = bool(decoder.cpu_fallback)
            self.counters.add(cpu_fallback=float(self.cpu_fallback))
        self.counters.add(decode_s=time.perf_counter() - start, frames=len(indices))
        return batch.data

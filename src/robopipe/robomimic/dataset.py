"""A map-style loader reading a robomimic HDF5 file directly, with robomimic's cache modes,
giving LeRobot-style items (robomimic's own items: :mod:`robopipe.robomimic.sequence`).

It mirrors robomimic's ``SequenceDataset`` (``robomimic/utils/dataset.py``):

- ``hdf5_cache_mode``: ``none`` reads every item from the file; ``low_dim`` holds the
  non-image data (low-dimensional observations, actions, rewards, dones) in RAM and reads
  images from the file; ``all`` holds everything in RAM. (robomimic 0.3.0's ``all`` also
  stores every item, a ``seq_length`` window per index, images uint8; here the arrays are
  held once, uint8, and ``image_dtype="float32"`` converts per item.)
- ``seq_length``: an item at step ``t`` holds steps ``t .. t+seq_length-1`` of every feature;
  steps past the demo's end repeat its last step (``pad_seq_length=True``), so there is one
  item per step.

Items have the keys, dtypes and shapes of the v3.0 loaders (``robopipe.loading``): every
feature of :class:`~robopipe.robomimic.hdf5.RobomimicFile` (``observation.state``,
``action``, ``next.reward``, ``next.done``, cameras ``observation.images.<key>`` (C, H, W)
uint8 or float32 in [0, 1]), ``timestamp`` (float32 ``step / fps``), ``frame_index``,
``episode_index``, ``index``, ``task_index`` (int64) and ``task``. A windowed key holds
(T, ...) plus ``<key>_is_pad`` (T,) bool, exactly like a v3.0 loader given the same
``delta_timestamps`` (``seq_length`` is ``delta_timestamps`` ``[0, 1/fps, ...]`` on every
feature; negative deltas pad at the start, like robomimic's ``frame_stack``).
"""

from __future__ import annotations

import os
from pathlib import Path

import h5py
import numpy as np
import torch
import torch.utils.data

from robopipe.layout import DEFAULT_TOLERANCE_S
from robopipe.loading.windows import check_delta_timestamps, delta_indices, window_rows
from robopipe.robomimic.hdf5 import RobomimicFile, Source

CACHE_MODES = ("none", "low_dim", "all")
IMAGE_DTYPES = ("uint8", "float32")


def seq_length_delta_timestamps(keys: list[str], seq_length: int, fps: int) -> dict | None:
    """robomimic's ``seq_length`` window as ``delta_timestamps``: every key at
    ``[0, 1/fps, ..., (seq_length-1)/fps]`` seconds; None for ``seq_length == 1``.

    Raises:
        ValueError: ``seq_length < 1``.
    """
    if seq_length < 1:
        raise ValueError(f"seq_length must be >= 1, not {seq_length}")
    if seq_length == 1:
        return None
    return {key: [i / fps for i in range(seq_length)] for key in keys}


class RobomimicDataset(torch.utils.data.Dataset):
    """A robomimic HDF5 file as a ``torch.utils.data.Dataset``; item ``i`` is global step ``i``
    (demos in numeric order, as the converter numbers episodes).

    Args:
        path: the HDF5 file.
        cache_mode: ``"none"``, ``"low_dim"`` or ``"all"`` (robomimic's ``hdf5_cache_mode``).
        seq_length: robomimic's window length (>= 1); exclusive with ``delta_timestamps``.
        delta_timestamps: feature -> offsets in seconds (multiples of 1/fps), as the v3.0
            loaders take them.
        name, state, task, fps: see :class:`~robopipe.robomimic.hdf5.RobomimicFile`.
        image_dtype: ``"uint8"`` or ``"float32"`` (divided by 255).
        tolerance_s: tolerance of the delta_timestamps check, seconds.

    DataLoader workers each open the file once (lazily, after fork or spawn); cached arrays
    are loaded in the constructor and shared with forked workers.

    Raises:
        ValueError: unknown cache_mode or image_dtype, both seq_length > 1 and
            delta_timestamps, a delta_timestamps key that is not a feature or a delta that is
            not a multiple of 1/fps.
        DatasetError: see :class:`~robopipe.robomimic.hdf5.RobomimicFile`.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        cache_mode: str = "low_dim",
        seq_length: int = 1,
        delta_timestamps: dict[str, list[float]] | None = None,
        name: str | None = None,
        state: str = "concat",
        task: str | None = None,
        fps: int | None = None,
        image_dtype: str = "uint8",
        tolerance_s: float = DEFAULT_TOLERANCE_S,
    ) -> None:
        if cache_mode not in CACHE_MODES:
            raise ValueError(f"cache_mode must be one of {CACHE_MODES}, not {cache_mode!r}")
        if image_dtype not in IMAGE_DTYPES:
            raise ValueError(f"image_dtype must be one of {IMAGE_DTYPES}, not {image_dtype!r}")
        self.file = RobomimicFile(path, name=name, state=state, task=task, fps=fps)
        self.cache_mode = cache_mode
        self.image_dtype = image_dtype
        features = [s.feature for s in self.file.sources]
        if seq_length > 1 and delta_timestamps:
            raise ValueError("give seq_length or delta_timestamps, not both")
        delta_timestamps = delta_timestamps or seq_length_delta_timestamps(
            features, seq_length, self.file.fps
        )
        unknown = set(delta_timestamps or {}) - set(features)
        if unknown:
            raise ValueError(f"delta_timestamps keys {sorted(unknown)} are not features")
        check_delta_timestamps(delta_timestamps or {}, self.file.fps, tolerance_s)
        self.offsets = delta_indices(delta_timestamps or {}, self.file.fps)
        self.starts = np.concatenate([[0], np.cumsum(self.file.lengths)])
        self.cache = self._load_cache()
        self._h5: h5py.File | None = None
        self._h5_pid: int | None = None

    def _cached(self, source: Source) -> bool:
        images = source.dtype == "uint8"
        return self.cache_mode == "all" or (self.cache_mode == "low_dim" and not images)

    def _load_cache(self) -> dict[str, list[np.ndarray]]:
        """feature -> one array per demo, for the features this cache mode holds in RAM."""
        cached = [s for s in self.file.sources if self._cached(s)]
        cache = {s.feature: [] for s in cached}
        with h5py.File(self.file.path, "r") as h5:
            for demo in self.file.demos:
                group = h5["data"][demo]
                for source in cached:
                    cache[source.feature].append(source.read(group))
        return cache

    def __getstate__(self):
        return {**self.__dict__, "_h5": None, "_h5_pid": None}

    def _group(self, episode: int) -> h5py.Group:
        """The episode's demo group in this process's open file."""
        if self._h5_pid != os.getpid():
            self._h5 = h5py.File(self.file.path, "r")
            self._h5_pid = os.getpid()
        return self._h5["data"][self.file.demos[episode]]

    def __len__(self) -> int:
        return int(self.starts[-1])

    def __getitem__(self, index: int) -> dict:
        if not 0 <= index < len(self):
            raise IndexError(f"step index {index} outside [0, {len(self)})")
        episode = int(np.searchsorted(self.starts, index, side="right") - 1)
        step = int(index - self.starts[episode])
        length = int(self.file.lengths[episode])
        item = {}
        for source in self.file.sources:
            key = source.feature
            if key in self.offsets:
                rows, is_pad = window_rows(step, length, self.offsets[key])
                item[f"{key}_is_pad"] = torch.from_numpy(is_pad)
            else:
                rows = np.array([step])
            data = torch.from_numpy(self._read(source, episode, rows))
            data = data if key in self.offsets else data[0]
            if source.dtype == "uint8":
                data = data.movedim(-1, -3)  # (..., H, W, C) -> (..., C, H, W)
                data = data if self.image_dtype == "uint8" else data.float() / 255
            item[key] = data
        item.update(
            timestamp=torch.tensor(step / self.file.fps, dtype=torch.float32),
            frame_index=torch.tensor(step, dtype=torch.int64),
            episode_index=torch.tensor(episode, dtype=torch.int64),
            index=torch.tensor(index, dtype=torch.int64),
            task_index=torch.tensor(0, dtype=torch.int64),
            task=self.file.task,
        )
        return item

    def _read(self, source: Source, episode: int, rows: np.ndarray) -> np.ndarray:
        """The feature's values at ``rows`` (episode rows, any order, repeats allowed)."""
        if source.feature in self.cache:
            return self.cache[source.feature][episode][rows]
        lo, hi = int(rows.min()), int(rows.max()) + 1
        return np.ascontiguousarray(source.read(self._group(episode), slice(lo, hi))[rows - lo])

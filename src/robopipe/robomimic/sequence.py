"""A drop-in, faster replacement for robomimic 0.3.0's ``SequenceDataset``.

Same constructor arguments, same items (source: robomimic ``robomimic/utils/dataset.py``,
v0.3.0), so robomimic training code can swap it in::

    from robopipe.robomimic import SequenceDataset   # instead of robomimic.utils.dataset

An item is a dict of numpy arrays, T = ``frame_stack - 1 + seq_length`` steps::

    {<dataset key>: (T, ...),  "pad_mask": (T, 1) bool if get_pad_mask,
     "obs": {<obs key>: (T, ...), "pad_mask": (T, 1) bool if get_pad_mask},
     "next_obs": {...} if load_next_obs, "goal_obs": {<obs key>: (...)} if goal_mode="last"}

as robomimic gives it: images (H, W, C) uint8 as stored; observations in the file's dtype;
dataset keys float32 in the ``low_dim`` and ``all`` modes (a key absent from a demo is
zeros (T, 1)) and in the file's dtype in mode ``None``; ``pad_mask`` True where the step is
real, False where it repeats the demo's first step (frame stacking) or last step (sequence
padding). Items are numbered as robomimic numbers them: demos sorted by number, one item per
step, minus ``frame_stack - 1`` per demo without ``pad_frame_stack`` and ``seq_length - 1``
without ``pad_seq_length``.

How it differs, all in speed and memory, never in values:

- cached data is held as one contiguous array per key (all demos concatenated), and a window
  is one numpy gather of clipped row numbers, padding included;
- mode ``all`` holds the file's arrays once; robomimic also stores every item's window
  (``seq_length`` copies of every image at ``seq_length`` > 1);
- mode ``None`` (and images in ``low_dim``) read one contiguous slice per key from dataset
  handles opened once per process; only the requested keys are read;
- ``__getitems__`` (the DataLoader's batched fetch) gathers a whole batch per key at once
  and hands ``default_collate`` torch tensors, which it stacks faster than numpy arrays;
- a worker's batch carries its small tensors inside its pickle (``robopipe.transport``), not
  one shared-memory file descriptor per key, which capped the main process (robomimic's too).

Image keys (uint8 with a per-step shape of 3 dimensions) are what robomimic's ``low_dim`` mode
leaves on disk; robomimic learns this from its observation-modality registry, this class
from the file. ``hdf5_normalize_obs`` computes robomimic's statistics (its parallel
mean/variance over demos, float32, std + 1e-3) and subtracts/divides them on every
normalized step (robomimic 0.3.0 itself only manages ``T == 1`` without ``get_pad_mask``);
image keys cannot be normalized (robomimic computes their statistics in C, H, W layout).
"""

from __future__ import annotations

import os
from pathlib import Path

import h5py
import numpy as np
import torch
import torch.utils.data

from robopipe.errors import DatasetError
from robopipe.robomimic.images import downscale, is_image
from robopipe.transport import InlineTensors

CACHE_MODES = (None, "none", "low_dim", "all")


class SequenceDataset(torch.utils.data.Dataset):
    """robomimic 0.3.0's ``SequenceDataset``, argument for argument (see the module docstring).

    Args:
        hdf5_path: the robomimic HDF5 file (``~`` expanded).
        obs_keys: observation keys, read from ``data/demo_N/obs/<key>`` (and ``next_obs``).
        dataset_keys: demo datasets such as ``actions``, ``rewards``, ``dones``.
        frame_stack: steps before (and including) the item's step, >= 1.
        seq_length: steps from the item's step on, >= 1.
        pad_frame_stack: give items at the first ``frame_stack - 1`` steps of a demo,
            padded by repeating step 0.
        pad_seq_length: give items at the last ``seq_length - 1`` steps, padded by repeating
            the demo's last step.
        get_pad_mask: add ``pad_mask`` (T, 1) bool, True = real step.
        goal_mode: None or ``"last"`` (``goal_obs``: ``next_obs`` at the demo's last item
            step; needs ``load_next_obs``).
        hdf5_cache_mode: None (or ``"none"``), ``"low_dim"`` or ``"all"``.
        hdf5_use_swmr: open the file in SWMR read mode, as robomimic does.
        hdf5_normalize_obs: normalize observations (see :meth:`get_obs_normalization_stats`).
        filter_by_attribute: a ``mask/<name>`` list of demos to use (e.g. ``train``).
        load_next_obs: add ``next_obs`` (read from ``data/demo_N/next_obs``).
        image_size: not robomimic's: (height, width) to downscale image observations to, as
            they are read or cached (:func:`robopipe.robomimic.images.downscale`), or None.

    Attributes (as robomimic's): ``demos`` (sorted demo names), ``n_demos``,
    ``total_num_sequences``, the arguments; and ``item_demos``, int64 (len(self),): the demo
    (position in ``demos``) of every item.

    Raises:
        ValueError: bad argument values (as robomimic's asserts), or ``hdf5_normalize_obs``
            with an image key.
        DatasetError: the file cannot be opened, has no such mask, a demo lacks a requested
            key (an observation, a ``next_obs`` when ``load_next_obs``, a dataset key in mode
            None), or a demo is too short for unpadded windows.
    """

    def __init__(
        self,
        hdf5_path,
        obs_keys,
        dataset_keys,
        frame_stack=1,
        seq_length=1,
        pad_frame_stack=True,
        pad_seq_length=True,
        get_pad_mask=False,
        goal_mode=None,
        hdf5_cache_mode=None,
        hdf5_use_swmr=True,
        hdf5_normalize_obs=False,
        filter_by_attribute=None,
        load_next_obs=True,
        *,
        image_size=None,
    ):
        super().__init__()
        if hdf5_cache_mode not in CACHE_MODES:
            raise ValueError(f"hdf5_cache_mode must be one of {CACHE_MODES}")
        if frame_stack < 1 or seq_length < 1:
            raise ValueError("frame_stack and seq_length must be >= 1")
        if goal_mode not in (None, "last"):
            raise ValueError(f"goal_mode must be None or 'last', not {goal_mode!r}")
        if goal_mode == "last" and not load_next_obs:
            raise ValueError("goal_mode='last' takes the goal from next_obs: load_next_obs")
        self.hdf5_path = os.path.expanduser(str(hdf5_path))
        self.hdf5_use_swmr = hdf5_use_swmr
        self.hdf5_cache_mode = None if hdf5_cache_mode == "none" else hdf5_cache_mode
        self.hdf5_normalize_obs = hdf5_normalize_obs
        self.filter_by_attribute = filter_by_attribute
        self.load_next_obs = load_next_obs
        self.obs_keys = tuple(obs_keys)
        self.dataset_keys = tuple(dataset_keys)
        self.n_frame_stack = frame_stack
        self.seq_length = seq_length
        self.pad_frame_stack = pad_frame_stack
        self.pad_seq_length = pad_seq_length
        self.get_pad_mask = get_pad_mask
        self.goal_mode = goal_mode
        self.image_size = None if image_size is None else tuple(image_size)
        self._h5: h5py.File | None = None
        self._h5_pid: int | None = None
        self._handles: dict[tuple[int, str], h5py.Dataset] = {}
        self._name = Path(self.hdf5_path).name
        with self._open() as h5:
            self._index(h5)
            self.image_keys = tuple(k for k in self.obs_keys if self._is_image(h5, k))
            self.obs_normalization_stats = self._normalization_stats(h5)
            self._cache = self._load_cache(h5)

    # -- construction ---------------------------------------------------------------------

    def _error(self, message: str, episode: int | None = None) -> DatasetError:
        return DatasetError(self._name, message, episode=episode, file=self.hdf5_path)

    def _open(self) -> h5py.File:
        try:
            return h5py.File(self.hdf5_path, "r", swmr=self.hdf5_use_swmr, libver="latest")
        except OSError as exc:
            raise self._error(f"cannot open HDF5 file: {exc}; check the path") from None

    def _index(self, h5: h5py.File) -> None:
        """demos, their lengths, and each item's demo and first window step."""
        if self.filter_by_attribute is not None:
            mask = f"mask/{self.filter_by_attribute}"
            if mask not in h5:
                raise self._error(f"no {mask} list; filter_by_attribute names a mask")
            demos = [d.decode("utf-8") for d in np.array(h5[mask][:])]
        else:
            demos = list(h5["data"].keys())
        self.demos = sorted(demos, key=lambda d: int(d[5:]))
        self.n_demos = len(self.demos)
        self._lengths = np.array(
            [int(h5[f"data/{d}"].attrs["num_samples"]) for d in self.demos], dtype=np.int64
        )
        self._offsets = np.concatenate([[0], np.cumsum(self._lengths)[:-1]]).astype(np.int64)
        counts, first, self._window, self._goal_step = demo_windows(
            self._lengths, self.n_frame_stack, self.seq_length, self.pad_frame_stack,
            self.pad_seq_length,
        )  # fmt: skip
        if (counts < 1).any():
            short = int(np.argmax(counts < 1))
            raise self._error(
                f"{self.demos[short]} has {self._lengths[short]} steps, fewer than "
                f"frame_stack - 1 + seq_length unpadded; pad or shorten the windows",
                episode=short,
            )
        self.item_demos = np.repeat(np.arange(self.n_demos), counts)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        self._item_step = np.arange(len(self.item_demos)) - starts[self.item_demos] + first
        self.total_num_sequences = len(self.item_demos)
        for path in self._paths():
            for episode, demo in enumerate(self.demos):
                if path not in h5[f"data/{demo}"] and not self._zeros_allowed(path):
                    raise self._error(f"data/{demo} has no {path}; request keys it has", episode)

    def _paths(self) -> list[str]:
        """Every HDF5 path (relative to a demo) an item needs."""
        prefixes = ("obs", "next_obs") if self.load_next_obs else ("obs",)
        return [f"{p}/{k}" for p in prefixes for k in self.obs_keys] + list(self.dataset_keys)

    def _zeros_allowed(self, path: str) -> bool:
        """robomimic's caches give zeros for a missing dataset key; mode None fails on it."""
        return path in self.dataset_keys and self.hdf5_cache_mode is not None

    def _is_image(self, h5: h5py.File, key: str) -> bool:
        dataset = h5[f"data/{self.demos[0]}/obs/{key}"]
        return is_image(dataset.dtype, dataset.shape[1:])

    def _cached(self, path: str) -> bool:
        if self.hdf5_cache_mode == "all":
            return True
        return self.hdf5_cache_mode == "low_dim" and path.split("/")[-1] not in self.image_keys

    def _load_cache(self, h5: h5py.File) -> dict[str, np.ndarray]:
        """path -> (total steps, ...) array of all demos, for the paths held in RAM; dataset
        keys float32 (robomimic's cache casts them), normalized observations normalized."""
        cache = {}
        total = int(self._lengths.sum())
        for path in filter(self._cached, self._paths()):
            first = h5[f"data/{self.demos[0]}"].get(path)
            if first is None:  # a missing dataset key: robomimic caches zeros (T, 1)
                cache[path] = np.zeros((total, 1), np.float32)
                continue
            dtype = np.float32 if path in self.dataset_keys else first.dtype
            out = np.empty((total, *first.shape[1:]), dtype)
            for demo, offset, length in zip(self.demos, self._offsets, self._lengths, strict=True):
                source = h5[f"data/{demo}/{path}"]
                if source.dtype == dtype:
                    source.read_direct(out, np.s_[:length], np.s_[offset : offset + length])
                else:
                    out[offset : offset + length] = source[:length]
            cache[path] = self._prepared(path, out)
        return cache

    def _normalization_stats(self, h5: h5py.File) -> dict | None:
        """robomimic's ``normalize_obs``: per key float32 mean and std (+1e-3), shape (1, ...),
        aggregated demo by demo with the parallel variance algorithm, as robomimic does."""
        if not self.hdf5_normalize_obs:
            return None
        if self.image_keys:
            raise ValueError(f"cannot normalize image observations {list(self.image_keys)}")
        merged = None
        for demo in self.demos:
            stats = {}
            for key in self.obs_keys:
                x = h5[f"data/{demo}/obs/{key}"][()].astype("float32")
                mean = x.mean(axis=0, keepdims=True)
                stats[key] = (x.shape[0], mean, ((x - mean) ** 2).sum(axis=0, keepdims=True))
            merged = stats if merged is None else {k: _merge(merged[k], stats[k]) for k in stats}
        return {k: {"mean": m, "std": np.sqrt(s / n) + 1e-3} for k, (n, m, s) in merged.items()}

    def _prepared(self, path: str, values: np.ndarray) -> np.ndarray:
        """``values`` of ``path`` (steps first) as items give them: normalized, downscaled."""
        if self.image_size is not None and path.split("/")[-1] in self.image_keys:
            return downscale(values, self.image_size)
        if self.obs_normalization_stats is None or path in self.dataset_keys:
            return values
        stats = self.obs_normalization_stats[path.split("/")[1]]
        return (values - stats["mean"]) / stats["std"]

    def get_obs_normalization_stats(self) -> dict:
        """Observation key -> ``{"mean", "std"}`` float32 arrays of shape (1, ...), as
        robomimic's; a copy.

        Raises:
            ValueError: the dataset was made without ``hdf5_normalize_obs``.
        """
        if not self.hdf5_normalize_obs:
            raise ValueError("not using observation normalization (hdf5_normalize_obs=False)")
        stats = self.obs_normalization_stats
        return {key: {s: v.copy() for s, v in d.items()} for key, d in stats.items()}

    def get_dataset_sampler(self):
        """None, as robomimic's (the DataLoader samples uniformly)."""
        return None

    # -- items ---------------------------------------------------------------------------

    def __len__(self) -> int:
        return self.total_num_sequences

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(path={self.hdf5_path}, obs_keys={self.obs_keys}, "
            f"seq_length={self.seq_length}, filter_key={self.filter_by_attribute}, "
            f"frame_stack={self.n_frame_stack}, cache_mode={self.hdf5_cache_mode}, "
            f"num_demos={self.n_demos}, num_sequences={self.total_num_sequences})"
        )

    def __getstate__(self):
        return {**self.__dict__, "_h5": None, "_h5_pid": None, "_handles": {}}

    def __getitem__(self, index: int) -> dict:
        """Item ``index``: robomimic's dict of numpy arrays (see the module docstring).

        Raises:
            IndexError: ``index`` outside ``[0, len(self))``.
        """
        return self._items([index], torch_views=False)[0]

    def __getitems__(self, indices) -> list[dict]:
        """Items ``indices`` (the DataLoader's batched fetch): cached keys are gathered for the
        whole batch at once, and values are torch tensors (views of one batch tensor per key),
        which ``default_collate`` stacks several times faster than numpy arrays; the collated
        batch is the same as from :meth:`__getitem__`'s numpy items. In a DataLoader worker
        the items are :class:`~robopipe.transport.InlineTensors`, so the batch's small tensors
        reach the main process inside its pickle (a plain dict there).

        Raises:
            IndexError: an index outside ``[0, len(self))``.
        """
        in_worker = torch.utils.data.get_worker_info() is not None
        return self._items(
            indices, torch_views=True, item_type=InlineTensors if in_worker else dict
        )

    def _items(self, indices, torch_views: bool, item_type: type = dict) -> list[dict]:
        indices = np.asarray(indices, dtype=np.int64)
        if len(indices) and not (indices.min() >= 0 and indices.max() < len(self)):
            raise IndexError(f"item index outside [0, {len(self)})")
        demo = self.item_demos[indices]
        return window_items(
            lambda path, rows: self._rows(path, demo, rows),
            self._item_step[indices],
            self._window,
            self._lengths[demo],
            self._goal_step[demo],
            obs_keys=self.obs_keys,
            dataset_keys=self.dataset_keys,
            get_pad_mask=self.get_pad_mask,
            goal_mode=self.goal_mode,
            load_next_obs=self.load_next_obs,
            torch_views=torch_views,
            item_type=item_type,
        )

    def _rows(self, path: str, demo: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """(B, T, ...) values of ``path`` at demo ``demo[b]``'s ``rows[b]`` (clipped rows)."""
        cached = self._cache.get(path)
        if cached is not None:
            return cached[self._offsets[demo, None] + rows]
        out = []
        for d, r in zip(demo, rows, strict=True):
            lo, hi = int(r[0]), int(r[-1]) + 1
            window = self._dataset(int(d), path)[lo:hi]
            out.append(self._prepared(path, window if hi - lo == len(r) else window[r - lo]))
        return np.stack(out)

    def _dataset(self, demo: int, path: str) -> h5py.Dataset:
        """The open dataset ``data/<demo>/<path>`` in this process (reopened after a fork)."""
        if self._h5_pid != os.getpid():
            self._h5, self._h5_pid, self._handles = self._open(), os.getpid(), {}
        handle = self._handles.get((demo, path))
        if handle is None:
            handle = self._handles[demo, path] = self._h5[f"data/{self.demos[demo]}/{path}"]
        return handle


def demo_windows(
    lengths: np.ndarray, frame_stack: int, seq_length: int, pad_frame_stack: bool,
    pad_seq_length: bool,
) -> tuple[np.ndarray, int, np.ndarray, np.ndarray]:  # fmt: skip
    """robomimic's windows over demos of ``lengths`` steps (int64 (n_demos,)).

    Returns:
        counts: int64 (n_demos,), items per demo (< 1 where a demo is too short for
            unpadded windows; at least 1 with ``pad_seq_length``);
        first: the step of a demo's first item;
        window: int64 (frame_stack - 1 + seq_length,), steps relative to the item's step;
        goal_step: int64 (n_demos,), the step ``goal_mode="last"`` takes the goal from.
    """
    drop = (0 if pad_frame_stack else frame_stack - 1) + (0 if pad_seq_length else seq_length - 1)
    counts = lengths - drop
    if pad_seq_length:
        counts = np.maximum(counts, 1)
    first = 0 if pad_frame_stack else frame_stack - 1
    window = np.arange(-(frame_stack - 1), seq_length)
    goal_step = lengths - (0 if pad_seq_length else seq_length - 1) - 1
    return counts, first, window, goal_step


def window_items(
    rows_of, item_steps, window, lengths, goal_steps, *, obs_keys, dataset_keys,
    get_pad_mask, goal_mode, load_next_obs, torch_views, item_type=dict,
) -> list[dict]:  # fmt: skip
    """robomimic's items (see the module docstring) of B windows.

    Args:
        rows_of: ``rows_of(path, rows)`` -> (B, T, ...) values of ``path`` (``obs/<key>``,
            ``next_obs/<key>`` or a dataset key) at clipped demo steps ``rows`` (B, T) of
            each item's demo (goal rows have T = 1).
        item_steps: int64 (B,), each item's step in its demo; ``window`` from
            :func:`demo_windows`; ``lengths``, ``goal_steps``: int64 (B,), of each item's demo.
        torch_views: values as torch tensors (views of one tensor per key) instead of numpy.
        item_type: the type of each item (a dict type; nested groups are plain dicts).
    """
    steps = item_steps[:, None] + window  # (B, T) steps in the demo
    last = lengths[:, None] - 1
    rows = np.minimum(np.maximum(steps, 0), last)  # padding repeats the first / last step
    prefixes = ("obs", "next_obs") if load_next_obs else ("obs",)
    paths = [f"{p}/{k}" for p in prefixes for k in obs_keys] + list(dataset_keys)
    values = {path: rows_of(path, rows) for path in paths}
    if get_pad_mask:
        values["pad_mask"] = ((steps >= 0) & (steps <= last))[..., None]  # (B, T, 1)
    if goal_mode == "last":
        for key in obs_keys:
            values[f"goal_obs/{key}"] = rows_of(f"next_obs/{key}", goal_steps[:, None])[:, 0]
        if get_pad_mask:  # robomimic keeps the goal step's mask, shape (1,)
            values["goal_obs/pad_mask"] = np.ones((len(item_steps), 1), bool)
    if torch_views:
        per_item = {k: torch.from_numpy(v).unbind(0) for k, v in values.items()}
    else:
        per_item = values
    mask = ["pad_mask"] if get_pad_mask else []
    for group in ("obs", "next_obs"):  # their masks are the item's
        per_item.update((f"{group}/{k}", per_item[k]) for k in mask)
    groups = ["obs", *["next_obs"] * load_next_obs, *["goal_obs"] * (goal_mode == "last")]
    top = [*dataset_keys, *mask]
    columns = [per_item[k] for k in top]
    for group in groups:
        keys = [*obs_keys, *mask]
        columns.append(_dicts(len(item_steps), keys, [per_item[f"{group}/{k}"] for k in keys]))
    return _dicts(len(item_steps), [*top, *groups], columns, item_type)


def _dicts(count: int, keys: list[str], columns: list, item_type: type = dict) -> list[dict]:
    """``count`` dicts of ``item_type``, dict ``b`` being ``{keys[j]: columns[j][b]}``
    (every column has ``count`` entries)."""
    if not columns:
        return [item_type() for _ in range(count)]
    return [item_type(zip(keys, row)) for row in zip(*columns)]  # noqa: B905 (lengths equal)


def _merge(a: tuple, b: tuple) -> tuple:
    """robomimic's ``_aggregate_traj_stats``: (n, mean, sum of squared deviations) of two
    parts (Chan et al.'s parallel algorithm), with robomimic's float32 arithmetic."""
    n_a, mean_a, m2_a = a
    n_b, mean_b, m2_b = b
    n = n_a + n_b
    delta = mean_b - mean_a
    return n, (n_a * mean_a + n_b * mean_b) / n, m2_a + m2_b + (delta**2) * (n_a * n_b) / n

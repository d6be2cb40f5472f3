"""The seed paper's "robo" format (Improving Dataloaders for Visuomotor Imitation within
Robomimic): a robomimic HDF5 file as one tar archive, read by a streaming pipeline.

Archive members, in this order::

    metadata.json   {"format": "robo", "version": 1, "demos": [demo names, sorted by number],
                     "num_samples": [steps per demo], "env_args": str | null,
                     "arrays": {<path>: {"dtype": str, "shape": per-step shape}}}
    masks.json      {<mask name>: [demo names]}            (the file's mask/<name> lists)
    demo_N.npz      one per demo: numpy.savez (uncompressed) of its datasets, named by their
                    path in the demo (obs/<key>, next_obs/<key>, actions, rewards, dones, ...)

Arrays keep the file's dtypes and shapes; images are (T, H, W, C) uint8. The paper used
TorchData's tar pipes, now archived; :class:`RoboTarDataset` is a plain
``torch.utils.data.IterableDataset``.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import h5py
import numpy as np
import torch.utils.data

from robopipe.atomic import atomic_path
from robopipe.errors import DatasetError
from robopipe.robomimic.images import downscale, is_image
from robopipe.robomimic.sequence import demo_windows, window_items

FORMAT_VERSION = 1


def write_robo(hdf5: str | Path, out: str | Path) -> Path:
    """Write the robo archive (module docstring) of robomimic file ``hdf5`` to ``out``
    (written to a temp path, moved into place when complete); return ``out`` as a Path.

    Every dataset under ``data/demo_N`` (``obs/*``, ``next_obs/*`` and the demo's own, e.g.
    ``actions``) is stored as read; demo attributes other than ``num_samples`` are not.

    Raises:
        DatasetError: ``hdf5`` cannot be opened, has no ``data`` group, or a demo lacks
            ``num_samples``.
    """
    hdf5, out = Path(hdf5), Path(out)
    try:
        h5 = h5py.File(hdf5, "r")
    except OSError as exc:
        raise DatasetError(hdf5.stem, f"cannot open HDF5 file: {exc}", file=hdf5) from None
    with h5, atomic_path(out) as tmp, tarfile.open(tmp, "w") as tar:
        if "data" not in h5:
            raise DatasetError(hdf5.stem, "no data group; is it a robomimic file?", file=hdf5)
        demos = sorted(h5["data"], key=lambda d: int(d[5:]))
        lengths = []
        for episode, demo in enumerate(demos):
            if "num_samples" not in h5[f"data/{demo}"].attrs:
                raise DatasetError(
                    hdf5.stem, f"data/{demo} has no num_samples attribute; add it", episode,
                    file=hdf5,
                )  # fmt: skip
            lengths.append(int(h5[f"data/{demo}"].attrs["num_samples"]))
        first = _datasets(h5[f"data/{demos[0]}"])
        env_args = h5["data"].attrs.get("env_args")
        metadata = {
            "format": "robo",
            "version": FORMAT_VERSION,
            "demos": demos,
            "num_samples": lengths,
            "env_args": None if env_args is None else str(env_args),
            "arrays": {p: {"dtype": str(d.dtype), "shape": d.shape[1:]} for p, d in first.items()},
        }
        masks = {
            name: sorted((d.decode("utf-8") for d in np.array(h5[f"mask/{name}"][:])),
                         key=lambda d: int(d[5:]))
            for name in h5.get("mask", {})
        }  # fmt: skip
        _add(tar, "metadata.json", json.dumps(metadata).encode("utf-8"))
        _add(tar, "masks.json", json.dumps(masks).encode("utf-8"))
        for demo in demos:
            buffer = io.BytesIO()
            np.savez(buffer, **{p: d[()] for p, d in _datasets(h5[f"data/{demo}"]).items()})
            _add(tar, f"{demo}.npz", buffer.getvalue())
    return out


def _datasets(group: h5py.Group) -> dict[str, h5py.Dataset]:
    """path (relative to ``group``) -> dataset, for every dataset below ``group``."""
    found = {}
    group.visititems(
        lambda name, obj: found.update({name: obj}) if isinstance(obj, h5py.Dataset) else None
    )
    return found


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


class RoboTarDataset(torch.utils.data.IterableDataset):
    """robomimic's ``SequenceDataset`` items (mode None: dataset keys in the file's dtype)
    streamed from a robo archive (:func:`write_robo`).

    Each iteration (epoch) reads this DataLoader worker's demos (every ``num_workers``-th of
    the demos, after a seeded per-epoch shuffle of their order when ``shuffle``) one ``.npz``
    at a time, and yields its windows through a shuffle buffer of ``shuffle_buffer`` windows
    (an item is made when it leaves the buffer; ``shuffle=False``: demos and windows in file
    order). The DataLoader's items are the same multiset as ``SequenceDataset``'s with the same
    arguments, in another order. Which keys exist is checked against the first demo's
    (``metadata.json``).

    Args:
        path: the ``.tar`` archive.
        obs_keys, dataset_keys, frame_stack, seq_length, pad_frame_stack, pad_seq_length,
        get_pad_mask, goal_mode, filter_by_attribute, load_next_obs: as
            :class:`~robopipe.robomimic.sequence.SequenceDataset`'s.
        shuffle: shuffle the demo order and items (``shuffle_buffer``) each epoch.
        shuffle_buffer: windows held for shuffling (>= 1 when ``shuffle``); RAM holds the
            arrays of the demos they come from.
        seed: seed of the shuffles (epoch ``e`` of worker ``w`` uses ``(seed, e, w)``).
        image_size: (height, width) to downscale image observations to (see
            :func:`robopipe.robomimic.images.downscale`), or None.
        with_index: add ``"index"`` (the item's number in ``SequenceDataset``) and ``"demo"``
            (its demo's position in ``demos``), int64 scalars, to every item.

    Attributes: ``demos``, ``n_demos``, ``total_num_sequences`` (= ``len(self)``),
    ``item_demos`` as ``SequenceDataset``'s; ``image_keys``.

    Raises:
        ValueError: bad argument values.
        DatasetError: not a robo archive, no such mask, a requested key is absent, or a demo
            is too short for unpadded windows.
    """

    def __init__(
        self,
        path,
        obs_keys,
        dataset_keys,
        frame_stack=1,
        seq_length=1,
        pad_frame_stack=True,
        pad_seq_length=True,
        get_pad_mask=False,
        goal_mode=None,
        filter_by_attribute=None,
        load_next_obs=True,
        *,
        shuffle=True,
        shuffle_buffer=1000,
        seed=0,
        image_size=None,
        with_index=False,
    ):
        super().__init__()
        if frame_stack < 1 or seq_length < 1:
            raise ValueError("frame_stack and seq_length must be >= 1")
        if goal_mode not in (None, "last") or (goal_mode == "last" and not load_next_obs):
            raise ValueError("goal_mode must be None, or 'last' with load_next_obs")
        if shuffle and shuffle_buffer < 1:
            raise ValueError(f"shuffle_buffer must be >= 1 when shuffling, not {shuffle_buffer}")
        self.path = str(path)
        self.obs_keys, self.dataset_keys = tuple(obs_keys), tuple(dataset_keys)
        self.n_frame_stack, self.seq_length = frame_stack, seq_length
        self.get_pad_mask, self.goal_mode, self.load_next_obs = (
            get_pad_mask,
            goal_mode,
            load_next_obs,
        )
        self.shuffle, self.shuffle_buffer, self.seed = shuffle, shuffle_buffer, seed
        self.image_size = None if image_size is None else tuple(image_size)
        self.with_index = with_index
        self._epoch = 0
        metadata, masks = self._header()
        demos = metadata["demos"]
        if filter_by_attribute is not None:
            if filter_by_attribute not in masks:
                raise self._error(f"no mask {filter_by_attribute!r}; filter_by_attribute names one")
            demos = masks[filter_by_attribute]
        self.demos = sorted(demos, key=lambda d: int(d[5:]))
        self.n_demos = len(self.demos)
        length_of = dict(zip(metadata["demos"], metadata["num_samples"], strict=True))
        self._lengths = np.array([length_of[d] for d in self.demos], dtype=np.int64)
        counts, self._first, self._window, self._goal_step = demo_windows(
            self._lengths, frame_stack, seq_length, pad_frame_stack, pad_seq_length
        )
        if (counts < 1).any():
            short = int(np.argmax(counts < 1))
            raise self._error(f"{self.demos[short]} is too short for unpadded windows", short)
        self._counts = counts
        self._starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        self.item_demos = np.repeat(np.arange(self.n_demos), counts)
        self.total_num_sequences = len(self.item_demos)
        prefixes = ("obs", "next_obs") if load_next_obs else ("obs",)
        self._paths = [f"{p}/{k}" for p in prefixes for k in self.obs_keys] + list(dataset_keys)
        arrays = metadata["arrays"]
        missing = [p for p in self._paths if p not in arrays]
        if missing:
            raise self._error(f"the archive has no {missing}; request keys it has")
        self.image_keys = tuple(
            k
            for k in self.obs_keys
            if is_image(arrays[f"obs/{k}"]["dtype"], arrays[f"obs/{k}"]["shape"])
        )

    def _error(self, message: str, episode: int | None = None) -> DatasetError:
        return DatasetError(Path(self.path).stem, message, episode=episode, file=self.path)

    def _header(self) -> tuple[dict, dict]:
        try:
            with tarfile.open(self.path, "r:") as tar:
                metadata = json.load(tar.extractfile("metadata.json"))
                masks = json.load(tar.extractfile("masks.json"))
        except (OSError, tarfile.TarError, KeyError, ValueError) as exc:
            raise self._error(f"not a robo archive: {exc}; write one with write_robo") from None
        if metadata.get("format") != "robo" or metadata.get("version") != FORMAT_VERSION:
            raise self._error(f"not a robo archive of version {FORMAT_VERSION}; rewrite it")
        return metadata, masks

    def __len__(self) -> int:
        return self.total_num_sequences

    def __iter__(self):
        """This worker's items of one epoch (see the class docstring)."""
        info = torch.utils.data.get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        epoch, self._epoch = self._epoch, self._epoch + 1
        order = np.arange(self.n_demos)
        if self.shuffle:  # the same permutation in every worker, each taking its share
            order = np.random.default_rng((self.seed, epoch)).permutation(order)
        rng = np.random.default_rng((self.seed, epoch, worker))
        windows = self._windows(order[worker::workers])
        if self.shuffle:
            windows = _shuffled(windows, self.shuffle_buffer, rng)
        return (self._item(*window) for window in windows)

    def _windows(self, demos: np.ndarray):
        """(the demo's arrays, demo, item number in the demo) of every window of ``demos``;
        a demo's arrays are read once and shared by its windows, so the shuffle buffer holds
        the demos it has windows of, not every window's data (T times as much)."""
        with tarfile.open(self.path, "r:") as tar:
            for demo in demos.tolist():
                with np.load(tar.extractfile(f"{self.demos[demo]}.npz")) as npz:
                    arrays = {p: self._prepared(p, npz[p]) for p in self._paths}
                for i in range(int(self._counts[demo])):
                    yield arrays, demo, i

    def _item(self, arrays: dict, demo: int, i: int) -> dict:
        """Item ``i`` of ``demo`` (numpy arrays), made from the demo's ``arrays``."""
        (item,) = window_items(
            lambda path, rows: arrays[path][rows],
            np.array([self._first + i]),
            self._window,
            self._lengths[demo : demo + 1],
            self._goal_step[demo : demo + 1],
            obs_keys=self.obs_keys,
            dataset_keys=self.dataset_keys,
            get_pad_mask=self.get_pad_mask,
            goal_mode=self.goal_mode,
            load_next_obs=self.load_next_obs,
            torch_views=False,
        )
        if self.with_index:
            item["index"] = np.int64(self._starts[demo] + i)
            item["demo"] = np.int64(demo)
        return item

    def _prepared(self, path: str, values: np.ndarray) -> np.ndarray:
        if self.image_size is None or path.split("/")[-1] not in self.image_keys:
            return values
        return downscale(values, self.image_size)


def _shuffled(items, size: int, rng: np.random.Generator):
    """``items`` through a shuffle buffer of ``size``: each yield is a random one of the
    buffered items, replaced by the next item."""
    buffer = []
    for item in items:
        if len(buffer) < size:
            buffer.append(item)
            continue
        i = int(rng.integers(size))
        yield buffer[i]
        buffer[i] = item
    rng.shuffle(buffer)
    yield from buffer

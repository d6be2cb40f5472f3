"""Map-style dataset over a local (or any fsspec) v3.0 dataset: random access by frame index."""

from __future__ import annotations

import time

import numpy as np
import torch.utils.data

from robopipe.errors import DatasetError
from robopipe.formats.v30_reader import read_data_file
from robopipe.loading.items import ItemReader


class MapDataset(torch.utils.data.Dataset):
    """A v3.0 dataset as a ``torch.utils.data.Dataset``; item ``i`` is global frame ``i``.

    Items have LeRobotDataset's keys and shapes (see ``robopipe.loading.items``). Every data
    file is read once, with pyarrow, into numpy columns held in memory (low-dimensional data
    only; frames are decoded on access). DataLoader workers share those arrays (fork) and
    each opens its own decoders and camera thread pool.

    Args:
        url: dataset root (a local path, or any fsspec URL).
        name: dataset name for error messages (default: the folder name).
        storage_options: fsspec options for ``url``.
        **item_options: ``ItemReader``'s keywords (``delta_timestamps``, ``image_dtype``,
            ``decode_device``, ``tolerance_s``, ``decoder_cache_size``, ``seek_mode``).

    Raises:
        DatasetError: missing or inconsistent files (``index`` column not 0..n-1).
    """

    def __init__(
        self,
        url: str,
        *,
        name: str | None = None,
        storage_options: dict | None = None,
        **item_options,
    ) -> None:
        self.reader = ItemReader.from_url(
            url, name=name, storage_options=storage_options, **item_options
        )
        self.meta = self.reader.meta
        self.columns = _read_all_data(self.meta)

    @property
    def counters(self):
        """Shared loader counters (``robopipe.loading.decoder.Counters``)."""
        return self.reader.counters

    def __len__(self) -> int:
        return self.meta.num_frames

    def __getitem__(self, index: int) -> dict:
        if not 0 <= index < len(self):
            raise IndexError(f"frame index {index} outside [0, {len(self)})")
        start = time.perf_counter()
        episode = int(self.meta.episode_of(index))
        lo = int(self.meta.episodes["dataset_from_index"][episode])
        hi = int(self.meta.episodes["dataset_to_index"][episode])
        rows = {key: column[lo:hi] for key, column in self.columns.items()}
        self.reader.counters.add("fetch_s", time.perf_counter() - start)
        return self.reader.item(episode, rows, index - lo)


def _read_all_data(meta) -> dict[str, np.ndarray]:
    """Every data file's columns, concatenated in file order; checks the ``index`` column."""
    files = sorted({meta.data_file(e) for e in range(meta.num_episodes)})
    parts = [read_data_file(meta, f) for f in files]
    columns = {key: np.concatenate([p[key] for p in parts]) for key in meta.data_keys}
    if not np.array_equal(columns["index"], np.arange(len(columns["index"]))):
        raise DatasetError(meta.name, "the index column is not the row position 0..n-1")
    return columns

"""Two caching strategies of the seed paper (Improving Dataloaders for Visuomotor Imitation
within Robomimic) on top of :class:`~robopipe.robomimic.sequence.SequenceDataset`.

Both give exactly the items of ``SequenceDataset(..., hdf5_cache_mode=None)`` (dataset keys
in the file's dtype); only where the data waits between items differs:

- :class:`LruSequenceDataset`: a demo's requested datasets are read whole on its first use
  and kept; the least recently used demos are dropped once the kept arrays pass
  ``cache_size_mb`` (the paper's LRU cache, bounded by size rather than by count);
- :class:`CompressedSequenceDataset`: every demo's requested datasets are held in RAM as one
  ``numpy.savez_compressed`` archive (the paper's compressed cache); an item decompresses
  the datasets it reads.

Each DataLoader worker keeps its own LRU cache (what the parent held is shared at fork).
"""

from __future__ import annotations

import io
from collections import OrderedDict

import numpy as np

from robopipe.robomimic.sequence import SequenceDataset


class LruSequenceDataset(SequenceDataset):
    """:class:`SequenceDataset` (mode None) with an LRU cache of whole demos.

    Args:
        *args, **kwargs: :class:`SequenceDataset`'s arguments but ``hdf5_cache_mode``.
        cache_size_mb: the most MiB of demo arrays kept (one demo is always kept, however
            large).

    Attributes:
        cached_bytes: bytes of the demo arrays kept now; ``hits``, ``misses``: demo lookups.

    Raises:
        ValueError: ``cache_size_mb`` < 0, or see :class:`SequenceDataset`.
    """

    def __init__(self, *args, cache_size_mb: float = 256, **kwargs) -> None:
        if cache_size_mb < 0:
            raise ValueError(f"cache_size_mb must be >= 0, not {cache_size_mb}")
        super().__init__(*args, hdf5_cache_mode=None, **kwargs)
        self.cache_size_mb = cache_size_mb
        self._demos: OrderedDict[int, dict[str, np.ndarray]] = OrderedDict()
        self.cached_bytes = self.hits = self.misses = 0

    def _demo(self, demo: int) -> dict[str, np.ndarray]:
        arrays = self._demos.get(demo)
        if arrays is not None:
            self.hits += 1
            self._demos.move_to_end(demo)
            return arrays
        self.misses += 1
        arrays = {p: self._prepared(p, self._dataset(demo, p)[()]) for p in self._paths()}
        self._demos[demo] = arrays
        self.cached_bytes += sum(a.nbytes for a in arrays.values())
        while len(self._demos) > 1 and self.cached_bytes > self.cache_size_mb * 2**20:
            _, dropped = self._demos.popitem(last=False)
            self.cached_bytes -= sum(a.nbytes for a in dropped.values())
        return arrays

    def _rows(self, path: str, demo: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return np.stack([self._demo(int(d))[path][r] for d, r in zip(demo, rows, strict=True)])


class CompressedSequenceDataset(SequenceDataset):
    """:class:`SequenceDataset` (mode None) holding every demo's requested datasets in RAM
    as a ``numpy.savez_compressed`` archive.

    Args:
        *args, **kwargs: :class:`SequenceDataset`'s arguments but ``hdf5_cache_mode``.

    Attributes:
        compressed_bytes: bytes of all archives.
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, hdf5_cache_mode=None, **kwargs)
        self._names = {path: f"a{i}" for i, path in enumerate(self._paths())}
        self._archives = []
        for demo in range(self.n_demos):
            buffer = io.BytesIO()
            arrays = {p: self._prepared(p, self._dataset(demo, p)[()]) for p in self._names}
            np.savez_compressed(buffer, **{self._names[p]: a for p, a in arrays.items()})
            self._archives.append(buffer.getvalue())
        self.compressed_bytes = sum(len(a) for a in self._archives)
        self._h5.close()  # items need no file
        self._h5, self._h5_pid, self._handles = None, None, {}

    def _rows(self, path: str, demo: np.ndarray, rows: np.ndarray) -> np.ndarray:
        out = []
        for d, r in zip(demo, rows, strict=True):
            with np.load(io.BytesIO(self._archives[int(d)])) as archive:
                out.append(archive[self._names[path]][r])
        return np.stack(out)

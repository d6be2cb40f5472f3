"""Map-style dataset over a local (or any fsspec) v3.0 dataset: random access by frame index."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from concurrent.futures import Future

import numpy as np
import torch.utils.data
from fsspec.implementations.local import LocalFileSystem

from robopipe.errors import DatasetError
from robopipe.formats.v30_reader import read_data_file
from robopipe.loading.batches import BatchBuffers, fill_batch
from robopipe.loading.decoder import DecoderCache
from robopipe.loading.gop_cache import GopCache
from robopipe.loading.items import ItemReader
from robopipe.loading.selection import episode_frames, selected_episodes

AHEAD_SEEN = 256  # batches whose GOPs a process remembers having prefetched


class MapDataset(torch.utils.data.Dataset):
    """A v3.0 dataset as a ``torch.utils.data.Dataset``; item ``i`` is global frame ``i``.

    Items have LeRobotDataset's keys and shapes (see ``robopipe.loading.items``). Every data
    file (of the ``episodes`` read) is read once, with pyarrow, into numpy columns held in
    memory (low-dimensional data only; frames are decoded on access). DataLoader workers share
    those arrays (fork) and each opens its own decoders and camera thread pool.

    A DataLoader fetches a batch with ``__getitems__``. With ``batch_buffers=k`` it copies each
    item's frames, as they are decoded, into a shared-memory buffer reused every ``k`` batches
    (``robopipe.loading.batches``), and ``collate_fn=robopipe.loading.collate`` hands that
    buffer on instead of stacking the frames into new shared memory: on cr5 (640x480) that
    saves about 0.9 CPU ms per sample. Frames then come in ``torch.channels_last`` memory
    format, and a batch's frames are overwritten ``k`` batches of its worker later: keep
    ``k >= prefetch_factor + 2`` (4 with the DataLoader's default) and clone frames kept longer
    than the next batch. Each process keeps at most ``batch_buffer_mb`` MiB of such buffers;
    a camera whose ``k`` buffers would go beyond it gets new shared memory for each batch,
    freed with the batch.

    From a remote URL, videos are read through a per-process GOP cache
    (``robopipe.loading.gop_cache``): the GOPs a batch's frames need and no cached range holds
    are fetched in one concurrent call (about one round trip per batch, not one per frame),
    and up to ``gop_cache_mb`` MiB of GOPs stay cached per process for later frames. With an
    ``EpochSampler(ahead=k)`` as ``batch_sampler``, each batch also names the ``k`` batches
    after it, and a worker fetches the GOPs of its own among them (every ``num_workers``-th:
    a DataLoader hands batches to its workers in turn) in the background while it decodes, so
    a fault's retry (a 429's ``Retry-After``) is waited out ahead of the batch that needs it;
    the GOPs fetched ahead take at most half of ``gop_cache_mb`` (later batches wait their
    turn), so none is evicted before its batch comes.

    Example::

        ds = MapDataset("results/demo/v3.0", batch_buffers=4)
        loader = DataLoader(ds, batch_size=32, shuffle=True, num_workers=2, collate_fn=collate)

    For epochs that a killed run can resume, pass an ``EpochSampler`` as ``batch_sampler``
    (``robopipe.loading.sampler``): the order and position live there.

    Args:
        url: dataset root (a local path, or any fsspec URL).
        name: dataset name for error messages (default: the folder name).
        storage_options: fsspec options for ``url``.
        batch_buffers: shared-memory batch buffers per process and camera, 0 for none
            (frames collated by the DataLoader as usual); ignored with ``decode_device="cuda"``.
        batch_buffer_mb: MiB of batch buffers each process (DataLoader worker) keeps, all
            cameras together: a camera whose ``batch_buffers`` buffers do not fit gets new
            shared memory for each batch (cr5, batch 32: 4 buffers of single frames are
            113 MiB, of sarm windows 900 MiB).
        gop_cache_mb: MiB of video GOPs each process (DataLoader worker) caches from a remote
            ``url`` (a batch's own GOPs are kept even beyond it); 0 reads remote videos
            through fsspec's 1 MiB ``readahead`` file instead (a round trip per frame).
            Ignored for a local path.
        episodes: the episodes read (LeRobotDataset's ``episodes=``): item ``i`` is then the
            ``i``-th frame of those, keeping its global ``index``; None: every episode. Only
            their data files are read, and only their frames decoded.
        **item_options: ``ItemReader``'s keywords (``delta_timestamps``, ``image_dtype``,
            ``decode_device``, ``tolerance_s``, ``decoder_cache_size``, ``seek_mode``).

    Raises:
        DatasetError: missing or inconsistent files (``index`` column not 0..n-1).
        ValueError: ``batch_buffers``, ``batch_buffer_mb`` or ``gop_cache_mb`` < 0, an
            episode not in the dataset, or a bad item option.
    """

    def __init__(
        self,
        url: str,
        *,
        name: str | None = None,
        storage_options: dict | None = None,
        batch_buffers: int = 0,
        batch_buffer_mb: float = 512.0,
        gop_cache_mb: float = 64.0,
        episodes: Sequence[int] | None = None,
        **item_options,
    ) -> None:
        if batch_buffers < 0:
            raise ValueError(f"batch_buffers must be >= 0, got {batch_buffers}")
        if gop_cache_mb < 0:
            raise ValueError(f"gop_cache_mb must be >= 0, got {gop_cache_mb}")
        self.reader = ItemReader.from_url(
            url, name=name, storage_options=storage_options, **item_options
        )
        self.meta = self.reader.meta
        self.gops = None
        if gop_cache_mb and self.meta.video_keys and not isinstance(self.meta.fs, LocalFileSystem):
            self.gops = GopCache(self.meta, gop_cache_mb, self.reader.counters)
            old = self.reader.decoders
            self.reader.decoders = DecoderCache(
                self.gops.open, old.max_size, old.device, old.seek_mode, self.reader.counters
            )
        self._ahead_seen: OrderedDict[tuple[int, ...], None] = OrderedDict()  # prefetched
        self.columns, self._first_row = _read_data(self.meta, episodes)
        self.frames = episode_frames(self.meta, episodes)
        on_cpu = item_options.get("decode_device", "cpu") == "cpu"
        self.buffers = None
        if batch_buffers and on_cpu:
            self.buffers = BatchBuffers(batch_buffers, batch_buffer_mb)
        elif batch_buffer_mb < 0:
            raise ValueError(f"batch_buffer_mb must be >= 0, got {batch_buffer_mb}")

    @property
    def counters(self):
        """Shared loader counters (``robopipe.loading.decoder.Counters``)."""
        return self.reader.counters

    def __len__(self) -> int:
        return self.meta.num_frames if self.frames is None else len(self.frames)

    def _locate(self, index: int) -> tuple[int, dict[str, np.ndarray], int]:
        """(episode, the episode's data rows, row of ``index`` in it)."""
        if not 0 <= index < len(self):
            raise IndexError(f"frame index {index} outside [0, {len(self)})")
        if self.frames is not None:
            index = int(self.frames[index])
        episode = int(self.meta.episode_of(index))
        lo = int(self.meta.episodes["dataset_from_index"][episode])
        hi = int(self.meta.episodes["dataset_to_index"][episode])
        first = int(self._first_row[episode])
        rows = {key: column[first : first + hi - lo] for key, column in self.columns.items()}
        return episode, rows, index - lo

    def _fetch_gops(
        self, located: list[tuple[int, dict, int]]
    ) -> tuple[list[int], list[int], Future | None]:
        """Fetch the GOPs of the frames of ``located`` items at once (``GopCache.fetch``):
        (rows whose GOPs are cached, rows waiting on the ranges retried in the background,
        that retry's future or None)."""
        rows = list(range(len(located)))
        if self.gops is None:
            return rows, [], None
        requests = [list(self.reader.video_requests(*one).values()) for one in located]
        retrying = self.gops.fetch([job for jobs in requests for job in jobs])
        if retrying is None:
            return rows, [], None
        ready = [row for row in rows if self.gops.cached(requests[row])]
        return ready, sorted(set(rows) - set(ready)), retrying

    def _items(self, located: list[tuple[int, dict, int]]) -> tuple[list[int], Iterator[dict]]:
        """(rows in decode order, the items decoded in that order): the items whose GOPs
        came first, decoded while failed ranges are retried, then the others."""
        ready, waiting, retrying = self._fetch_gops(located)

        def decoded() -> Iterator[dict]:
            for row in ready:
                yield self.reader.item(*located[row])
            if retrying is not None:
                start = time.perf_counter()
                retrying.result()
                self.reader.counters.add(wait_s=time.perf_counter() - start)
            for row in waiting:
                yield self.reader.item(*located[row])

        return ready + waiting, decoded()

    def __getitem__(self, index: int) -> dict:
        start = time.perf_counter()
        located = self._locate(index)
        self.reader.counters.add(fetch_s=time.perf_counter() - start)
        _, items = self._items([located])
        return next(items)

    def __getitems__(self, indices: list[int]) -> list[dict]:
        """The items at ``indices`` (a DataLoader's batch); with ``batch_buffers``, a
        ``FrameBatch`` whose frames are in this process's next batch buffer (each item's
        copied there as soon as it is decoded, and the freed heap given back). From a
        remote URL, the batch's GOPs are fetched first, all at once, and the items whose GOPs
        came are decoded while the ranges that failed are retried."""
        start = time.perf_counter()
        located = [self._locate(int(i)) for i in indices]
        self.reader.counters.add(fetch_s=time.perf_counter() - start)
        rows, items = self._items(located)
        self._prefetch_ahead(getattr(indices, "ahead", ()))
        if self.buffers is None or not located:
            by_row = dict(zip(rows, items, strict=True))
            return [by_row[row] for row in range(len(located))]
        return fill_batch(items, len(located), self.meta.camera_keys, self.buffers, rows=rows)

    def _prefetch_ahead(self, ahead: Sequence[Sequence[int]]) -> None:
        """Start fetching the GOPs of this process's batches among ``ahead`` (the batches
        after the current one, in the sampler's order) that it has not asked for yet, in
        order, until the GOP cache's share for look-ahead is full (``GopCache.prefetch``)."""
        if self.gops is None or not ahead:
            return
        info = torch.utils.data.get_worker_info()
        workers = info.num_workers if info is not None else 1
        for batch in ahead[workers - 1 :: workers]:
            key = tuple(batch)
            if key in self._ahead_seen:
                continue
            requests = []
            for index in batch:
                requests.extend(self.reader.video_requests(*self._locate(int(index))).values())
            if not self.gops.prefetch(requests):
                break  # asked for again with a later batch, once the share has room
            self._ahead_seen[key] = None
        while len(self._ahead_seen) > AHEAD_SEEN:
            self._ahead_seen.popitem(last=False)


def _read_data(meta, episodes) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The columns of the data files that hold ``episodes`` (None: every data file),
    concatenated in file order, and each episode's first row in them (int64, -1 for an
    episode not read); checks the ``index`` column (the row position)."""
    by_file: dict[str, list[int]] = {}
    for e in selected_episodes(meta, episodes):
        by_file.setdefault(meta.data_file(e), []).append(e)
    files = sorted(by_file)
    parts = [read_data_file(meta, f) for f in files]
    columns = {key: np.concatenate([p[key] for p in parts]) for key in meta.data_keys}
    if episodes is None and not np.array_equal(columns["index"], np.arange(len(columns["index"]))):
        raise DatasetError(meta.name, "the index column is not the row position 0..n-1")
    first_row = np.full(meta.num_episodes, -1, dtype=np.int64)
    offset = 0
    for file, part in zip(files, parts, strict=True):
        index = part["index"]
        start = int(index[0]) if len(index) else 0
        if not np.array_equal(index, np.arange(start, start + len(index))):
            raise DatasetError(meta.name, "the index column is not the row position", file=file)
        for e in by_file[file]:
            first_row[e] = offset + int(meta.episodes["dataset_from_index"][e]) - start
        offset += len(index)
    return columns, first_row

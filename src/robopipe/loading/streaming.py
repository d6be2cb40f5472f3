"""Streaming (iterable) dataset over a v3.0 dataset at any fsspec URL.

Work is split by ``robopipe.loading.partition.assign_episodes`` over every (rank, DataLoader
worker) stream, so with R ranks and W workers the R*W streams are disjoint, non-empty and
together cover every frame once per epoch. Each stream's order is a pure function of
(seed, epoch, slot): episode groups in shuffled order, then a shuffle buffer of *frame indices*
(never decoded frames, so memory stays bounded); frames are decoded only when an index leaves
the buffer. Video time comes from the episode's ``from_timestamp`` plus the row's timestamp, so
videos that span several files work (lerobot 0.6.1's ``StreamingLeRobotDataset`` uses
``index / fps`` and fails there, ``streaming_dataset.py:540``).

From a remote URL each stream prefetches whole episodes (``robopipe.loading.prefetch``): one
byte range per camera found from the mp4 index, and the episode's data rows, fetched by
background threads in the order the stream first needs them, up to ``prefetch_mb`` ahead;
decoding then reads memory, so items and order are those of the local path.
"""

from __future__ import annotations

import copy
import itertools
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
import torch.utils.data
from fsspec.implementations.local import LocalFileSystem

from robopipe.errors import DatasetError
from robopipe.formats.v30_reader import (
    file_size,
    open_data_file,
    read_data_rows,
    row_groups_of_rows,
)
from robopipe.loading.batches import BatchBuffers, fill_batch
from robopipe.loading.decoder import DecoderCache
from robopipe.loading.epoch import EpochPosition
from robopipe.loading.items import ItemReader
from robopipe.loading.partition import (
    assign_episodes,
    group_episodes_by_files,
    round_robin_taken,
    world_from_env,
)
from robopipe.loading.prefetch import (
    Prefetcher,
    SpanFile,
    SpanStore,
    fetch_range,
    read_mp4_index,
)
from robopipe.loading.selection import selected_episodes

DATA_FILES_OPEN = 4  # data parquet files held open per stream (LRU): their footers parsed
ROWS_KEPT = 1 << 16  # data rows held per stream (LRU of row-group reads), at least 2 reads


class StreamingDataset(EpochPosition, torch.utils.data.IterableDataset):
    """A v3.0 dataset streamed from ``url`` (local path, ``http(s)://``, ``s3://``,
    ``hf://datasets/<repo>``, ``hf://buckets/<name>``, any fsspec URL).

    Items are those of ``MapDataset`` (LeRobotDataset's keys and shapes).

    Args:
        url: dataset root.
        rank, world_size: this process's place among the ranks (default: RANK / WORLD_SIZE
            environment variables, else 0 of 1).
        shuffle: shuffle episode order and frames (through the buffer); False gives frames in
            index order per stream.
        shuffle_buffer: frame indices held in the buffer.
        prefetch: fetch each episode's video bytes (one range per camera, found from the
            mp4's index) and data rows on background threads ahead of need, and decode from
            memory (``robopipe.loading.prefetch``); None (default): for remote datasets only.
        prefetch_mb: per stream (DataLoader worker), MB of episode bytes fetched ahead of the
            episode needed now; episodes whose frames are still in the shuffle buffer stay
            held whatever this bound.
        seed: base seed; the order of an epoch depends on (seed, epoch, rank, worker).
        episodes: the episodes streamed (LeRobotDataset's ``episodes=``); None: all.
        batch_size: None (default): the dataset yields items, for a DataLoader's
            ``batch_size``. An int: it yields batches of that many items (the last may be
            shorter), for ``DataLoader(batch_size=None, collate_fn=robopipe.loading.collate)``;
            with ``batch_buffers`` each item's frames are copied into the batch's
            shared-memory buffer as soon as they are decoded, as ``MapDataset``'s
            (``robopipe.loading.batches``: no second copy when the batch is collated, one
            item's decoded frames held at a time).
        batch_buffers, batch_buffer_mb: as ``MapDataset``'s, with ``batch_size`` (with the
            DataLoader's ``prefetch_factor`` counting batches); ignored without it or with
            ``decode_device="cuda"``.
        name, storage_options, **item_options: as ``MapDataset`` (``item_options`` are
            ``ItemReader``'s keywords).

    Position: the training loop calls ``advance()`` after each batch (with ``batch_size``;
    without it, each item) it consumes: the dataset in the main process cannot see what
    DataLoader workers have yielded ahead. ``state_dict()`` then holds the epoch and that
    count, and a new dataset given it by ``load_state_dict()`` yields exactly the epoch's
    remaining batches, in the same order, for the same seed, ranks and ``num_workers``. Each
    worker finds its own position from the count (``partition.round_robin_taken``: the
    DataLoader returns its workers' batches round robin) and skips the frame indices of its
    consumed batches without reading or decoding them; the workers take the streams in turn
    from the one whose batch comes next. An epoch whose batches were all consumed yields
    none. ``set_epoch(e)`` with a new ``e`` starts that epoch from its first batch; with the
    current epoch it keeps the position. Epochs reach DataLoader workers when they start:
    use ``persistent_workers=False`` (the default) to change epochs.

    Raises:
        ValueError: fewer episodes than ranks x workers (raised when iteration starts), an
            episode not in the dataset, ``batch_size`` < 1, ``batch_buffers`` or
            ``batch_buffer_mb`` < 0, or (when iteration starts) a mid-epoch position without
            ``batch_size`` in DataLoader workers (whose batches the dataset cannot count).
    """

    def __init__(
        self,
        url: str,
        *,
        name: str | None = None,
        storage_options: dict | None = None,
        rank: int | None = None,
        world_size: int | None = None,
        shuffle: bool = True,
        shuffle_buffer: int = 1000,
        prefetch: bool | None = None,
        prefetch_mb: float = 64.0,
        seed: int = 0,
        episodes: Sequence[int] | None = None,
        batch_size: int | None = None,
        batch_buffers: int = 0,
        batch_buffer_mb: float = 512.0,
        **item_options,
    ) -> None:
        if batch_size is not None and batch_size < 1:
            raise ValueError(f"batch_size must be >= 1 or None, got {batch_size}")
        if batch_buffers < 0 or batch_buffer_mb < 0:
            raise ValueError(
                f"batch_buffers and batch_buffer_mb must be >= 0, got {batch_buffers}, "
                f"{batch_buffer_mb}"
            )
        self.reader = ItemReader.from_url(
            url, name=name, storage_options=storage_options, **item_options
        )
        self.meta = self.reader.meta
        self.rank, self.world_size = world_from_env(rank, world_size)
        self.shuffle = shuffle
        self.shuffle_buffer = max(1, shuffle_buffer)
        self.seed = seed
        self.prefetch = (
            not isinstance(self.meta.fs, LocalFileSystem) if prefetch is None else prefetch
        )
        self.prefetch_mb = prefetch_mb
        self.prefetch_stats: dict[str, float] = {}  # this process's last iteration
        self.epoch = 0
        self.consumed = 0  # batches (items without batch_size) the training loop consumed
        lengths = self.meta.episodes["length"]
        self._file_ids = [self.meta.file_ids(e) for e in range(self.meta.num_episodes)]
        self._lengths = [int(n) for n in lengths]
        self.episode_ids = selected_episodes(self.meta, episodes)
        self.batch_size = batch_size
        on_cpu = item_options.get("decode_device", "cpu") == "cpu"
        self.buffers = None
        if batch_size and batch_buffers and on_cpu:
            self.buffers = BatchBuffers(batch_buffers, batch_buffer_mb)

    @property
    def counters(self):
        """Shared loader counters (``robopipe.loading.decoder.Counters``)."""
        return self.reader.counters

    def streams(self, num_workers: int) -> list[list[int]]:
        """Episodes of every (rank, worker) stream, slot = rank * num_workers + worker."""
        chosen = self.episode_ids
        slots = assign_episodes(
            [self._lengths[e] for e in chosen],
            [self._file_ids[e] for e in chosen],
            self.world_size,
            num_workers,
        )
        return [[chosen[i] for i in slot] for slot in slots]

    def order(self, episodes: list[int], slot: int) -> np.ndarray:
        """The global frame indices one stream yields in this epoch, in order (int64)."""
        meta = self.meta
        starts = meta.episodes["dataset_from_index"]
        ends = meta.episodes["dataset_to_index"]
        groups = group_episodes_by_files([self._file_ids[e] for e in episodes])
        if not self.shuffle:
            return np.concatenate([np.arange(starts[e], ends[e]) for e in episodes])
        rng = np.random.default_rng([self.seed, self.epoch, slot])
        out, buffer = [], []
        for g in rng.permutation(len(groups)):
            for i in rng.permutation(len(groups[g])):
                e = episodes[groups[g][i]]
                for index in range(starts[e], ends[e]):
                    if len(buffer) < self.shuffle_buffer:
                        buffer.append(index)
                        continue
                    j = int(rng.integers(len(buffer)))
                    out.append(buffer[j])
                    buffer[j] = index
        out.extend(buffer[k] for k in rng.permutation(len(buffer)))
        return np.asarray(out, dtype=np.int64)

    def __iter__(self):
        items = self._items()
        if self.batch_size is None:
            yield from items
            return
        while batch := self._batch(itertools.islice(items, self.batch_size)):
            yield batch
            del batch  # not held while the next one is built: it may be hundreds of MB

    def _batch(self, items) -> list[dict]:
        if self.buffers is None:
            return list(items)
        return fill_batch(items, self.batch_size, self.meta.camera_keys, self.buffers)

    def _remaining(self) -> np.ndarray:
        """The frame indices this process's stream yields from the ``consumed`` position on:
        in DataLoader worker ``j`` of ``W``, those of stream ``(next + j) % W`` after its
        batches among the ``consumed`` ones (``partition.round_robin_taken``)."""
        info = torch.utils.data.get_worker_info()
        num_workers, worker = (1, 0) if info is None else (info.num_workers, info.id)
        if info is not None and self.consumed and self.batch_size is None:
            raise ValueError(
                "resuming mid-epoch in DataLoader workers needs the dataset's own batches "
                "(StreamingDataset(batch_size=...), DataLoader(batch_size=None))"
            )
        streams = self.streams(num_workers)[self.rank * num_workers :][:num_workers]
        unit = self.batch_size or 1
        batches = [-(-sum(self._lengths[e] for e in episodes) // unit) for episodes in streams]
        taken, first = round_robin_taken(batches, self.consumed)
        stream = (first + worker) % num_workers
        slot = self.rank * num_workers + stream
        return self.order(streams[stream], slot)[taken[stream] * unit :]

    def _items(self):
        order = self._remaining()
        rows = _DataRows(self.meta, self.reader, max(ROWS_KEPT, 2 * self.shuffle_buffer))
        if self.prefetch:
            yield from self._prefetched(order, rows)
            return
        for index in order:
            episode = int(self.meta.episode_of(index))
            yield self.reader.item(episode, rows.episode(episode), index - rows.start(episode))

    def _prefetched(self, order: np.ndarray, rows: _DataRows):
        """Yield the items of ``order`` with each episode's bytes prefetched
        (``robopipe.loading.prefetch``); an episode's bytes are dropped after its last frame."""
        episode_at = np.asarray(self.meta.episode_of(order), dtype=np.int64)
        episodes, first = np.unique(episode_at, return_index=True)
        _, from_end = np.unique(episode_at[::-1], return_index=True)
        last_at = dict(zip(episodes.tolist(), (len(order) - 1 - from_end).tolist(), strict=True))
        videos = _EpisodeVideos(self.meta, self.prefetch_stats, self.reader.counters)
        rows_lock = threading.Lock()

        def fetch(episode: int) -> dict[str, np.ndarray]:
            with rows_lock:  # _DataRows is not thread-safe; only pool threads use it here
                columns = rows.episode(episode)
            videos.fetch(episode)
            return columns

        prefetcher = Prefetcher(
            episodes[np.argsort(first)].tolist(),
            videos.size_of,
            fetch,
            int(self.prefetch_mb * 2**20),
        )
        reader = copy.copy(self.reader)
        old = self.reader.decoders
        reader.decoders = DecoderCache(
            videos.open, old.max_size, old.device, old.seek_mode, self.reader.counters
        )
        try:
            for position, index in enumerate(order):
                episode = int(episode_at[position])
                start = time.perf_counter()
                columns = prefetcher.get(episode)
                waited = time.perf_counter() - start  # the episode's bytes, from the network
                self.reader.counters.add(fetch_s=waited, wait_s=waited)
                item = reader.item(episode, columns, index - rows.start(episode))
                if last_at[episode] == position:
                    prefetcher.release(episode)
                    videos.drop(episode)
                yield item
        finally:
            prefetcher.close()
            self.prefetch_stats["peak_held_bytes"] = prefetcher.peak
            self.prefetch_stats["max_ahead_bytes"] = prefetcher.max_bytes


class _DataRows:
    """The data rows of episodes, read by the row groups that hold them.

    Data files written one row group per episode (robopipe, lerobot's recorder and
    ``aggregate``) give one episode per read; a file of one row group (lerobot's v2.1 -> v3.0
    converter) is read whole, once. Reads are kept, parsed to numpy, up to ``rows_kept`` rows
    (and at least the last 2), so the episodes of the shuffle buffer are not read again.
    """

    def __init__(self, meta, reader: ItemReader, rows_kept: int) -> None:
        self.meta = meta
        self.reader = reader
        self.rows_kept = rows_kept
        episodes = meta.episodes
        chunk, file = episodes["data/chunk_index"], episodes["data/file_index"]
        # a data file's episodes are consecutive: where each run of one file starts
        changes = (chunk[1:] != chunk[:-1]) | (file[1:] != file[:-1])
        self._file_first = np.flatnonzero(np.concatenate([[True], changes]))
        self._files: OrderedDict[str, tuple] = OrderedDict()
        self._reads: OrderedDict[tuple, dict[str, np.ndarray]] = OrderedDict()  # (file, g0, g1)
        self._rows_held = 0

    def start(self, episode: int) -> int:
        return int(self.meta.episodes["dataset_from_index"][episode])

    def _open(self, relative: str) -> tuple:
        if relative in self._files:
            self._files.move_to_end(relative)
        else:
            self._files[relative] = open_data_file(self.meta, relative)
            if len(self._files) > DATA_FILES_OPEN:
                self._files.popitem(last=False)
        return self._files[relative]

    def episode(self, episode: int) -> dict[str, np.ndarray]:
        """Columns of ``episode``'s rows (views into the row groups read).

        Raises:
            DatasetError: the rows found are not the episode's (``index`` column).
        """
        relative = self.meta.data_file(episode)
        first = self._file_first[np.searchsorted(self._file_first, episode, side="right") - 1]
        row = self.start(episode) - self.start(int(first))  # the episode's first row in its file
        n = int(self.meta.episodes["length"][episode])
        start = time.perf_counter()
        parquet, starts = self._open(relative)
        groups = row_groups_of_rows(starts, row, n)
        key = (relative, groups.start, groups.stop)
        if key in self._reads:
            self._reads.move_to_end(key)
        else:
            self._reads[key] = read_data_rows(self.meta, relative, parquet, groups)
            self._rows_held += len(self._reads[key]["index"])
            while len(self._reads) > 2 and self._rows_held > self.rows_kept:
                _, dropped = self._reads.popitem(last=False)
                self._rows_held -= len(dropped["index"])
        self.reader.counters.add(fetch_s=time.perf_counter() - start)
        columns = self._reads[key]
        offset = row - int(starts[groups.start])
        rows = {k: column[offset : offset + n] for k, column in columns.items()}
        index = rows["index"]
        if len(index) != n or (n and int(index[0]) != self.start(episode)):
            raise DatasetError(
                self.meta.name,
                f"the data file's rows {row}:{row + n} are not the episode's: {len(index)} "
                f"rows from index {int(index[0]) if len(index) else None}, expected {n} "
                f"from {self.start(episode)}",
                episode=episode,
                file=relative,
            )
        return rows


class _EpisodeVideos:
    """Each episode's video bytes, one range per camera, found from the mp4 index
    (``read_mp4_index``) and held in a ``SpanStore`` that decoders read through ``SpanFile``;
    a file whose index cannot be read is read through ``SpanFile``'s fallback blocks."""

    def __init__(self, meta, stats: dict, counters) -> None:
        self.meta = meta
        self.stats = stats
        self.counters = counters  # wait_s: fallback reads
        self.store = SpanStore()
        self._indexes: dict[str, object] = {}
        self._lock = threading.Lock()
        for key in ("fallbacks", "fallback_bytes", "episode_bytes", "episodes", "index_bytes"):
            stats[key] = 0

    def _index(self, path: str):
        with self._lock:
            if path not in self._indexes:
                index = read_mp4_index(self.meta.fs, path, self.meta.retry_budget)
                if index is not None:  # kept for the decoders' opening reads, not counted
                    self.store.add(path, "head", 0, index.head, counted=False)
                    self.store.add(path, "moov", *index.moov, counted=False)
                    self.stats["index_bytes"] += len(index.head) + len(index.moov[1])
                self._indexes[path] = index
            return self._indexes[path]

    def spans(self, episode: int) -> list[tuple[str, int, int]]:
        """(path, start, end) of the byte range of each camera's video of ``episode``."""
        out = []
        episodes = self.meta.episodes
        for cam in self.meta.video_keys:
            path = self.meta.path(self.meta.video_file(cam, episode))
            index = self._index(path)
            if index is None:
                continue
            from_s = float(episodes[f"videos/{cam}/from_timestamp"][episode])
            to_s = float(episodes[f"videos/{cam}/to_timestamp"][episode])
            start, end = index.span(from_s, to_s, 1.0 / self.meta.fps)
            if end > start:
                out.append((path, start, end))
        return out

    def size_of(self, episode: int) -> int:
        return sum(end - start for _, start, end in self.spans(episode))

    def fetch(self, episode: int) -> None:
        for path, start, end in self.spans(episode):
            data = fetch_range(self.meta.fs, path, start, end, self.meta.retry_budget)
            self.store.add(path, episode, start, data)
            with self._lock:
                self.stats["episode_bytes"] += end - start
        with self._lock:
            self.stats["episodes"] += 1

    def drop(self, episode: int) -> None:
        for path, _, _ in self.spans(episode):
            self.store.drop(path, episode)

    def open(self, relative: str) -> SpanFile:
        path = self.meta.path(relative)
        index = self._index(path)
        budget = self.meta.retry_budget
        size = index.size if index is not None else file_size(self.meta.fs, path, budget)
        return SpanFile(self.meta.fs, path, size, self.store, self.stats, self.counters, budget)

"""GOP cache for map-style random access to remote video: a frame costs at most its GOP's bytes.

A remote mp4 read through fsspec's ``readahead`` file costs a round trip and a 1 MiB block on
every random access, one after the other, so a DataLoader worker waits a round trip per frame.
Here each process reads an mp4's index (``moov``, ``robopipe.loading.prefetch.read_mp4_index``)
once, so the GOP of every frame (from its keyframe to the next keyframe, plus
``REORDER_SAMPLES`` samples where frames are stored out of presentation order) is a known byte
range. Before a batch is decoded, the GOPs its frames need that no cached range holds are
fetched in one concurrent call (``robopipe.formats.v30_reader.try_ranges``: every range in
flight at once, each exactly its bytes, hedged after the p95 latency, so the batch waits about
one round trip, not one per frame; GOPs less than ``MERGE_GAP`` apart as one range) into an LRU
cache bounded in bytes; neighbouring frames of a cached GOP cost no request. A range that failed
(a 429 waiting out its ``Retry-After``, a reset) is retried on a background thread, the failed
ranges at once (:meth:`GopCache.fetch` returns that work as a future), so the frames whose GOPs
came are decoded meanwhile (``MapDataset.__getitems__``: ready items first): one fault delays
its own items, not the batch. :meth:`GopCache.prefetch` fetches the GOPs of later batches in the
background (``MapDataset`` with an ``EpochSampler(ahead=...)``: a worker's next batches), so
that a range that fails there (a 429's ``Retry-After: 1`` is about eight of cr5's batches of 32
per worker) is retried while earlier batches decode, and a batch whose GOPs are still in flight
waits for them instead of asking again. The GOPs fetched ahead and not yet asked for are kept to
at most ``AHEAD_SHARE`` of the cache, so that they are not evicted before their batch comes.
Decoders read the mp4 through ``GopFile`` from that cache (anything else, such as ffmpeg's
probing reads when a decoder opens, falls back to a counted 1 MiB block). Decoding is unchanged,
so items are identical to a local read.
"""

from __future__ import annotations

import bisect
import os
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
from fsspec.utils import merge_offset_ranges

from robopipe.formats.v30_reader import file_size, read_again, try_ranges
from robopipe.loading.prefetch import REORDER_SAMPLES, Mp4Index, SpanFile, read_mp4_index

# ffmpeg reads through a forward seek of up to its AVIO buffer (torchcodec's: 64 KiB) plus its
# short-seek threshold (32 KiB) instead of seeking (avio_seek), so GOPs one decoder call needs
# (a window's frames) that lie closer than this are fetched as one range, gap included
MERGE_GAP = 1 << 17
PREFETCH_THREADS = 4  # background fetches of later batches' GOPs in flight at once, per process
AHEAD_SHARE = 0.5  # most of a GopCache's bytes that GOPs fetched ahead and not yet asked for take


class RangeCache:
    """Byte ranges of files held in memory, LRU-evicted to at most ``max_bytes`` (thread-safe).

    The ranges added or touched by the latest ``reserve`` call are never evicted by it, so one
    batch's ranges may take the total above ``max_bytes`` until the next call. Ranges may
    overlap; a read is served by a single range holding its first byte.

    Args:
        max_bytes: bound on the bytes held (besides pinned ranges and the latest call's).

    Attributes:
        held: bytes held in evictable ranges; ``peak``: its maximum; ``evictions``: ranges
            dropped.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._starts: dict[str, list[int]] = {}  # path -> sorted starts
        self._ranges: dict[str, dict[int, bytes]] = {}  # path -> start -> data
        self._longest: dict[str, int] = {}  # path -> longest range ever held
        self._lru: OrderedDict[tuple[str, int], int] = OrderedDict()  # evictable -> size
        self.held = 0
        self.peak = 0
        self.evictions = 0

    def _find(self, path: str, pos: int) -> tuple[int, bytes] | None:
        """The range holding ``pos`` that reaches furthest, or None (caller holds the lock)."""
        starts = self._starts.get(path)
        if not starts:
            return None
        best = None
        i = bisect.bisect_right(starts, pos) - 1
        while i >= 0 and starts[i] + self._longest[path] > pos:
            data = self._ranges[path][starts[i]]
            if starts[i] + len(data) > pos and (
                best is None or starts[i] + len(data) > best[0] + len(best[1])
            ):
                best = (starts[i], data)
            i -= 1
        return best

    def covering(self, path: str, start: int, end: int) -> tuple[str, int] | None:
        """The key (path, start) of a held range holding all of ``[start, end)``, touched
        (most recently used), or None."""
        with self._lock:
            found = self._find(path, start)
            if found is None or found[0] + len(found[1]) < end:
                return None
            if (path, found[0]) in self._lru:
                self._lru.move_to_end((path, found[0]))
            return path, found[0]

    def add(self, path: str, start: int, data: bytes, pinned: bool = False, keep=()) -> None:
        """Hold ``data`` as bytes ``[start, start + len(data))`` of ``path``; evict the least
        recently used ranges, except ``keep`` ((path, start) keys), while over the bound.
        ``pinned`` ranges (an mp4's head and index) are never evicted nor counted."""
        with self._lock:
            ranges = self._ranges.setdefault(path, {})
            if start in ranges:  # the same start again: keep the longer one
                if len(ranges[start]) >= len(data):
                    return
                self._drop(path, start)
            ranges[start] = data
            bisect.insort(self._starts.setdefault(path, []), start)
            self._longest[path] = max(self._longest.get(path, 0), len(data))
            if pinned:
                return
            self._lru[(path, start)] = len(data)
            self.held += len(data)
            for key in list(self._lru):
                if self.held <= self.max_bytes:
                    break
                if key not in keep and key != (path, start):
                    self._drop(*key)
                    self.evictions += 1
            self.peak = max(self.peak, self.held)

    def _drop(self, path: str, start: int) -> None:
        del self._ranges[path][start]
        starts = self._starts[path]
        del starts[bisect.bisect_left(starts, start)]
        size = self._lru.pop((path, start), None)
        if size is not None:
            self.held -= size

    def holds(self, path: str, start: int) -> bool:
        """Whether a range starting at ``start`` of ``path`` is held."""
        with self._lock:
            return start in self._ranges.get(path, ())

    def read(self, path: str, pos: int, size: int) -> bytes | None:
        """Up to ``size`` bytes at ``pos`` from a held range, or None (``SpanFile``'s store)."""
        with self._lock:
            found = self._find(path, pos)
        if found is None:
            return None
        start, data = found
        return data[pos - start : pos - start + size]


class GopIndex:
    """Where each frame's GOP lies in one mp4, from its index.

    Args:
        index: the file's ``Mp4Index``.
    """

    def __init__(self, index: Mp4Index) -> None:
        self.index = index
        self.order = np.argsort(index.pts_s, kind="stable")  # presentation -> decode order
        self.sorted_pts = index.pts_s[self.order]
        ends = index.offsets + index.sizes
        count = len(index.offsets)
        keys = index.keyframes if len(index.keyframes) else np.array([0])
        reorder = REORDER_SAMPLES if (np.diff(index.pts_s) < 0).any() else 0  # B-frames
        last = np.minimum(np.append(keys[1:] - 1, count - 1) + reorder, count - 1)
        self.gop_start = np.array(
            [index.offsets[k : e + 1].min() for k, e in zip(keys, last, strict=True)]
        )
        self.gop_end = np.array([ends[k : e + 1].max() for k, e in zip(keys, last, strict=True)])
        self.keys = keys

    def ranges(self, timestamps: np.ndarray, half_frame_s: float) -> set[tuple[int, int]]:
        """Byte ranges [start, end) of the GOPs of the frames shown at ``timestamps``
        (seconds in the file; the nearest frame within ``half_frame_s``)."""
        n = np.searchsorted(self.sorted_pts, np.asarray(timestamps, float) - half_frame_s)
        samples = self.order[np.clip(n, 0, len(self.order) - 1)]
        gops = np.clip(np.searchsorted(self.keys, samples, side="right") - 1, 0, None)
        return {(int(self.gop_start[g]), int(self.gop_end[g])) for g in np.unique(gops)}


class GopCache:
    """Per-process GOP cache of a dataset's remote videos (see the module docstring).

    Args:
        meta: the dataset's metadata (``DatasetMeta``; its ``fs`` reads the files).
        max_mb: MiB of GOP bytes each process (DataLoader worker) keeps, least recently used
            first out; a batch's own GOPs are kept even beyond it until the next batch.
        counters: the loader's ``Counters``: ``wait_s`` gets the seconds spent waiting on
            the network (GOP fetches and fallback reads).

    Attributes:
        stats: this process's ``gop_fetches``, ``gop_bytes``, ``gop_hits``, ``index_bytes``,
            ``fallbacks`` and ``fallback_bytes``.
    """

    def __init__(self, meta, max_mb: float, counters) -> None:
        self.meta = meta
        self.max_bytes = int(max_mb * 2**20)
        self.counters = counters
        self._reset()

    def _reset(self) -> None:
        self._pid = os.getpid()
        self.cache = RangeCache(self.max_bytes)
        self.stats = dict.fromkeys(
            ("gop_fetches", "gop_bytes", "gop_hits", "index_bytes", "fallbacks", "fallback_bytes"),
            0,
        )
        self._indexes: dict[str, GopIndex | None] = {}
        self._sizes: dict[str, int] = {}
        self._lock = threading.Lock()
        self._retrier: ThreadPoolExecutor | None = None  # created on first use, per process
        self._prefetcher: ThreadPoolExecutor | None = None
        self._pending: dict[str, list[tuple[int, int, Future]]] = {}  # prefetches in flight
        self._keep: set = set()  # the latest fetch's ranges: never evicted by a prefetch
        self._ahead: dict[tuple[str, int], int] = {}  # prefetched, not yet fetched -> bytes

    def __getstate__(self):
        return {"meta": self.meta, "max_bytes": self.max_bytes, "counters": self.counters}

    def __setstate__(self, state) -> None:
        self.__dict__.update(state)
        self._reset()

    def _check_process(self) -> None:
        if self._pid != os.getpid():  # a forked worker starts empty
            self._reset()

    def _index(self, path: str) -> GopIndex | None:
        with self._lock:
            if path not in self._indexes:
                start = time.perf_counter()
                index = read_mp4_index(self.meta.fs, path, self.meta.retry_budget)
                self.counters.add(wait_s=time.perf_counter() - start)
                if index is not None:  # pinned: the decoder's opening reads
                    self.cache.add(path, 0, index.head, pinned=True)
                    self.cache.add(path, *index.moov, pinned=True)
                    self.stats["index_bytes"] += len(index.head) + len(index.moov[1])
                    self._sizes[path] = index.size
                self._indexes[path] = None if index is None else GopIndex(index)
            return self._indexes[path]

    def _gop_ranges(self, requests: list[tuple[str, np.ndarray]]) -> dict[tuple[str, int], int]:
        """(path, start) -> end of the GOPs of the frames at ``requests`` (unmerged)."""
        half_frame_s = 0.5 / self.meta.fps
        needed: dict[tuple[str, int], int] = {}
        for relative, timestamps in requests:
            path = self.meta.path(relative)
            gops = self._index(path)
            if gops is None:  # not an mp4 this parser reads: SpanFile's fallback blocks
                continue
            for start, end in gops.ranges(timestamps, half_frame_s):
                needed[(path, start)] = max(end, needed.get((path, start), end))
        return needed

    def _plan(self, needed: dict[tuple[str, int], int]):
        """Sort the GOP ranges ``needed`` ((path, start) -> end): (the keys of the held ranges
        covering some, the others merged where less than ``MERGE_GAP`` apart as (path, start,
        end), the prefetches in flight that cover the rest (futures), their keys)."""
        held, todo, waits, pending = set(), [], set(), set()
        for (path, start), end in needed.items():
            key = self.cache.covering(path, start, end)
            if key is not None:
                held.add(key)
                continue
            future = self._pending_cover(path, start, end)
            if future is None:
                todo.append((path, start, end))
            else:
                waits.add(future[0])
                pending.add(future[1])
        if todo:
            paths, starts, ends = (list(column) for column in zip(*todo, strict=True))
            todo = list(zip(*merge_offset_ranges(paths, starts, ends, MERGE_GAP), strict=True))
        return held, todo, waits, pending

    def _pending_cover(self, path: str, start: int, end: int):
        """(future, key) of a prefetch in flight whose range holds ``[start, end)``, or None."""
        with self._lock:
            for s, e, future in self._pending.get(path, ()):
                if s <= start and end <= e and not future.done():
                    return future, (path, s)
        return None

    def fetch(self, requests: list[tuple[str, np.ndarray]]) -> Future | None:
        """Make sure the GOPs of the frames at ``requests`` ((relative video path,
        timestamps in the file (T,) float64 seconds)) are cached: those that no held range
        covers and no prefetch in flight will bring are fetched, merged where less than
        ``MERGE_GAP`` apart, in one ``try_ranges`` call. The ranges whose attempt failed are
        requested again on a background thread within the dataset's ``retry_budget``; the
        returned future (None when none failed and no prefetch is awaited) is done once they
        and the awaited prefetches are cached (:meth:`cached` tells which requests are ready
        meanwhile).

        Raises:
            robopipe.retry.RemoteReadError: (from the future's ``result()``) a range failed
                on every attempt of the dataset's ``retry_budget`` (a short body is one
                failure), here or in the prefetch it waits for.
        """
        self._check_process()
        held, missing, waits, pending = self._plan(self._gop_ranges(requests))
        keep = held | pending | {(path, start) for path, start, _ in missing}
        for key in held | pending:  # asked for now: no longer ahead
            self._ahead.pop(key, None)
        self._keep = keep
        self.stats["gop_hits"] += len(held)
        failed = self._fetch_once(missing, keep, waited=True) if missing else []
        if not failed and not waits:
            return None
        if self._retrier is None:
            self._retrier = ThreadPoolExecutor(1, thread_name_prefix="gop-retry")
        return self._retrier.submit(self._retry, failed, keep, waits)

    def _fetch_once(self, ranges: list[tuple[str, int, int]], keep: set, waited=False) -> list:
        """One ``try_ranges`` attempt at ``ranges``, the bytes cached: the failed ones as
        (path, start, end, error). ``waited``: a batch waits for it (its seconds counted)."""
        paths, starts, ends = (list(column) for column in zip(*ranges, strict=True))
        start_s = time.perf_counter()
        blobs = try_ranges(self.meta.fs, paths, starts, ends, self.meta.retry_budget)
        if waited:
            seconds = time.perf_counter() - start_s
            self.counters.add(fetch_s=seconds, wait_s=seconds)
        failed = []
        for path, start, end, blob in zip(paths, starts, ends, blobs, strict=True):
            if isinstance(blob, BaseException):
                failed.append((path, start, end, blob))
            else:
                self._add(path, start, blob, keep)
        return failed

    def _retry(self, failed: list[tuple[str, int, int, BaseException]], keep: set, waits=()):
        """Read the ``failed`` ranges again, at once (each within the retry budget, so one
        429's ``Retry-After`` does not delay the others), then wait for ``waits``."""
        if failed:
            paths, starts, ends, errors = (list(column) for column in zip(*failed, strict=True))
            blobs = read_again(self.meta.fs, paths, starts, ends, errors, self.meta.retry_budget)
            for path, start, data in zip(paths, starts, blobs, strict=True):
                self._add(path, start, data, keep)
        for future in waits:
            future.result()

    def prefetch(self, requests: list[tuple[str, np.ndarray]]) -> bool:
        """Start fetching, in the background, the GOPs of the frames at ``requests`` (as
        :meth:`fetch`'s) that no held range covers and no prefetch in flight brings: one
        ``try_ranges`` call, its failed ranges retried within the dataset's ``retry_budget``,
        up to ``PREFETCH_THREADS`` such calls at once. The bytes go to the cache, below the
        latest :meth:`fetch`'s ranges in its LRU order; a later :meth:`fetch` of them waits
        for them. An error is raised only to a :meth:`fetch` that waits for the range.

        Returns:
            False, with nothing started, where these GOPs would take the bytes fetched ahead
            and not yet asked for by a :meth:`fetch` (:meth:`ahead_bytes`) beyond
            ``AHEAD_SHARE`` of the cache (unless none are); True otherwise.
        """
        self._check_process()
        _, missing, _, _ = self._plan(self._gop_ranges(requests))
        if not missing:
            return True
        size = sum(end - start for _, start, end in missing)
        ahead = self.ahead_bytes()
        if ahead and ahead + size > AHEAD_SHARE * self.max_bytes:
            return False
        for path, start, end in missing:
            self._ahead[(path, start)] = end - start
        with self._lock:
            if self._prefetcher is None:
                self._prefetcher = ThreadPoolExecutor(
                    PREFETCH_THREADS, thread_name_prefix="gop-prefetch"
                )
            future = self._prefetcher.submit(self._prefetch, missing)
            for path, start, end in missing:
                self._pending.setdefault(path, []).append((start, end, future))
        future.add_done_callback(lambda done: self._forget(done, missing))
        return True

    def ahead_bytes(self) -> int:
        """Bytes of the GOP ranges prefetched (in flight or held) that no :meth:`fetch` has
        asked for since; a range evicted or failed meanwhile no longer counts."""
        with self._lock:
            in_flight = {(p, s) for p, spans in self._pending.items() for s, _, _ in spans}
        for key in list(self._ahead):
            if key not in in_flight and not self.cache.holds(*key):
                del self._ahead[key]
        return sum(self._ahead.values())

    def _prefetch(self, ranges: list[tuple[str, int, int]]) -> None:
        keep = set(self._keep) | {(path, start) for path, start, _ in ranges}
        self._retry(self._fetch_once(ranges, keep), keep)

    def _forget(self, future: Future, ranges: list[tuple[str, int, int]]) -> None:
        """Drop a finished prefetch's ranges from those in flight."""
        with self._lock:
            for path, _, _ in ranges:
                kept = [p for p in self._pending.get(path, ()) if p[2] is not future]
                self._pending[path] = kept

    def _add(self, path: str, start: int, data: bytes, keep: set) -> None:
        with self._lock:  # counted first: whoever finds the range held finds it counted
            self.stats["gop_fetches"] += 1
            self.stats["gop_bytes"] += len(data)
        self.cache.add(path, start, data, keep=keep)

    def cached(self, requests: list[tuple[str, np.ndarray]]) -> bool:
        """Whether every GOP of the frames at ``requests`` is held now (e.g. while
        :meth:`fetch`'s future retries others)."""
        self._check_process()
        return all(
            self.cache.covering(path, start, end) is not None
            for (path, start), end in self._gop_ranges(requests).items()
        )

    def open(self, relative: str) -> SpanFile:
        """A file object over ``relative`` reading from the cache (a ``DecoderCache`` opener)."""
        self._check_process()
        path = self.meta.path(relative)
        self._index(path)
        budget = self.meta.retry_budget
        size = self._sizes.get(path) or file_size(self.meta.fs, path, budget)
        return GopFile(self.meta.fs, path, size, self.cache, self.stats, self.counters, budget)


class GopFile(SpanFile):
    """``SpanFile`` whose read that stops short at the end of a cached range is followed by
    one empty read.

    torchcodec fills its 64 KiB AVIO buffer by calling ``read()`` until the buffer is full or
    a read returns nothing (``AVIOFileLikeContext::read``), so after the end of a GOP's range
    it would read on past it (a fallback fetch) for bytes the decoder does not need. The empty
    read hands ffmpeg the short buffer instead; should ffmpeg then ask for the bytes at that
    position, the next read fetches them as usual.
    """

    _stop_at: int | None = None

    def read(self, size: int = -1) -> bytes:
        if self._stop_at is not None and self._stop_at == self.pos:
            self._stop_at = None
            return b""
        self._stop_at = None
        data = super().read(size)
        if size is not None and 0 < len(data) < size and self.pos < self.size:
            self._stop_at = self.pos
        return data

"""Episode prefetch for remote video: each episode's bytes in one large read, ahead of need.

A remote mp4 read through fsspec's ``readahead`` file costs a round trip and a 1 MiB block on
every random access. Here the mp4's index (``moov``: sample offsets, sizes, times, keyframes) is
read once per file and process, so each episode's bytes (from the keyframe before its
``from_timestamp`` to past its ``to_timestamp``) are one known byte range. Background threads
fetch those ranges (and the episode's data rows) a few episodes ahead of the loader, into a
``SpanStore``; decoders read the mp4 through ``SpanFile``, which serves reads from the store and
falls back to a 1 MiB block read (counted) for anything else (e.g. the first packets ffmpeg
probes when a decoder opens). Decoding is unchanged, so items are identical.
"""

from __future__ import annotations

import io
import struct
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from robopipe import retry
from robopipe.formats.v30_reader import file_size, read_ranges
from robopipe.mp4 import box_path, boxes, child, children, find_moov, sample_layout, table

HEAD_BYTES = 1 << 16  # first read of an mp4: ftyp and, in a faststart file, the moov's start
FALLBACK_BLOCK = 1 << 20  # a read outside every prefetched span fetches this much
FALLBACK_BLOCKS_KEPT = 4
SPAN_TAIL = 1 << 16  # bytes kept past an episode's last sample (demuxer read-ahead)
REORDER_SAMPLES = 4  # samples past the last needed one (decoders with frame reordering)


def fetch_range(
    fs, path: str, start: int, end: int, budget: retry.RetryBudget = retry.DEFAULT_BUDGET
) -> bytes:
    """Bytes ``[start, end)`` of ``path`` in one request of exactly those bytes
    (``robopipe.formats.v30_reader.read_ranges``: requested again after a transient error or
    a short body, within ``budget``).

    Raises:
        robopipe.retry.RemoteReadError: every attempt of ``budget`` failed.
    """
    (data,) = read_ranges(fs, [path], [start], [end], budget)
    return data


@dataclass
class Mp4Index:
    """A single-file (non-fragmented) mp4's video track: where each sample lies and when."""

    head: bytes  # the file's first HEAD_BYTES
    moov: tuple[int, bytes]  # (offset, bytes) of the moov box
    offsets: np.ndarray  # per sample (decode order), byte offset
    sizes: np.ndarray
    pts_s: np.ndarray  # presentation time, seconds (edit list applied)
    keyframes: np.ndarray  # sample indices (0-based) of sync samples, sorted
    size: int  # file size

    def span(self, from_s: float, to_s: float, margin_s: float) -> tuple[int, int]:
        """Byte range [start, end) holding every sample needed to decode the frames shown in
        ``[from_s - margin_s, to_s + margin_s]``: from the keyframe before the first one."""
        needed = np.flatnonzero((self.pts_s >= from_s - margin_s) & (self.pts_s <= to_s + margin_s))
        if not len(needed):
            return 0, 0
        first, last = int(needed.min()), int(needed.max())
        k = np.searchsorted(self.keyframes, first, side="right") - 1
        first = int(self.keyframes[k]) if k >= 0 else 0
        last = min(last + REORDER_SAMPLES, len(self.offsets) - 1)
        start = int(self.offsets[first : last + 1].min())
        end = int((self.offsets[first : last + 1] + self.sizes[first : last + 1]).max())
        return start, min(end + SPAN_TAIL, self.size)


def parse_moov(moov: bytes) -> dict | None:
    """The first video track's sample table from a moov box's bytes, or None (no video track,
    a fragmented file, or a layout this parser does not read)."""
    for kind, s, e in boxes(moov, 8):
        if kind != "trak":
            continue
        mdia = child(moov, s, e, "mdia")
        hdlr = mdia and child(moov, *mdia, "hdlr")
        if hdlr is None or moov[hdlr[0] + 8 : hdlr[0] + 12] != b"vide":
            continue
        mdhd = child(moov, *mdia, "mdhd")
        version = moov[mdhd[0]]
        (timescale,) = struct.unpack_from(">I", moov, mdhd[0] + (20 if version else 12))
        stbl = box_path(moov, *mdia, "minf", "stbl")
        if stbl is None:
            return None
        layout = sample_layout(moov, children(moov, *stbl))
        if layout is None:
            return None
        sizes, offsets = layout
        count = len(sizes)
        stts = table(moov, child(moov, *stbl, "stts"), ">u4", 2).astype(np.int64)
        deltas = np.repeat(stts[:, 1], stts[:, 0])[:count]
        dts = np.concatenate([[0], np.cumsum(deltas)[:-1]])
        ctts = child(moov, *stbl, "ctts")
        if ctts is not None:
            offsets_table = table(moov, ctts, ">i4", 2).astype(np.int64)
            shift = np.repeat(offsets_table[:, 1], offsets_table[:, 0])[:count]
            dts = dts + np.pad(shift, (0, count - len(shift)))
        elst = box_path(moov, s, e, "edts", "elst")
        if elst is not None:
            version = moov[elst[0]]
            (entries,) = struct.unpack_from(">I", moov, elst[0] + 4)
            for i in range(entries):
                if version:
                    (media_time,) = struct.unpack_from(">q", moov, elst[0] + 8 + 20 * i + 8)
                else:
                    (media_time,) = struct.unpack_from(">i", moov, elst[0] + 8 + 12 * i + 4)
                if media_time >= 0:
                    dts = dts - media_time
                    break
        stss = child(moov, *stbl, "stss")
        keyframes = (
            table(moov, stss, ">u4")[:, 0].astype(np.int64) - 1
            if stss is not None
            else np.arange(count)
        )
        return {
            "offsets": offsets,
            "sizes": sizes,
            "pts_s": dts / float(timescale),
            "keyframes": np.sort(keyframes),
        }
    return None


def read_mp4_index(
    fs, path: str, budget: retry.RetryBudget = retry.DEFAULT_BUDGET
) -> Mp4Index | None:
    """``path``'s video track index, read with at most 3 requests (each retried within
    ``budget``); None where it cannot be read (no moov before a fragment, no video track)."""
    size = file_size(fs, path, budget)
    head = fetch_range(fs, path, 0, min(HEAD_BYTES, size), budget)

    def read_at(start: int, end: int) -> bytes:
        return head[start:end] if end <= len(head) else fetch_range(fs, path, start, end, budget)

    found = find_moov(read_at, size)
    if found is None:
        return None
    pos, moov = found
    try:
        table = parse_moov(bytes(moov))
    except (struct.error, ValueError, IndexError, TypeError):
        table = None  # a layout this parser does not read: read as a plain file
    if table is None:
        return None
    return Mp4Index(head=bytes(head), moov=(pos, bytes(moov)), size=size, **table)


class SpanStore:
    """Byte ranges of remote files held in memory: (path, key) -> (start, bytes), thread-safe.

    ``held`` is the bytes held under episode keys (what the prefetch bound counts); ``peak``
    its maximum so far.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spans: dict[str, dict[object, tuple[int, bytes]]] = {}
        self.held = 0
        self.peak = 0

    def add(self, path: str, key, start: int, data: bytes, counted: bool = True) -> None:
        with self._lock:
            self._spans.setdefault(path, {})[key] = (start, data)
            if counted:
                self.held += len(data)
                self.peak = max(self.peak, self.held)

    def drop(self, path: str, key, counted: bool = True) -> None:
        with self._lock:
            span = self._spans.get(path, {}).pop(key, None)
            if span is not None and counted:
                self.held -= len(span[1])

    def read(self, path: str, pos: int, size: int) -> bytes | None:
        """Up to ``size`` bytes at ``pos`` from a span holding ``pos`` (the one reaching
        furthest), or None."""
        with self._lock:
            best = None
            for start, data in self._spans.get(path, {}).values():
                if start <= pos < start + len(data) and (
                    best is None or start + len(data) > best[0] + len(best[1])
                ):
                    best = (start, data)
        if best is None:
            return None
        start, data = best
        return data[pos - start : pos - start + size]


class SpanFile(io.RawIOBase):
    """A read-only file over ``fs``'s ``path`` that reads from ``store`` first; a miss fetches
    a ``FALLBACK_BLOCK`` (kept in a small LRU) and counts it in ``stats["fallbacks"]`` (and
    its seconds in ``counters``' ``wait_s``, where ``counters`` is given), retried within
    ``budget``."""

    def __init__(
        self,
        fs,
        path: str,
        size: int,
        store: SpanStore,
        stats: dict,
        counters=None,
        budget: retry.RetryBudget = retry.DEFAULT_BUDGET,
    ) -> None:
        super().__init__()
        self.fs, self.path, self.size, self.budget = fs, path, size, budget
        self.store, self.stats, self.counters = store, stats, counters
        self.pos = 0
        self._blocks: OrderedDict[int, bytes] = OrderedDict()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            size = self.size - self.pos
        size = min(size, self.size - self.pos)
        if size <= 0:
            return b""
        data = self.store.read(self.path, self.pos, size)
        if data is None:
            data = self._fallback(self.pos, size)
        self.pos += len(data)
        return data

    def readinto(self, buffer) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def _fallback(self, pos: int, size: int) -> bytes:
        for start, block in self._blocks.items():
            if start <= pos < start + len(block):
                self._blocks.move_to_end(start)
                return block[pos - start : pos - start + size]
        start_s = time.perf_counter()
        block = fetch_range(
            self.fs, self.path, pos, min(pos + FALLBACK_BLOCK, self.size), self.budget
        )
        if self.counters is not None:
            self.counters.add(wait_s=time.perf_counter() - start_s)
        self.stats["fallbacks"] = self.stats.get("fallbacks", 0) + 1
        self.stats["fallback_bytes"] = self.stats.get("fallback_bytes", 0) + len(block)
        self._blocks[pos] = block
        while len(self._blocks) > FALLBACK_BLOCKS_KEPT:
            self._blocks.popitem(last=False)
        return block[:size]


class Prefetcher:
    """Fetches items (episodes) of a known schedule ahead of need on background threads,
    holding at most ``max_bytes`` of fetched, unreleased items ahead of the one needed.

    Args:
        schedule: items in the order they are first needed.
        size_of: item -> its bytes (known before fetching: the spans' lengths).
        fetch: item -> result (runs on a pool thread).
        max_bytes: an item is fetched ahead only while held + its size stays within this; the
            item needed now is fetched whatever is held (items still in use are never dropped).
        threads: pool threads.
    """

    def __init__(
        self,
        schedule: Sequence,
        size_of: Callable[[object], int],
        fetch: Callable[[object], object],
        max_bytes: int,
        threads: int = 2,
    ) -> None:
        self.schedule = list(schedule)
        self.size_of = size_of
        self.fetch = fetch
        self.max_bytes = max_bytes
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="prefetch")
        self._futures: dict[object, Future] = {}
        self._seen: set = set()  # items submitted once (never fetched twice)
        self._sizes: dict[object, int] = {}
        self._next = 0  # schedule position of the next item to submit
        self.held = 0  # bytes of submitted, unreleased items
        self.peak = 0

    def _submit(self, item) -> None:
        self._seen.add(item)
        size = self._sizes[item] = self.size_of(item)
        self.held += size
        self.peak = max(self.peak, self.held)
        self._futures[item] = self._pool.submit(self.fetch, item)

    def _top_up(self) -> None:
        while self._next < len(self.schedule):
            item = self.schedule[self._next]
            if item not in self._seen:
                if self.held + self.size_of(item) > self.max_bytes:
                    return
                self._submit(item)
            self._next += 1

    def get(self, item):
        """``item``'s result (fetching it now if it was not fetched ahead)."""
        if item not in self._seen:
            self._submit(item)
        self._top_up()
        return self._futures[item].result()

    def release(self, item) -> None:
        """``item`` is no longer needed: its bytes leave the bound."""
        future = self._futures.pop(item, None)
        if future is not None:
            self.held -= self._sizes.pop(item)
        self._top_up()

    def close(self) -> None:
        """Cancel the fetches not started; return at once, without waiting for the ones
        running (each ends within its read's timeouts, then its thread exits).

        A stream given up unfinished is closed by its generator's finaliser, which the cyclic
        garbage collector may run on any thread, fsspec's event loop thread included: waiting
        there for fetches that wait for that loop deadlocked every read of the process and
        kept the interpreter from exiting (issue #39)."""
        self._pool.shutdown(wait=False, cancel_futures=True)

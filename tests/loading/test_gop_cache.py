"""GOP cache of the map-style loader (robopipe.loading.gop_cache): range arithmetic, the
eviction bound, bytes equal to the file's, and remote items equal to local ones."""

import time
from pathlib import Path

import numpy as np
import pytest
import torch
from fsspec.implementations.local import LocalFileSystem
from test_prefetch import assert_items_equal, needs_nginx, videos
from torch.utils.data import DataLoader

from robopipe.bench import servers
from robopipe.bench.latency import delaying_proxy, through
from robopipe.loading import MapDataset, collate, read_meta
from robopipe.loading.decoder import Counters
from robopipe.loading.gop_cache import (
    AHEAD_SHARE,
    MERGE_GAP,
    GopCache,
    GopFile,
    GopIndex,
    RangeCache,
)
from robopipe.loading.prefetch import read_mp4_index


def test_range_cache_reads_the_range_holding_a_position():
    cache = RangeCache(max_bytes=100)
    cache.add("f", 10, b"abcdefghij")  # bytes 10..19
    cache.add("f", 15, b"FGHIJKLMNO")  # bytes 15..24, overlapping
    assert cache.read("f", 9, 4) is None
    assert cache.read("f", 10, 3) == b"abc"
    assert cache.read("f", 16, 100) == b"GHIJKLMNO"  # the range reaching furthest
    assert cache.read("f", 24, 5) == b"O"
    assert cache.read("f", 25, 1) is None
    assert cache.read("g", 12, 1) is None
    assert cache.covering("f", 12, 21) is None  # no single range holds bytes 12 to 20
    assert cache.covering("f", 12, 20) == ("f", 10)
    assert cache.covering("f", 16, 25) == ("f", 15)
    assert cache.covering("f", 10, 20) == ("f", 10)


def test_range_cache_evicts_least_recently_used_to_its_bound():
    cache = RangeCache(max_bytes=30)
    cache.add("f", 0, b"x" * 60, pinned=True)  # an mp4 index: neither counted nor evicted
    for start in (100, 200, 300):
        cache.add("f", start, bytes(10))
    assert cache.covering("f", 100, 110)  # touch: now the most recently used
    cache.add("f", 400, bytes(10))
    assert cache.held == 30 and cache.evictions == 1
    assert cache.read("f", 200, 1) is None  # the least recently used went
    assert cache.read("f", 100, 1) == b"\0" and cache.read("f", 5, 2) == b"xx"
    # a batch's own ranges (keep) stay even beyond the bound
    keep = {("f", 100), ("f", 300), ("f", 400), ("f", 500)}
    cache.add("f", 500, bytes(25), keep=keep)
    assert cache.held == 55 and all(cache.read("f", s, 1) for s in (100, 300, 400, 500))
    cache.add("f", 600, bytes(5))
    assert cache.held <= 30 and cache.read("f", 600, 1) == b"\0"
    assert cache.peak == 55


def test_gop_ranges_hold_each_frames_gop(larger):
    fs = LocalFileSystem()
    path = str(videos(larger)[0])
    index = read_mp4_index(fs, path)
    gops = GopIndex(index)
    ends = index.offsets + index.sizes
    for sample in range(len(index.offsets)):
        ((start, end),) = gops.ranges(np.array([index.pts_s[sample]]), 0.01)
        key = index.keyframes[index.keyframes <= sample].max()
        following = index.keyframes[index.keyframes > sample]
        last = following.min() - 1 if len(following) else len(index.offsets) - 1
        assert start == index.offsets[key]  # from its keyframe ...
        assert end == ends[key : last + 1].max()  # ... to the sample before the next one
        assert start <= index.offsets[sample] and ends[sample] <= end


def test_cached_bytes_equal_the_files(larger):
    meta = read_meta(larger)
    cache = GopCache(meta, max_mb=0.001, counters=Counters())  # 1 KiB: below one GOP
    relative = meta.video_file(meta.video_keys[0], 0)
    path = meta.path(relative)
    data = Path(path).read_bytes()
    gops = GopIndex(read_mp4_index(meta.fs, path))
    f = cache.open(relative)
    assert isinstance(f, GopFile)
    ends = meta.episodes[f"videos/{meta.video_keys[0]}/to_timestamp"]
    for n, t in enumerate(np.asarray(ends[1:4], float) - 0.5, start=1):
        ((start, end),) = gops.ranges(np.array([t]), 0.5 / meta.fps)
        assert start >= 1 << 16  # past the pinned head
        cache.fetch([(relative, np.array([t]))])
        assert cache.stats["gop_fetches"] == n
        # only the latest call's range is held: it stays beyond the bound, the older go
        assert cache.cache.held == end - start > 1024 and cache.cache.evictions == n - 1
        assert cache.cache.read(path, start, end - start) == data[start:end]
        f.seek(start)
        assert f.read(end - start) == data[start:end]
        cache.fetch([(relative, np.array([t]))])  # held already: no request
        assert cache.stats["gop_hits"] == n and cache.stats["gop_fetches"] == n
    f.seek(0)
    assert f.read(len(data) + 10) == data[: 1 << 16]  # the pinned head
    assert cache.stats["fallbacks"] == 0
    f.seek(len(data) - 7)
    assert f.read() == data[-7:]  # a fallback block, counted
    assert cache.stats["fallbacks"] == 1


def test_gop_file_stops_once_at_a_ranges_end(larger):
    meta = read_meta(larger)
    cache = GopCache(meta, max_mb=1, counters=Counters())
    relative = meta.video_file(meta.video_keys[0], 0)
    path = meta.path(relative)
    data = Path(path).read_bytes()
    at = 100_000  # past the pinned head and before the moov
    cache.cache.add(path, at, data[at : at + 100])
    f = cache.open(relative)
    f.seek(at + 50)
    assert f.read(200) == data[at + 50 : at + 100]  # short: the range ends
    assert f.read(150) == b""  # torchcodec stops filling its buffer here
    assert f.read(150) == data[at + 100 : at + 250]  # asked again: fetched (fallback)
    assert cache.stats["fallbacks"] == 1


def test_gops_closer_than_the_merge_gap_are_one_request(larger):
    meta = read_meta(larger)
    cache = GopCache(meta, max_mb=64, counters=Counters())
    relative = meta.video_file(meta.video_keys[0], 0)
    path = meta.path(relative)
    gops = GopIndex(read_mp4_index(meta.fs, path))
    ts = np.asarray(meta.episodes[f"videos/{meta.video_keys[0]}/from_timestamp"][1:], float)
    ts = np.concatenate([ts, ts + 1.0])  # a 1 s window: GOPs a few KiB apart
    ranges = sorted(gops.ranges(ts, 0.5 / meta.fps))
    assert len(ranges) == len(ts) and all(
        b[0] - a[1] < MERGE_GAP for a, b in zip(ranges, ranges[1:], strict=False)
    )
    cache.fetch([(relative, ts)])
    assert cache.stats["gop_fetches"] == 1  # one range, gaps included
    assert (
        cache.cache.read(path, ranges[0][0], 1 << 30)
        == Path(path).read_bytes()[ranges[0][0] : ranges[-1][1]]
    )


@needs_nginx
@pytest.mark.parametrize("gop_cache_mb", [64, 0.002])
def test_remote_items_equal_local_ones(larger, gop_cache_mb):
    local = MapDataset(larger)
    order = np.random.default_rng(3).permutation(len(local))[:40].tolist()
    with (
        servers.serve_nginx(larger.parent) as server,
        delaying_proxy(server.url, 20) as proxy,
    ):
        remote = MapDataset(
            through(proxy, f"{server.url}/{larger.name}"),
            gop_cache_mb=gop_cache_mb,
        )
        assert remote.gops is not None
        items = remote.__getitems__(order[:8])  # in this process: its cache's stats
        stats = dict(remote.gops.stats)
        # this process's requests come before a worker is forked: a HEAD this process sent
        # after such a worker had exited went unanswered until aiohttp's 300 s timeout
        loader = DataLoader(remote, batch_size=8, sampler=order, num_workers=1, collate_fn=collate)
        batches = list(loader)
        totals = proxy.totals()
    expected = collate([local[i] for i in order])
    got = {key: torch.cat([b[key] for b in batches]) for key in batches[0] if key != "task"}
    for key, value in got.items():
        assert torch.equal(value, expected[key]), key
    for i, item in zip(order[:8], items, strict=True):
        assert_items_equal(item, local[i])
    cameras = len(local.meta.video_keys)
    assert 0 < stats["gop_fetches"] <= 8 * cameras and stats["fallbacks"] <= cameras
    # a few index requests per file and process, then at most one per GOP: not one per read
    assert totals["requests"] <= 2 * (len(order) + 8) * cameras
    assert remote.counters.totals()["wait_s"] > 0


@needs_nginx
def test_remote_windows_equal_local_ones(larger):
    deltas = [-2.0, -1.0, 0.0]  # the sarm mode's shape: every camera and the state, 1 s apart
    keys = [*read_meta(larger).video_keys, "observation.state"]
    options = dict(delta_timestamps=dict.fromkeys(keys, deltas))
    local = MapDataset(larger, **options)
    order = np.random.default_rng(1).permutation(len(local))[:12].tolist()
    with servers.serve_nginx(larger.parent) as server:
        remote = MapDataset(f"{server.url}/{larger.name}", **options)
        items = remote.__getitems__(order)
    assert items[0][keys[0]].shape[0] == 3
    for i, item in zip(order, items, strict=True):
        assert_items_equal(item, local[i])
    assert remote.gops.stats["fallbacks"] <= len(local.meta.video_keys)


def test_gop_cache_mb_is_checked(larger):
    with pytest.raises(ValueError, match="gop_cache_mb"):
        MapDataset(larger, gop_cache_mb=-1)
    assert MapDataset(larger).gops is None  # a local path reads the files directly


def test_a_fetch_after_a_prefetch_asks_for_nothing_more(larger):
    meta = read_meta(larger)
    cache = GopCache(meta, max_mb=64, counters=Counters())
    relative = meta.video_file(meta.video_keys[0], 0)
    ts = np.asarray(meta.episodes[f"videos/{meta.video_keys[0]}/from_timestamp"][1:4], float)
    requests = [(relative, ts + 0.2)]
    cache.prefetch(requests)
    waiting = cache.fetch(requests)  # in flight or done: waited for, not asked again
    if waiting is not None:
        waiting.result(timeout=30)
    assert cache.cached(requests)
    fetched = cache.stats["gop_fetches"]
    assert fetched >= 1
    cache.prefetch(requests)  # held: nothing to do
    assert cache.fetch(requests) is None and cache.stats["gop_fetches"] == fetched


def test_a_fetch_waits_for_the_prefetch_that_brings_its_gops(larger, monkeypatch):
    import threading

    from robopipe.loading import gop_cache

    meta = read_meta(larger)
    cache = GopCache(meta, max_mb=64, counters=Counters())
    relative = meta.video_file(meta.video_keys[0], 0)
    ts = np.asarray(meta.episodes[f"videos/{meta.video_keys[0]}/from_timestamp"][3:4], float)
    requests = [(relative, ts + 0.2)]  # past the pinned head
    release, calls = threading.Event(), []
    real = gop_cache.try_ranges

    def slow(*args):  # the prefetch's attempt is held until released
        calls.append(args[1])
        if len(calls) == 1:
            assert release.wait(30)
        return real(*args)

    monkeypatch.setattr(gop_cache, "try_ranges", slow)
    cache.prefetch(requests)
    waiting = cache.fetch(requests)
    assert waiting is not None and not waiting.done() and not cache.cached(requests)
    release.set()
    waiting.result(timeout=30)
    assert cache.cached(requests) and len(calls) == 1  # one request, the prefetch's


def test_look_ahead_stops_at_its_share_of_the_cache(larger):
    meta = read_meta(larger)
    relative = meta.video_file(meta.video_keys[0], 0)
    gops = GopIndex(read_mp4_index(meta.fs, meta.path(relative)))
    ts = np.asarray(meta.episodes[f"videos/{meta.video_keys[0]}/from_timestamp"][1:4], float) + 0.2
    requests = [[(relative, ts[n : n + 1])] for n in range(3)]  # one GOP each
    sizes = [end - start for ((start, end),) in (gops.ranges(t, 0.05) for ((_, t),) in requests)]
    share = sizes[0] + sizes[1]  # room for the first two GOPs ahead, not the third
    cache = GopCache(meta, max_mb=share / AHEAD_SHARE / 2**20, counters=Counters())
    assert cache.prefetch(requests[0]) and cache.prefetch(requests[1])
    assert cache.ahead_bytes() == share  # in flight or held, not asked for yet
    assert not cache.prefetch(requests[2])  # refused: nothing started
    assert cache.ahead_bytes() == share
    for request in requests[:2]:  # their batches come: no longer ahead
        waiting = cache.fetch(request)
        if waiting is not None:
            waiting.result(timeout=30)
    assert cache.ahead_bytes() == 0 and cache.prefetch(requests[2])
    assert cache.ahead_bytes() == sizes[2]
    for _ in range(300):  # until the prefetch has brought it
        if cache.cached(requests[2]):
            break
        time.sleep(0.1)
    cache.cache.max_bytes = 0  # a fetch of another GOP evicts every range but its own ...
    other = meta.episodes[f"videos/{meta.video_keys[0]}/from_timestamp"][5:6]
    cache.fetch([(relative, np.asarray(other, float) + 0.2)])
    assert not cache.cached(requests[2]) and cache.ahead_bytes() == 0  # ... uncounted


def test_the_failed_ranges_of_a_fetch_are_read_again_at_once(larger, monkeypatch):
    import threading

    from robopipe.formats import v30_reader
    from robopipe.loading import gop_cache

    meta = read_meta(larger)
    cache = GopCache(meta, max_mb=64, counters=Counters())
    relative = meta.video_file(meta.video_keys[0], 0)
    ts = np.asarray(meta.episodes[f"videos/{meta.video_keys[0]}/from_timestamp"][[1, 4]], float)
    requests = [(relative, ts + 0.2)]  # two GOPs far apart: two ranges
    failed_once = lambda fs, paths, *_: [ConnectionResetError("reset")] * len(paths)  # noqa: E731
    monkeypatch.setattr(gop_cache, "try_ranges", failed_once)
    both = threading.Barrier(2, timeout=10)  # broken unless both are read again together
    real = v30_reader.read_range

    def read_range(*args, **kwargs):
        both.wait()
        return real(*args, **kwargs)

    monkeypatch.setattr(v30_reader, "read_range", read_range)
    retrying = cache.fetch(requests)
    assert retrying is not None and not cache.cached(requests)
    retrying.result(timeout=30)  # a BrokenBarrierError had they been read one after the other
    assert cache.cached(requests) and cache.stats["gop_fetches"] == 2

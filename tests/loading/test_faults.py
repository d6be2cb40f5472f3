"""Remote reads through injected faults (robopipe.retry, robopipe.bench.latency.Faults): every
kind is survived with identical bytes; a fault beyond the budget stops the read within the
budget with one line naming the URL, and stops a DataLoader's workers without a hang; with the
default budget a stalled response is abandoned after the first-byte timeout, a stalled range
is hedged after the p95, and a loader reads through stalls without waiting out a read timeout."""

import dataclasses
import gc
import time

import numpy as np
import pyarrow.parquet as pq
import pytest
from test_prefetch import assert_items_equal, needs_nginx
from torch.utils.data import DataLoader

from robopipe import retry
from robopipe.bench import servers
from robopipe.bench.latency import FAULT_KINDS, Faults, delaying_proxy
from robopipe.errors import DatasetError
from robopipe.formats.v30_reader import (
    cat_file,
    open_data_file,
    open_file,
    open_url,
    read_meta,
    read_ranges,
)
from robopipe.loading import MapDataset, StreamingDataset, collate
from robopipe.retry import DEFAULT_BUDGET, RemoteReadError, RetryBudget, retries

BUDGET = RetryBudget(attempts=20, seconds=60, read_timeout_s=0.5)
STALL_S = 1.5  # longer than BUDGET's read timeout


@pytest.fixture(scope="module")
def nginx(larger):
    with servers.serve_nginx(larger.parent) as server:
        yield server


@needs_nginx
@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_each_fault_kind_is_survived_with_identical_bytes(larger, nginx, kind):
    budget = dataclasses.replace(BUDGET, hedge=False)  # each fault is retried, not hedged
    mp4 = sorted(larger.glob("videos/*/*/*.mp4"))[0]
    data = mp4.read_bytes()
    parquet = sorted(larger.glob("data/*/*.parquet"))[0]
    relative = mp4.relative_to(larger.parent).as_posix()
    starts = [int(s) for s in np.linspace(0, len(data) - 7000, 24)]
    ends = [s + 4000 + 97 * i for i, s in enumerate(starts)]
    before = retries()
    faults = Faults(0.3, (kind,), stall_s=STALL_S, retry_after_s=0, seed=1)
    with delaying_proxy(nginx.url, 4, faults) as proxy:
        fs, _ = open_url(proxy.url, None, budget)
        url = f"{proxy.url}/{relative}"
        got = read_ranges(fs, [url] * len(starts), starts, ends, budget)
        whole = cat_file(fs, url, budget)
        parquet_url = f"{proxy.url}/{parquet.relative_to(larger.parent).as_posix()}"
        with open_file(fs, parquet_url, budget, block_size=4096) as f:
            table = pq.ParquetFile(f).read()
        injected = proxy.totals()[f"faults_{kind}"]
    assert got == [data[s:e] for s, e in zip(starts, ends, strict=True)]
    assert whole == data
    assert table.equals(pq.read_table(parquet))
    assert injected > 0
    assert retries() - before >= injected  # each fault cost its read one attempt


@needs_nginx
@pytest.mark.parametrize("cls", [MapDataset, StreamingDataset])
def test_loaders_read_identical_items_through_mixed_faults(larger, nginx, cls):
    local = MapDataset(larger)
    faults = Faults(0.1, stall_s=STALL_S, retry_after_s=0, seed=2)
    with delaying_proxy(nginx.url, 4, faults) as proxy:
        url = f"{proxy.url}/{larger.name}"
        if cls is StreamingDataset:  # it builds its batches itself
            remote, batch_size = cls(url, retry_budget=BUDGET, batch_size=8), None
        else:
            remote, batch_size = cls(url, retry_budget=BUDGET), 8
        kwargs = dict(batch_size=batch_size, num_workers=2, collate_fn=collate)
        items = [
            {k: v[i] for k, v in batch.items()}
            for batch in DataLoader(remote, **kwargs)
            for i in range(len(batch["index"]))
        ]
        injected = sum(v for k, v in proxy.totals().items() if k.startswith("faults_"))
    assert injected > 0
    assert sorted(int(item["index"]) for item in items) == list(range(len(local)))
    for item in items:
        assert_items_equal(item, local[int(item["index"])])


def opening_requests(url: str) -> int:
    """Requests that opening a MapDataset at ``url`` (behind a fresh proxy) makes."""
    with delaying_proxy(url) as proxy:
        MapDataset(f"{proxy.url}/{url.rsplit('/', 1)[-1]}")
        return proxy.totals()["requests"]


@needs_nginx
def test_faults_beyond_the_budget_stop_the_workers_with_one_line(larger, nginx):
    opening = opening_requests(f"{nginx.url}/{larger.name}")
    budget = RetryBudget(attempts=4, seconds=3, read_timeout_s=0.5)
    faults = Faults(1.0, ("503", "stall"), stall_s=STALL_S, retry_after_s=0, start_after=opening)
    with delaying_proxy(nginx.url, 0, faults) as proxy:
        remote = MapDataset(f"{proxy.url}/{larger.name}", retry_budget=budget)
        loader = DataLoader(remote, batch_size=8, num_workers=2, collate_fn=collate, timeout=60)
        batches = iter(loader)
        workers = list(batches._workers)
        start = time.monotonic()
        with pytest.raises(RemoteReadError) as caught:
            next(batches)
        took = time.monotonic() - start
    message = str(caught.value)
    line = message.strip().splitlines()[-1]
    assert "gave up after" in line and proxy.url in line and "(budget 4 attempts, 3 s)" in line
    assert "Error" in line.rsplit("): ", 1)[-1]  # the last error's type and message
    # within the budget: 3 s of attempts, plus a last attempt's read timeout and the workers' start
    assert took < budget.seconds + budget.read_timeout_s + 20
    del caught, batches, loader  # the iterator shuts its workers down
    gc.collect()
    deadline = time.monotonic() + 30
    while any(w.is_alive() for w in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(w.is_alive() for w in workers)  # no worker hangs on a stalled read


@needs_nginx
def test_a_data_file_whose_reads_give_up_is_the_one_line_not_a_bad_parquet(larger, nginx):
    relative = sorted(larger.glob("data/*/*.parquet"))[0].relative_to(larger).as_posix()
    # 503s end at once: a slow answer of a loaded machine must not give up the metadata reads
    budget = RetryBudget(attempts=2, seconds=3, read_timeout_s=10)
    with delaying_proxy(nginx.url) as proxy:  # the requests reading the metadata
        meta = read_meta(f"{proxy.url}/{larger.name}", retry_budget=budget)
        reading_meta = proxy.totals()["requests"]
    faults = Faults(1.0, ("503",), retry_after_s=0, start_after=reading_meta)
    with delaying_proxy(nginx.url, 0, faults) as proxy:
        meta = read_meta(f"{proxy.url}/{larger.name}", retry_budget=budget)
        with pytest.raises(RemoteReadError) as caught:
            open_data_file(meta, relative)
    assert not isinstance(caught.value, DatasetError)
    assert relative in str(caught.value) and "gave up after" in str(caught.value)


STALLED_S = 2 * DEFAULT_BUDGET.read_timeout_s  # as the benchmark's: beyond any client timeout


def first_request_stalls() -> Faults:
    """Faults that stall the first request (for ``STALLED_S``) and pass the next ten."""
    for seed in range(1000):
        draws = Faults(0.5, ("stall",), seed=seed)
        if [draws.draw() for _ in range(11)] == ["stall"] + [None] * 10:
            return Faults(0.5, ("stall",), stall_s=STALLED_S, seed=seed)
    raise AssertionError("no seed stalls the first request only")


@needs_nginx
def test_a_stalled_response_is_abandoned_after_the_first_byte_timeout(larger, nginx):
    parquet = sorted(larger.glob("data/*/*.parquet"))[0]
    relative = parquet.relative_to(larger.parent).as_posix()
    before = retries()
    with delaying_proxy(nginx.url, 0, first_request_stalls()) as proxy:
        fs, _ = open_url(proxy.url)  # the default budget
        start = time.monotonic()
        data = cat_file(fs, f"{proxy.url}/{relative}")
        took = time.monotonic() - start
        stalled = proxy.totals()["faults_stall"]
    assert data == parquet.read_bytes()
    assert stalled == 1 and retries() - before == 1
    # abandoned at the first-byte timeout (5 s), not the read timeout (30 s) nor the stall
    assert DEFAULT_BUDGET.first_byte_timeout_s <= took < DEFAULT_BUDGET.first_byte_timeout_s + 3


@needs_nginx
def test_a_stalled_range_is_hedged_after_the_p95_without_a_retry(larger, nginx, monkeypatch):
    monkeypatch.setattr(retry, "LATENCIES", retry.LatencyTracker())  # this test's latencies
    mp4 = sorted(larger.glob("videos/*/*/*.mp4"))[0]
    data = mp4.read_bytes()
    relative = mp4.relative_to(larger.parent).as_posix()
    starts = [int(s) for s in np.linspace(0, len(data) - 5000, 30)]
    ends = [s + 4000 for s in starts]
    with delaying_proxy(nginx.url, 4) as proxy:  # p95 of these ranges: a few ms
        fs, _ = open_url(proxy.url)
        read_ranges(fs, [f"{proxy.url}/{relative}"] * 30, starts, ends)
    before, hedges = retries(), retry.hedges()
    with delaying_proxy(nginx.url, 4, first_request_stalls()) as proxy:
        fs, _ = open_url(proxy.url)
        start = time.monotonic()
        got = read_ranges(fs, [f"{proxy.url}/{relative}"] * 3, starts[:3], ends[:3])
        took = time.monotonic() - start
        stalled = proxy.totals()["faults_stall"]
    assert got == [data[s:e] for s, e in zip(starts[:3], ends[:3], strict=True)]
    assert stalled == 1 and retry.hedges() - hedges == 1 and retries() == before
    assert took < DEFAULT_BUDGET.first_byte_timeout_s - 2  # a p95 and a round trip, not the 5 s


@needs_nginx
def test_map_loader_reads_identical_items_through_stalls_with_the_defaults(
    larger, nginx, monkeypatch
):
    monkeypatch.setattr(retry, "LATENCIES", retry.LatencyTracker())  # workers start unknowing
    local = MapDataset(larger, episodes=[0, 1])
    opening = opening_requests(f"{nginx.url}/{larger.name}")
    faults = Faults(0.1, ("stall",), stall_s=STALLED_S, seed=4, start_after=opening)
    with delaying_proxy(nginx.url, 4, faults) as proxy:
        remote = MapDataset(f"{proxy.url}/{larger.name}", episodes=[0, 1])  # default budget
        loader = DataLoader(remote, batch_size=8, num_workers=2, collate_fn=collate, timeout=60)
        start = time.monotonic()
        batches = list(loader)
        took = time.monotonic() - start
        stalled = proxy.totals()["faults_stall"]
    items = [{k: v[i] for k, v in b.items()} for b in batches for i in range(len(b["index"]))]
    assert stalled > 0
    assert took < STALLED_S / 2  # no stall was waited out to its read timeout
    assert len(items) == len(local)
    for position, item in enumerate(items):
        assert_items_equal(item, local[position])

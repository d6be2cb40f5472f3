"""fsspec's event loop never waits for the reads it serves (issue #39).

A stream given up before its end is closed by its generator's finaliser, which the cyclic
garbage collector may run on any thread; on fsspec's event loop thread, a close that waited
for the prefetch threads' reads, which wait for that loop, deadlocked every read of the
process (the next test hung in ``cat_file``) and kept the interpreter from exiting.
"""

import asyncio
import threading
import time

import fsspec.asyn
import pytest

from robopipe.bench.latency import delaying_proxy, through
from robopipe.bench.servers import QuietServer, RangeRequestHandler
from robopipe.formats.v30_reader import cat_file
from robopipe.loading import StreamingDataset
from robopipe.loading.prefetch import Prefetcher

LATENCY_MS = 300  # every read is in flight for 0.3 s at least
QUICK_S = 5.0


def test_closing_the_prefetcher_does_not_wait_for_a_running_fetch():
    started, go = threading.Event(), threading.Event()

    def fetch(item):
        started.set()
        go.wait(30)
        return item

    prefetcher = Prefetcher([0, 1, 2], lambda item: 1, fetch, max_bytes=3, threads=1)
    prefetcher._top_up()  # 0 runs, 1 and 2 wait in the queue
    assert started.wait(10)
    start = time.perf_counter()
    prefetcher.close()
    took = time.perf_counter() - start
    go.set()
    assert took < 1.0
    assert prefetcher._futures[0].result(timeout=10) == 0  # the running fetch ends on its own
    assert prefetcher._futures[2].cancelled()


@pytest.fixture
def slow_url(rollover):
    """``http://127.0.0.1:<proxy>/rollover``: Python's server behind a delaying proxy."""
    v30 = rollover[1]

    def handler(*args, **kwargs):
        return RangeRequestHandler(*args, directory=str(v30.parent), **kwargs)

    server = QuietServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    origin = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with delaying_proxy(origin, LATENCY_MS) as proxy:
            yield through(proxy, f"{origin}/{v30.name}")
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture
def event_loop_thread():
    """An event loop of its own on a daemon thread (a deadlock here cannot stop the session's
    other reads, which use fsspec's loop)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=10)


def test_a_stream_closed_on_the_event_loop_thread_leaves_the_loop_serving(
    slow_url, event_loop_thread
):
    loop = event_loop_thread
    ds = StreamingDataset(
        slow_url, storage_options={"loop": loop}, shuffle=False, prefetch=True, prefetch_mb=64
    )
    before = set(threading.enumerate())
    items = iter(ds)
    assert next(items)["index"] == 0  # the episodes after the first are being fetched
    prefetching = [t for t in set(threading.enumerate()) - before if t.name.startswith("prefetch")]
    assert prefetching

    async def close_here():  # what the garbage collector does on the loop thread
        items.close()

    start = time.perf_counter()
    fsspec.asyn.sync(loop, close_here, timeout=20)
    assert time.perf_counter() - start < QUICK_S
    info = cat_file(ds.meta.fs, ds.meta.path("meta/info.json"), ds.meta.retry_budget)
    assert b'"codebase_version": "v3.0"' in info  # the loop still serves reads
    for thread in prefetching:  # the fetches that were running end by themselves
        thread.join(timeout=30)
        assert not thread.is_alive()

"""A process that reads over http keeps its connections working after it forks workers.

A forked DataLoader worker replaces its dataset's filesystem by one of its own; were the
parent's then finalised in the worker, closing its aiohttp connections there would remove
their sockets from the epoll instance both processes share, and the parent's next read on
one would wait for its read timeout (the hang of issue #39). ``gc.collect()`` in the child
makes that finalisation certain instead of left to the child's next full collection.
"""

import gc
import os
import threading
import time

import aiohttp
import fsspec
import pytest
import torch
from torch.utils.data import DataLoader, get_worker_info

from robopipe.bench.servers import QuietServer, RangeRequestHandler
from robopipe.formats.v30_reader import cat_file, open_url, read_meta
from robopipe.loading import MapDataset
from robopipe.retry import RetryBudget

# one attempt, a short read timeout: a read on a lost connection fails in 5 s, not 30 s
BUDGET = RetryBudget(attempts=1, seconds=10, read_timeout_s=5)
QUICK_S = 2.5  # a read on a working connection, on a loaded machine


@pytest.fixture
def http_url(rollover):
    """``http://127.0.0.1:<port>/rollover``: Python's threaded server with Range requests."""
    v30 = rollover[1]

    def handler(*args, **kwargs):
        return RangeRequestHandler(*args, directory=str(v30.parent), **kwargs)

    server = QuietServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/{v30.name}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def timed(read):
    start = time.perf_counter()
    result = read()
    return result, time.perf_counter() - start


def fsspec_cached(url: str):
    """An http filesystem from fsspec's instance cache (as any caller of fsspec may make)."""
    timeout = aiohttp.ClientTimeout(sock_connect=BUDGET.read_timeout_s, sock_read=5)
    return fsspec.filesystem("http", client_kwargs={"timeout": timeout}), url


@pytest.mark.parametrize("opened_by", ["open_url", "fsspec"])
def test_a_forked_child_that_drops_the_parents_filesystem_leaves_its_connections(
    http_url, opened_by
):
    if opened_by == "open_url":
        fs, root = open_url(http_url, budget=BUDGET)
    else:
        fs, root = fsspec_cached(http_url)
    info = cat_file(fs, f"{root}/meta/info.json", BUDGET)  # a connection, pooled
    pid = os.fork()
    if pid == 0:  # what a DataLoader worker does with the dataset it inherited
        code = 1
        try:
            own, _ = open_url(http_url, budget=BUDGET)
            code = 0 if cat_file(own, f"{root}/meta/info.json", BUDGET) == info else 2
        finally:
            del fs  # the parent's filesystem, dropped as a worker drops it
            gc.collect()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    again, took = timed(lambda: cat_file(fs, f"{root}/meta/info.json", BUDGET))
    assert again == info and took < QUICK_S


def _collect_in_worker(worker_id: int) -> None:
    dataset = get_worker_info().dataset
    assert dataset.meta.fs is not None  # the worker's own filesystem; the parent's dropped
    gc.collect()


def test_the_parent_reads_on_after_its_dataloader_workers_have_run(http_url, rollover):
    ds = MapDataset(http_url, retry_budget=BUDGET)
    first = ds[0]
    loader = DataLoader(ds, batch_size=4, num_workers=1, worker_init_fn=_collect_in_worker)
    batches = [batch for _, batch in zip(range(3), loader, strict=False)]
    assert len(batches) == 3
    del loader
    item, took = timed(lambda: ds[len(ds) - 1])
    assert took < QUICK_S and item["index"] == len(ds) - 1
    again, took = timed(lambda: ds[0])
    assert took < QUICK_S and torch.equal(again["observation.state"], first["observation.state"])
    meta, took = timed(lambda: read_meta(http_url, retry_budget=BUDGET))
    assert took < QUICK_S and meta.num_frames == len(ds)


def test_each_open_url_gets_a_filesystem_of_its_own(http_url):
    first, _ = open_url(http_url, budget=BUDGET)
    second, _ = open_url(http_url, budget=BUDGET)
    assert first is not second  # no pooled connection outlives the dataset that opened it
    options = {"client_kwargs": {}}
    open_url(http_url, options)
    assert options == {"client_kwargs": {}}  # the caller's options are left as they were

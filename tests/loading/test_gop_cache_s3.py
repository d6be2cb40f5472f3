"""The map-style loader's GOP cache over s3 (moto's server, a child process, on 127.0.0.1):
one ranged GET per GOP a batch needs, as over http, and items equal to a local read."""

import os

import numpy as np
from test_prefetch import assert_items_equal

from robopipe.bench import servers
from robopipe.bench.latency import delaying_proxy, through
from robopipe.bench.measure import SERVER_PIDS
from robopipe.loading import MapDataset
from robopipe.retry import RetryBudget


def _children() -> set[int]:
    pids = set()
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/children") as f:
            pids |= {int(p) for p in f.read().split()}
    return pids


def test_s3_requests_per_sample_are_the_gops_fetched(larger):
    local = MapDataset(larger)
    order = np.random.default_rng(5).permutation(len(local))[:24].tolist()
    with servers.serve_s3(larger) as (url, options):
        endpoint = options["client_kwargs"]["endpoint_url"]
        moto = SERVER_PIDS & _children()
        assert len(moto) == 1  # moto runs as a child process, left out of the loader's CPU
        with delaying_proxy(endpoint, 0) as proxy:  # latency 0: it only counts
            options = {
                **options,
                "client_kwargs": {"endpoint_url": through(proxy, endpoint)},
                "skip_instance_cache": True,
            }
            # no hedges: the requests are counted exactly, and on a loaded machine a range
            # slower than the hedge delay (1 s before latencies are known) would add one
            # (hedging is tested in test_faults.py)
            remote = MapDataset(url, storage_options=options, retry_budget=RetryBudget(hedge=False))
            assert remote.gops is not None  # s3fs files are read through the GOP cache
            remote.__getitems__(order[:8])  # the mp4 indexes and decoder opening reads
            before, stats = proxy.totals(), dict(remote.gops.stats)
            items = remote.__getitems__(order[8:])
            after = proxy.totals()
            again = remote.__getitems__(order[8:])
            last = proxy.totals()
    assert not moto & SERVER_PIDS  # stopped
    fetched = {key: remote.gops.stats[key] - stats[key] for key in stats}
    requests = after["requests"] - before["requests"]
    # every request of the batch is a GOP range (or a counted fallback block): no HEAD, no
    # 1 MiB readahead block per frame; at most one range per frame and camera
    assert 0 < fetched["gop_fetches"] <= len(order[8:]) * len(local.meta.video_keys)
    assert requests == fetched["gop_fetches"] + fetched["fallbacks"]
    # bytes: the GOPs' own plus at most 2 KiB of HTTP headers per request
    bytes_fetched = after["bytes_fetched"] - before["bytes_fetched"]
    gop_bytes = fetched["gop_bytes"] + fetched["fallback_bytes"]
    assert gop_bytes <= bytes_fetched <= gop_bytes + 2048 * requests
    assert last["requests"] == after["requests"]  # the same frames again: all cached
    for i, item, second in zip(order[8:], items, again, strict=True):
        assert_items_equal(item, local[i])
        assert_items_equal(second, local[i])

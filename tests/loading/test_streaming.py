"""Streaming: rank x worker split, epochs, and HTTP / S3 sources on 127.0.0.1 (mid-epoch
resume: test_resume.py)."""

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from robopipe.bench.servers import serve_http, serve_s3
from robopipe.loading import StreamingDataset

KEY = "observation.images.wrist"


def indices(loader) -> list[int]:
    return [int(i) for batch in loader for i in batch["index"]]


def test_two_ranks_two_workers_cover_every_frame_once(rollover, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    streams = []
    for rank in (0, 1):
        monkeypatch.setenv("RANK", str(rank))
        ds = StreamingDataset(rollover[1], shuffle_buffer=8, seed=rank)
        assert (ds.rank, ds.world_size) == (rank, 2)
        orders = [ds.order(ds.streams(2)[slot], slot).tolist() for slot in (2 * rank, 2 * rank + 1)]
        seen = [int(it["index"]) for it in DataLoader(ds, batch_size=None, num_workers=2)]
        assert seen == _round_robin(*orders)  # what each DataLoader worker yielded
        streams += orders
    assert all(streams)
    flat = [i for s in streams for i in s]
    assert len(flat) == len(set(flat)) == ds.meta.num_frames


def _round_robin(a: list, b: list) -> list:
    """How an in-order DataLoader interleaves two workers' items (batch_size=None)."""
    n = min(len(a), len(b))
    return [x for pair in zip(a[:n], b[:n], strict=True) for x in pair] + a[n:] + b[n:]


def test_too_many_streams_is_a_clear_error(rollover):
    ds = StreamingDataset(rollover[1], world_size=3, rank=0)
    with pytest.raises(ValueError, match="disjoint non-empty"):
        ds.streams(num_workers=3)


def test_shuffle_mixes_episodes_and_epochs_differ(rollover):
    ds = StreamingDataset(rollover[1], shuffle_buffer=50)
    first = [int(it["index"]) for it in ds]
    assert [int(it["index"]) for it in ds] == first  # the same epoch again
    ds.set_epoch(1)
    second = [int(it["index"]) for it in ds]
    assert first != second and sorted(first) == sorted(second)
    assert first != sorted(first)


@pytest.mark.parametrize("server", ["http", "s3"])
def test_remote_sources_yield_the_local_items(rollover, server):
    def items(url, storage_options=None):
        ds = StreamingDataset(url, storage_options=storage_options, shuffle_buffer=12, seed=1)
        batches = DataLoader(ds, batch_size=5, num_workers=2)
        return [(int(i), f) for b in batches for i, f in zip(b["index"], b[KEY], strict=True)]

    local = items(rollover[1])
    if server == "http":
        with serve_http(rollover[1].parent) as base:
            remote = items(f"{base}/{rollover[1].name}")
    else:
        with serve_s3(rollover[1]) as (url, options):
            remote = items(url, options)
    assert [i for i, _ in remote] == [i for i, _ in local]
    assert all(torch.equal(a, b) for (_, a), (_, b) in zip(remote, local, strict=True))
    assert np.unique([i for i, _ in remote]).size == len(local)

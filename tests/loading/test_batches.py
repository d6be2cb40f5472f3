"""Batches built in reused shared-memory buffers equal the DataLoader's usual batches."""

import math

import pytest
import torch
from torch.utils.data import DataLoader, default_collate

from robopipe.loading import MapDataset, StreamingDataset, collate, read_meta
from robopipe.loading.batches import batch_frame_mb, prefetch_factor_within

WINDOW = {"observation.images.front": [-0.2, 0.0], "observation.state": [-0.1, 0.0]}


def batches(root, workers, batch_buffers, **options):
    ds = MapDataset(root, batch_buffers=batch_buffers, **options)
    order = torch.randperm(len(ds), generator=torch.Generator().manual_seed(0)).tolist()
    loader = DataLoader(ds, batch_size=5, sampler=order, num_workers=workers, collate_fn=collate)
    return [{k: v.clone() if torch.is_tensor(v) else v for k, v in b.items()} for b in loader]


def assert_same_batches(expected, got):
    """The same keys in the same order, tensors of the same dtype and values."""
    assert len(expected) == len(got)
    for a, b in zip(expected, got, strict=True):
        assert list(a) == list(b)
        for key in a:
            if torch.is_tensor(a[key]):
                assert a[key].dtype == b[key].dtype and torch.equal(a[key], b[key]), key
            else:
                assert a[key] == b[key]


@pytest.mark.parametrize(
    "options",
    [{}, {"image_dtype": "float32"}, {"delta_timestamps": WINDOW}],
    ids=["uint8", "float32", "window"],
)
def test_buffered_batches_equal_usual_batches(rollover, options):
    usual = batches(rollover[1], 0, 0, **options)
    buffered = batches(rollover[1], 2, 4, **options)
    assert len(buffered) == len(usual) > 4  # the buffers went round, and the last is short
    assert len(usual[-1]["index"]) < 5
    assert_same_batches(usual, buffered)


def test_frames_stay_until_their_buffer_comes_round(rollover):
    ds = MapDataset(rollover[1], batch_buffers=2)
    cam = "observation.images.front"
    loader = iter(DataLoader(ds, batch_size=4, num_workers=0, collate_fn=collate))
    first = next(loader)
    assert first[cam].shape == (4, 3, 32, 48)
    assert first[cam].is_contiguous(memory_format=torch.channels_last)
    kept = first[cam].clone()
    next(loader)
    assert torch.equal(first[cam], kept)  # the next batch used the other buffer
    next(loader)
    assert not torch.equal(first[cam], kept)  # the third reused the first's: documented


def test_batches_beyond_the_budget_get_new_shared_memory(rollover):
    ds = MapDataset(rollover[1], batch_buffers=2, batch_buffer_mb=0.01)  # 2 buffers: 36 KiB
    cam = "observation.images.front"
    loader = iter(DataLoader(ds, batch_size=4, num_workers=0, collate_fn=collate))
    first = next(loader)
    assert first[cam].is_shared()
    assert first[cam].is_contiguous(memory_format=torch.channels_last)
    kept = first[cam].clone()
    next(loader), next(loader)
    assert torch.equal(first[cam], kept)  # no buffer came round: each batch had its own


def test_buffered_batches_beyond_the_budget_equal_usual_batches(rollover):
    usual = batches(rollover[1], 0, 0, delta_timestamps=WINDOW)
    fresh = batches(rollover[1], 2, 4, batch_buffer_mb=0, delta_timestamps=WINDOW)
    assert len(fresh) == len(usual)
    for a, b in zip(usual, fresh, strict=True):
        assert all(torch.equal(a[k], b[k]) for k in a if torch.is_tensor(a[k])), a["index"]


def test_collate_of_plain_items_is_default_collate(rollover):
    ds = MapDataset(rollover[1])
    items = ds.__getitems__([3, 1, 2])
    assert type(items) is list
    ours, theirs = collate(items), default_collate(items)
    assert list(ours) == list(theirs)
    assert all(torch.equal(ours[k], theirs[k]) for k in ours if torch.is_tensor(ours[k]))


def test_negative_batch_buffers_is_an_error(rollover):
    with pytest.raises(ValueError, match="batch_buffers"):
        MapDataset(rollover[1], batch_buffers=-1)
    with pytest.raises(ValueError, match="batch_buffer_mb"):
        MapDataset(rollover[1], batch_buffers=4, batch_buffer_mb=-1)


def test_batch_frame_mb_counts_every_camera_and_timestep(rollover):
    meta = read_meta(rollover[1])
    frame = sum(
        math.prod(meta.info["features"][k]["shape"]) for k in meta.camera_keys
    )  # one timestep of every camera, uint8
    assert batch_frame_mb(meta, None, 5, "uint8") == pytest.approx(5 * frame / 2**20)
    window = batch_frame_mb(meta, WINDOW, 5, "float32")
    front = math.prod(meta.info["features"]["observation.images.front"]["shape"])
    assert window == pytest.approx(5 * 4 * (frame + front) / 2**20)  # front twice


@pytest.mark.parametrize(
    ("budget", "batch", "workers", "factor"),
    [
        (1024, 28.1, 2, 2),
        (1024, 225, 2, 1),
        (6 * 100, 100, 2, 2),
        (6 * 100 - 1, 100, 2, 1),
        (10, 100, 4, 1),
    ],
)
def test_prefetch_factor_within_the_budget(budget, batch, workers, factor):
    assert prefetch_factor_within(budget, batch, workers) == factor


def test_prefetch_factor_needs_workers():
    with pytest.raises(ValueError, match="workers"):
        prefetch_factor_within(1024, 10, 0)


def stream_batches(root, workers, **options):
    ds = StreamingDataset(root, seed=0, **options)
    batched = "batch_size" in options
    loader = DataLoader(
        ds, batch_size=None if batched else 5, num_workers=workers, collate_fn=collate
    )
    return [{k: v.clone() if torch.is_tensor(v) else v for k, v in b.items()} for b in loader]


@pytest.mark.parametrize("buffers", [4, 0], ids=["buffers", "no-buffers"])
@pytest.mark.parametrize(
    "options",
    [{}, {"image_dtype": "float32"}, {"delta_timestamps": WINDOW}],
    ids=["uint8", "float32", "window"],
)
def test_streamed_batches_equal_the_dataloaders_batches(rollover, options, buffers):
    usual = stream_batches(rollover[1], 2, **options)
    built = stream_batches(rollover[1], 2, batch_size=5, batch_buffers=buffers, **options)
    assert len(built) == len(usual) > 4
    assert sorted(len(b["index"]) for b in usual)[0] < 5  # short last batches compared too
    assert_same_batches(usual, built)


def test_streamed_batch_options_are_checked(rollover):
    with pytest.raises(ValueError, match="batch_size"):
        StreamingDataset(rollover[1], batch_size=0)
    with pytest.raises(ValueError, match="batch_buffers"):
        StreamingDataset(rollover[1], batch_size=4, batch_buffers=-1)

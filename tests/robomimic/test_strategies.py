"""The paper's caching strategies give exactly SequenceDataset's mode-None items."""

from __future__ import annotations

import pytest
from torch.utils.data import DataLoader

from robopipe.robomimic import SequenceDataset
from robopipe.robomimic.generate import generate_robomimic
from robopipe.robomimic.strategies import CompressedSequenceDataset, LruSequenceDataset

KWARGS = dict(
    obs_keys=["object", "agentview_image"], dataset_keys=["actions", "rewards", "dones"],
    frame_stack=2, seq_length=5, get_pad_mask=True, goal_mode="last",
)  # fmt: skip


@pytest.fixture(scope="module")
def hdf5(tmp_path_factory):
    path = tmp_path_factory.mktemp("strategies") / "gen.hdf5"
    return generate_robomimic(path, demos=5, height=16, width=16, min_length=6, max_length=12,
                              seed=2, next_obs=True)  # fmt: skip


@pytest.mark.parametrize(
    "make",
    [lambda p, **kw: LruSequenceDataset(p, cache_size_mb=0.05, **kw), CompressedSequenceDataset],
    ids=["lru", "compressed"],
)
def test_items_equal_mode_none(hdf5, make, assert_same):
    expected = SequenceDataset(hdf5, **KWARGS)
    dataset = make(hdf5, **KWARGS)
    assert len(dataset) == len(expected)
    for index in range(len(expected)):
        assert_same(expected[index], dataset[index], f"item {index}")
    loaders = [DataLoader(d, batch_size=6) for d in (expected, dataset)]
    for a, b in zip(*loaders, strict=True):
        assert_same(a, b)


def test_lru_cache_is_bounded(hdf5):
    dataset = LruSequenceDataset(hdf5, **KWARGS, cache_size_mb=0.05)  # about one demo
    for index in range(len(dataset)):
        dataset[index]
    assert dataset.cached_bytes <= 0.05 * 2**20 or len(dataset._demos) == 1
    assert dataset.misses >= dataset.n_demos and dataset.hits > 0
    whole = LruSequenceDataset(hdf5, **KWARGS, cache_size_mb=100)
    for index in range(len(whole)):
        whole[index]
    assert whole.misses == whole.n_demos  # every demo read once, then kept


def test_compressed_cache_is_smaller(hdf5):
    dataset = CompressedSequenceDataset(hdf5, **KWARGS)
    raw = LruSequenceDataset(hdf5, **KWARGS, cache_size_mb=100)
    for index in range(len(raw)):
        raw[index]
    assert 0 < dataset.compressed_bytes < raw.cached_bytes

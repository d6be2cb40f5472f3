"""The paper's robo format: a tar of one npz per demo, streamed by RoboTarDataset, gives the
same items as SequenceDataset; and downscaled images."""

from __future__ import annotations

import json
import tarfile
import tracemalloc

import numpy as np
import pytest
from torch.utils.data import DataLoader

from robopipe.errors import DatasetError
from robopipe.robomimic import SequenceDataset
from robopipe.robomimic.generate import generate_robomimic
from robopipe.robomimic.images import downscale
from robopipe.robomimic.robo import RoboTarDataset, write_robo

KWARGS = dict(
    obs_keys=["object", "agentview_image"], dataset_keys=["actions", "rewards", "dones"],
    frame_stack=2, seq_length=5, get_pad_mask=True, goal_mode="last",
)  # fmt: skip


@pytest.fixture(scope="module")
def hdf5(tmp_path_factory):
    path = tmp_path_factory.mktemp("robo") / "gen.hdf5"
    return generate_robomimic(path, demos=11, height=16, width=16, min_length=6, max_length=12,
                              seed=4, next_obs=True)  # fmt: skip


@pytest.fixture(scope="module")
def tar(hdf5):
    return write_robo(hdf5, hdf5.with_name("robo.tar"))


def _item(item):
    return item


def _streamed(dataset, workers):
    """Every item of one epoch through a DataLoader, by index."""
    loader = DataLoader(dataset, batch_size=None, num_workers=workers, collate_fn=_item)
    items = list(loader)
    indices = [int(item.pop("index")) for item in items]
    demos = [int(item.pop("demo")) for item in items]
    return indices, demos, items


def test_archive_layout(hdf5, tar):
    with tarfile.open(tar) as archive:
        names = archive.getnames()
        metadata = json.load(archive.extractfile("metadata.json"))
        masks = json.load(archive.extractfile("masks.json"))
    assert names[:2] == ["metadata.json", "masks.json"]
    assert names[2:] == [f"demo_{i}.npz" for i in range(11)]  # numeric order: demo_10 last
    assert metadata["arrays"]["obs/agentview_image"] == {"dtype": "uint8", "shape": [16, 16, 3]}
    assert set(masks) == {"train", "valid"}
    assert not list(tar.parent.glob(".*partial"))


@pytest.mark.parametrize(
    ("kwargs", "workers"),
    [
        (KWARGS, 2),
        (dict(KWARGS, pad_seq_length=False, pad_frame_stack=False, goal_mode=None), 0),
        (
            dict(
                obs_keys=["agentview_image"],
                dataset_keys=["actions"],
                seq_length=3,
                load_next_obs=False,
                filter_by_attribute="train",
            ),
            3,
        ),  # fmt: skip
    ],
    ids=["padded-goal-w2", "unpadded-w0", "train-mask-w3"],
)
def test_same_items_as_sequence_dataset(hdf5, tar, kwargs, workers, assert_same):
    expected = SequenceDataset(hdf5, **kwargs)
    dataset = RoboTarDataset(tar, **kwargs, shuffle_buffer=7, seed=1, with_index=True)
    assert len(dataset) == len(expected)
    indices, demos, items = _streamed(dataset, workers)
    assert sorted(indices) == list(range(len(expected)))  # the same multiset of items
    assert indices != sorted(indices)  # shuffled
    for index, demo, item in zip(indices, demos, items, strict=True):
        assert demo == expected.item_demos[index]
        assert_same(expected[index], item, f"item {index}")


def test_epochs_reshuffle_and_unshuffled_is_in_order(tar):
    dataset = RoboTarDataset(tar, **KWARGS, shuffle_buffer=50, with_index=True)
    first, second = (_streamed(dataset, 0)[0] for _ in range(2))
    assert first != second and sorted(first) == sorted(second)
    ordered = RoboTarDataset(tar, **KWARGS, shuffle=False, with_index=True)
    assert _streamed(ordered, 0)[0] == list(range(len(ordered)))


def test_bad_archive_and_keys(tmp_path, tar):
    not_tar = tmp_path / "x.tar"
    not_tar.write_bytes(b"not a tar")
    with pytest.raises(DatasetError, match="not a robo archive"):
        RoboTarDataset(not_tar, ["object"], ["actions"])
    with pytest.raises(DatasetError, match="no .*'obs/nope'"):
        RoboTarDataset(tar, ["nope"], ["actions"])
    with pytest.raises(DatasetError, match="no mask 'test'"):
        RoboTarDataset(tar, ["object"], ["actions"], filter_by_attribute="test")


def test_downscale_area_average():
    images = np.arange(2 * 84 * 84 * 3, dtype=np.int64).reshape(2, 84, 84, 3) % 251
    images = images.astype(np.uint8)
    small = downscale(images, (28, 28))
    assert small.shape == (2, 28, 28, 3) and small.dtype == np.uint8
    block = images[1, 3:6, 6:9, 2].astype(np.float64).mean()
    assert small[1, 1, 2, 2] == round(block)
    assert downscale(small, (28, 28)) is small
    with pytest.raises(ValueError, match="uint8"):
        downscale(images.astype(np.float32), (28, 28))


def test_downscaled_items(hdf5, tar):
    kwargs = dict(obs_keys=["object", "agentview_image"], dataset_keys=["actions"], seq_length=4)
    full = SequenceDataset(hdf5, **kwargs)
    small = SequenceDataset(hdf5, **kwargs, image_size=(8, 4))
    streamed = RoboTarDataset(tar, **kwargs, image_size=(8, 4), shuffle=False)
    item, streamed_item = small[0], next(iter(streamed))
    for got in (item["obs"]["agentview_image"], streamed_item["obs"]["agentview_image"]):
        assert got.shape == (4, 8, 4, 3) and got.dtype == np.uint8
        np.testing.assert_array_equal(got, downscale(full[0]["obs"]["agentview_image"], (8, 4)))
    np.testing.assert_array_equal(item["obs"]["object"], full[0]["obs"]["object"])


def test_shuffle_buffer_holds_demos_not_windows(hdf5, tar):
    """A buffer of every window holds each demo's arrays once, not seq_length copies."""
    kwargs = dict(obs_keys=["agentview_image"], dataset_keys=["actions"], seq_length=8)
    cached = SequenceDataset(hdf5, **kwargs, load_next_obs=False, hdf5_cache_mode="all")
    data = sum(a.nbytes for a in cached._cache.values())  # the arrays, once
    dataset = RoboTarDataset(tar, **kwargs, load_next_obs=False, shuffle_buffer=10_000)
    tracemalloc.start()
    for _ in dataset:
        pass
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 2.5 * data  # windows materialized in the buffer would hold 8x the data

"""robopipe.robomimic.SequenceDataset: items and lengths equal to robomimic 0.3.0's
SequenceDataset (where robomimic is installed) for every supported argument combination, on a
generated image file and on the real Lift file; its own checks run without robomimic."""

from __future__ import annotations

import contextlib
import io
import itertools

import h5py
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from robopipe.errors import DatasetError
from robopipe.robomimic import SequenceDataset
from robopipe.robomimic.generate import generate_robomimic

LOW_DIM = ["robot0_eef_pos", "object"]
IMAGE = "agentview_image"
DATASET_KEYS = ["actions", "rewards", "dones"]
MODES = [None, "low_dim", "all"]


@pytest.fixture(scope="module")
def image_hdf5(tmp_path_factory):
    """6 demos of 12-20 steps, two 16x16 cameras, next_obs, train/valid masks."""
    path = tmp_path_factory.mktemp("sequence") / "gen.hdf5"
    return generate_robomimic(
        path, demos=6, height=16, width=16, min_length=12, max_length=20, seed=5, next_obs=True
    )


def robomimic_dataset(obs_keys, **kwargs):
    """robomimic 0.3.0's SequenceDataset (skips without it), its progress output silenced."""
    dataset = pytest.importorskip("robomimic.utils.dataset")
    obs_utils = pytest.importorskip("robomimic.utils.obs_utils")
    low_dim = [k for k in obs_keys if not k.endswith("_image")]
    rgb = [k for k in obs_keys if k.endswith("_image")]
    spec = {"obs": {"low_dim": low_dim, "rgb": rgb}}
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        obs_utils.initialize_obs_utils_with_obs_specs(spec)
        return dataset.SequenceDataset(obs_keys=obs_keys, **kwargs)


def assert_parity(assert_same, kwargs, obs_keys, step=1):
    theirs = robomimic_dataset(obs_keys, **kwargs)
    ours = SequenceDataset(obs_keys=obs_keys, **kwargs)
    assert len(ours) == len(theirs), kwargs
    for index in range(0, len(theirs), step):
        assert_same(theirs[index], ours[index], f"{kwargs} item {index}")
    return theirs, ours


@pytest.mark.parametrize("mode", MODES)
def test_items_equal_robomimic_on_image_file(image_hdf5, mode, assert_same):
    obs_keys = [*LOW_DIM, IMAGE]
    combos = itertools.product([1, 10], [1, 3], [True, False], [True, False], [None, "train"])
    for seq_length, frame_stack, pad_frame_stack, pad_seq_length, filter_key in combos:
        kwargs = dict(
            hdf5_path=image_hdf5, dataset_keys=DATASET_KEYS, frame_stack=frame_stack,
            seq_length=seq_length, pad_frame_stack=pad_frame_stack,
            pad_seq_length=pad_seq_length, get_pad_mask=frame_stack == 3,
            goal_mode="last" if seq_length == 10 else None, hdf5_cache_mode=mode,
            filter_by_attribute=filter_key,
        )  # fmt: skip
        assert_parity(assert_same, kwargs, obs_keys, step=3)


@pytest.mark.parametrize("mode", MODES)
def test_dataloader_batches_equal_robomimic(image_hdf5, mode, assert_same):
    """Batches through the DataLoader (our batched __getitems__ path) equal robomimic's."""
    kwargs = dict(
        hdf5_path=image_hdf5, dataset_keys=DATASET_KEYS, seq_length=50, frame_stack=2,
        get_pad_mask=True, hdf5_cache_mode=mode, goal_mode="last",
    )  # fmt: skip
    theirs, ours = assert_parity(assert_same, kwargs, [IMAGE, *LOW_DIM], step=7)
    batches = zip(DataLoader(theirs, batch_size=7), DataLoader(ours, batch_size=7), strict=True)
    for expected, actual in batches:
        assert_same(expected, actual)


def test_worker_batches_are_plain_dicts_equal_to_in_process_ones(image_hdf5, assert_same):
    """With workers the items travel as InlineTensors; the loop still gets plain dicts."""
    ours = SequenceDataset(
        hdf5_path=image_hdf5, obs_keys=[IMAGE, *LOW_DIM], dataset_keys=DATASET_KEYS,
        seq_length=10, get_pad_mask=True, hdf5_cache_mode="all",
    )  # fmt: skip
    in_process = list(DataLoader(ours, batch_size=16))
    workers = list(DataLoader(ours, batch_size=16, num_workers=2))
    assert len(workers) == len(in_process)
    for expected, actual in zip(in_process, workers, strict=True):
        assert type(actual) is dict and type(actual["obs"]) is dict
        assert_same(expected, actual)


@pytest.mark.parametrize("mode", MODES)
def test_items_equal_robomimic_on_lift(lift_hdf5, mode, assert_same):
    # Lift demos are shorter than 50 steps: seq_length 50 needs pad_seq_length
    for seq_length, pad_seq_length in [(1, True), (10, True), (10, False), (50, True)]:
        kwargs = dict(
            hdf5_path=lift_hdf5, dataset_keys=DATASET_KEYS, seq_length=seq_length,
            pad_seq_length=pad_seq_length, hdf5_cache_mode=mode, load_next_obs=False,
            get_pad_mask=True,
        )  # fmt: skip
        theirs, ours = assert_parity(assert_same, kwargs, ["state"], step=211)
        if seq_length == 10:  # robomimic's figures on Lift (issue 15)
            assert len(ours) == {True: 10167, False: 10167 - 9 * 200}[pad_seq_length]


def test_normalization_equals_robomimic(image_hdf5, assert_same):
    kwargs = dict(
        hdf5_path=image_hdf5, dataset_keys=["actions"], hdf5_cache_mode="low_dim",
        hdf5_normalize_obs=True,
    )  # fmt: skip
    theirs, ours = assert_parity(assert_same, kwargs, LOW_DIM, step=5)
    assert_same(theirs.get_obs_normalization_stats(), ours.get_obs_normalization_stats())
    assert ours.get_dataset_sampler() is None


def test_windows_and_pad_mask(image_hdf5):
    ds = SequenceDataset(
        image_hdf5, [IMAGE, "robot0_eef_pos"], DATASET_KEYS, frame_stack=3, seq_length=4,
        get_pad_mask=True, hdf5_cache_mode="low_dim", load_next_obs=False,
    )  # fmt: skip
    with h5py.File(image_hdf5, "r") as h5:
        eef = h5["data/demo_0/obs/robot0_eef_pos"][()]
        image = h5[f"data/demo_0/obs/{IMAGE}"][()]
    first = ds[0]  # steps -2 .. 3 of demo_0: two pads repeating step 0
    assert first["pad_mask"][:, 0].tolist() == [False, False, True, True, True, True]
    np.testing.assert_array_equal(first["obs"]["robot0_eef_pos"], eef[[0, 0, 0, 1, 2, 3]])
    assert first["obs"][IMAGE].shape == (6, 16, 16, 3) and first["obs"][IMAGE].dtype == np.uint8
    np.testing.assert_array_equal(first["obs"][IMAGE], image[[0, 0, 0, 1, 2, 3]])
    assert first["actions"].dtype == np.float32  # cached dataset keys are float32
    last = ds[len(eef) - 1]  # steps T-3 .. T+2 of demo_0: padded at the end
    assert last["pad_mask"][:, 0].tolist() == [True, True, True, False, False, False]
    assert "next_obs" not in last and "task" not in last


def test_only_requested_keys_held(image_hdf5):
    ds = SequenceDataset(image_hdf5, ["robot0_eef_pos"], ["actions"], hdf5_cache_mode="all")
    batch = next(iter(DataLoader(ds, batch_size=4)))
    assert set(batch["obs"]) == {"robot0_eef_pos"} and batch["actions"].dtype == torch.float32
    assert not any(IMAGE in path for path in ds._cache)  # no camera read into RAM


def test_bad_arguments_named(image_hdf5):
    with pytest.raises(DatasetError, match=r"gen.hdf5: no mask/nope list"):
        SequenceDataset(image_hdf5, LOW_DIM, ["actions"], filter_by_attribute="nope")
    with pytest.raises(DatasetError, match=r"episode 0: .*data/demo_0 has no obs/missing"):
        SequenceDataset(image_hdf5, ["missing"], ["actions"])
    with pytest.raises(DatasetError, match="fewer than frame_stack - 1 \\+ seq_length"):
        SequenceDataset(image_hdf5, LOW_DIM, ["actions"], seq_length=30, pad_seq_length=False)
    with pytest.raises(ValueError, match="cannot normalize image"):
        SequenceDataset(image_hdf5, [IMAGE], ["actions"], hdf5_normalize_obs=True)

"""The robomimic file reader and generator: demo order, features, masks, bad input."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import h5py
import numpy as np
import pytest

from robopipe.errors import DatasetError
from robopipe.robomimic.hdf5 import RobomimicFile


def test_generated_file_layout(generated_hdf5):
    with h5py.File(generated_hdf5, "r") as h5:
        env_args = json.loads(h5["data"].attrs["env_args"])
        demo = h5["data/demo_0"]
        assert demo["obs/agentview_image"].dtype == np.uint8
        assert demo["obs/agentview_image"].shape[1:] == (32, 48, 3)
        assert demo["obs/robot0_eef_pos"].dtype == np.float64
        assert demo["dones"][-1] == 1 and demo["dones"][:-1].sum() == 0
        train = {d.decode() for d in h5["mask/train"][()]}
        valid = {d.decode() for d in h5["mask/valid"][()]}
    assert env_args["env_name"] == "GeneratedReach"
    assert train.isdisjoint(valid) and len(train | valid) == 12


def test_demos_sorted_numerically_and_features(generated_hdf5):
    source = RobomimicFile(generated_hdf5)
    assert source.demos == [f"demo_{i}" for i in range(12)]
    assert (source.task, source.fps, source.robot_type) == ("GeneratedReach", 20, "Panda")
    features = source.features()
    assert list(features) == [
        "observation.state",
        "action",
        "next.reward",
        "next.done",
        "observation.images.agentview_image",
        "observation.images.robot0_eye_in_hand_image",
    ]
    # low-dim keys concatenated in key order: object (10), eef pos (3), quat (4), gripper (2)
    assert features["observation.state"]["shape"] == [19]
    assert features["observation.state"]["names"][:2] == ["object_0", "object_1"]
    assert features["next.done"] == {"dtype": "bool", "shape": [1], "names": None}
    assert features["observation.images.agentview_image"]["shape"] == [32, 48, 3]
    with h5py.File(generated_hdf5, "r") as h5:
        group = h5["data/demo_10"]
        state = source.sources[0].read(group)
        assert state.dtype == np.float32
        np.testing.assert_array_equal(state[:, 10:13], group["obs/robot0_eef_pos"][()].astype("f4"))
        assert source.lengths[10] == len(group["actions"])
        valid = {d.decode() for d in h5["mask/valid"][()]}
    assert {d for d, masks in source.masks.items() if masks == ["valid"]} == valid


def test_per_key_state(generated_hdf5):
    features = RobomimicFile(generated_hdf5, state="per_key").features()
    assert features["observation.robot0_eef_pos"]["shape"] == [3]
    assert features["observation.object"]["names"] == [f"object_{i}" for i in range(10)]
    assert "observation.state" not in features


def test_real_lift_file(lift_hdf5):
    source = RobomimicFile(lift_hdf5, task="Lift")
    assert len(source.demos) == 200 and int(source.lengths.sum()) == 10167
    assert source.demos[10] == "demo_10" and source.video_keys == []
    assert source.features()["observation.state"]["shape"] == [60]
    assert not source.has_masks and source.episode_masks(0) == {}
    with pytest.raises(DatasetError, match="give the task in the config"):
        RobomimicFile(lift_hdf5)


@pytest.fixture
def broken(generated_hdf5, tmp_path):
    path = tmp_path / "broken.hdf5"
    shutil.copy(generated_hdf5, path)
    return path


def test_demo_with_missing_actions_is_named(broken):
    with h5py.File(broken, "a") as h5:
        del h5["data/demo_10/actions"]
    with pytest.raises(DatasetError) as err:
        RobomimicFile(broken, name="rm")
    message = str(err.value)
    assert "dataset 'rm'" in message and "episode 10" in message
    assert "broken.hdf5" in message and "/data/demo_10 lacks ['actions']" in message


def test_demo_with_other_image_size_is_named(broken):
    with h5py.File(broken, "a") as h5:
        del h5["data/demo_3/obs/agentview_image"]
        length = len(h5["data/demo_3/actions"])
        h5["data/demo_3/obs/agentview_image"] = np.zeros((length, 8, 8, 3), "u1")
    with pytest.raises(DatasetError, match=r"episode 3: .*demo_3/obs/agentview_image has shape"):
        RobomimicFile(broken, name="rm")


def test_mask_naming_no_demo_and_bad_group_names(broken):
    with h5py.File(broken, "a") as h5:
        h5["mask/extra"] = np.array([b"demo_99"])
    with pytest.raises(DatasetError, match="mask/extra lists 'demo_99'"):
        RobomimicFile(broken)
    with h5py.File(broken, "a") as h5:
        del h5["mask/extra"]
        h5["data"].move("demo_2", "trajectory_2")
    with pytest.raises(DatasetError, match="must be named demo_<N>"):
        RobomimicFile(broken)


def test_generate_cli(tmp_path):
    out = tmp_path / "cli.hdf5"
    done = subprocess.run(
        [sys.executable, "-m", "robopipe.robomimic.generate", str(out), "--demos", "3",
         "--height", "16", "--width", "24", "--cameras", "agentview_image"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "wrote 3 demos" in done.stdout
    source = RobomimicFile(out)
    assert source.video_keys == ["observation.images.agentview_image"] and len(source.demos) == 3

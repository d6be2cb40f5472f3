"""The pipeline's v3.0 reading equals LeRobotDataset's: lerobot 0.6.1 (``.venv-lerobot``)
and robopipe's loaders read ``../shared/datasets/cr5_20ep_v30_lerobot`` (written by lerobot's
own converter) with the same ``episodes=`` selection, and item ``i`` of each is the same:
every key both return, tensors exactly (dtype, shape, values)."""

import json
import subprocess
from pathlib import Path

import pytest
import torch

from robopipe.bench.peers import _tensor_difference
from robopipe.loading import MapDataset, StreamingDataset

pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]
LEROBOT_PYTHON = REPO_ROOT / ".venv-lerobot" / "bin" / "python"
NAME = "cr5_20ep_v30_lerobot"
EPISODES = [3, 11, 19]
POSITIONS = [0, 1, 150, 400, -1]  # item positions among the selected episodes' frames

LEROBOT_ITEMS = """
import json, sys, torch
from lerobot.datasets.lerobot_dataset import LeRobotDataset
root, out = sys.argv[1], sys.argv[4]
episodes, positions = json.loads(sys.argv[2]), json.loads(sys.argv[3])
ds = LeRobotDataset("local/cr5", root=root, episodes=episodes)
items = [ds[p % len(ds)] for p in positions]
torch.save({"length": len(ds), "items": items}, out)
"""


@pytest.fixture(scope="module")
def lerobot_items(shared_datasets, tmp_path_factory) -> dict:
    if not LEROBOT_PYTHON.exists():
        pytest.skip(f"{LEROBOT_PYTHON} is missing (tools/lerobot_env.sh makes it)")
    tmp = tmp_path_factory.mktemp("lerobot_items")
    out = tmp / "items.pt"
    env = {"PATH": "/usr/bin:/bin", "HF_HOME": str(tmp / "hf"), "HF_HUB_OFFLINE": "1"}
    args = [str(shared_datasets / NAME), json.dumps(EPISODES), json.dumps(POSITIONS), str(out)]
    done = subprocess.run(
        [str(LEROBOT_PYTHON), "-c", LEROBOT_ITEMS, *args], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return torch.load(out, weights_only=False)


def _differences(theirs: dict, ours: dict) -> list[str]:
    found = []
    for key in sorted(set(theirs) & set(ours)):
        a, b = theirs[key], ours[key]
        if isinstance(a, torch.Tensor):
            why = _tensor_difference(a, torch.as_tensor(b))
        else:
            why = None if a == b else f"{a!r} != {b!r}"
        if why:
            found.append(f"{key}: {why}")
    return found


def test_map_dataset_items_equal_lerobots(lerobot_items, shared_datasets):
    ds = MapDataset(str(shared_datasets / NAME), image_dtype="float32", episodes=EPISODES)
    assert len(ds) == lerobot_items["length"]
    for position, theirs in zip(POSITIONS, lerobot_items["items"], strict=True):
        ours = ds[position % len(ds)]
        assert {"index", "episode_index", "task", "observation.state"} <= set(theirs) & set(ours)
        assert _differences(theirs, ours) == [], position


def test_streamed_items_equal_lerobots(lerobot_items, shared_datasets):
    ds = StreamingDataset(
        str(shared_datasets / NAME), image_dtype="float32", episodes=EPISODES, shuffle=False
    )
    wanted = {int(item["index"]): item for item in lerobot_items["items"]}
    streamed = {int(item["index"]): item for item in ds if int(item["index"]) in wanted}
    assert set(streamed) == set(wanted)
    for index, theirs in wanted.items():
        assert _differences(theirs, streamed[index]) == [], index

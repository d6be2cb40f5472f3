"""Opt-in: lerobot 0.6.1's LeRobotDataset loads every kind of copy, and its items equal
robopipe's MapDataset items on the copy (same keys, shapes and values).

Skipped unless the lerobot environment exists (``tools/lerobot_env.sh`` -> ``.venv-lerobot``).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from robopipe.copies.make import make_copy
from robopipe.loading import MapDataset

REPO = Path(__file__).resolve().parents[2]
LEROBOT_PYTHON = REPO / ".venv-lerobot/bin/python"
INDICES = [0, 17, 41]
# LeRobotDataset's items for INDICES, written as .npz (one array per tensor key)
DRIVER = """
import json, sys
import numpy as np, torch
from lerobot.datasets.lerobot_dataset import LeRobotDataset
args = json.loads(sys.argv[1])
ds = LeRobotDataset("local/copy", root=args["root"], video_backend="torchcodec")
arrays = {"length": np.array(len(ds))}
for i in args["indices"]:
    for key, value in ds[i].items():
        if isinstance(value, torch.Tensor):
            arrays[f"{i}/{key}"] = value.numpy()
np.savez(args["out"], **arrays)
"""

pytestmark = pytest.mark.skipif(
    not LEROBOT_PYTHON.exists(), reason="lerobot 0.6.1 env missing (run tools/lerobot_env.sh)"
)


@pytest.mark.parametrize("encoding", ["h264g2_24x32", "av1fast", "jpeg90", "raw"])
def test_lerobot_loads_the_copy(v30, tmp_path, encoding):
    root = tmp_path / "v3.0"
    make_copy(v30, root, tmp_path / "copy.json", encoding)
    out = tmp_path / "items.npz"
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    env.pop("PYTHONPATH", None)
    args = json.dumps({"root": str(root), "indices": INDICES, "out": str(out)})
    done = subprocess.run(
        [str(LEROBOT_PYTHON), "-c", DRIVER, args], env=env, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    theirs = np.load(out)
    ours = MapDataset(root, image_dtype="float32")  # LeRobotDataset's default: floats in [0, 1]
    assert int(theirs["length"]) == len(ours)
    for i in INDICES:
        item = ours[i]
        tensors = {k: v for k, v in item.items() if isinstance(v, torch.Tensor)}
        assert sorted(f"{i}/{k}" for k in tensors) == sorted(
            k for k in theirs.files if k.startswith(f"{i}/")
        )
        for key, value in tensors.items():
            expected = theirs[f"{i}/{key}"]
            assert value.shape == expected.shape, key
            np.testing.assert_allclose(value.numpy(), expected, atol=1e-6, err_msg=key)

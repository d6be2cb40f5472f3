"""Opt-in (``slow``): ``lerobot-train`` (lerobot 0.6.1, peer environment) trains with
robopipe's ``LeRobotDataset`` through the one-line hook of
``benchmarks/lerobot_train_dropin.py``, on ``../shared/datasets/cr5_20ep_v30_lerobot``: for
the same seed its batches (the sampler's indices, every key, dtype, shape and value) and its
step losses equal those of lerobot's own class, and are finite. Skipped without the peer
environment, its ``accelerate`` or ``../shared``; 2-4 minutes on 2 busy cores."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]
LEROBOT_PYTHON = REPO_ROOT / ".venv-lerobot" / "bin" / "python"
SCRIPT = REPO_ROOT / "benchmarks" / "lerobot_train_dropin.py"


def test_lerobot_train_batches_and_losses_equal_lerobots(shared_datasets, tmp_path):
    if not LEROBOT_PYTHON.exists():
        pytest.skip(f"{LEROBOT_PYTHON} is missing (tools/lerobot_env.sh makes it)")
    probe = subprocess.run([str(LEROBOT_PYTHON), "-c", "import accelerate"], capture_output=True)
    if probe.returncode:
        pytest.skip("lerobot-train needs accelerate in the peer environment (tools/lerobot_env.sh)")
    root = shared_datasets / "cr5_20ep_v30_lerobot"
    args = ["--root", root, "--steps", 2, "--batch-size", 2, "--work", tmp_path]
    done = subprocess.run(
        [str(LEROBOT_PYTHON), str(SCRIPT), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["dataset_class"]["robopipe"] == "robopipe.loading.lerobot_dataset.LeRobotDataset"
    assert result["steps"] == 2 and len(result["indices"]) == 2
    assert result["batches_equal"] and result["batch_differences"] == []
    assert {"observation.images.top", "action", "action_is_pad", "task"} <= set(
        result["batch_keys"]
    )
    assert result["losses_finite"]
    assert result["loss_robopipe"] == result["loss_lerobot"]

"""robopipe's ``LeRobotDataset`` equals lerobot 0.6.1's (run in the peer environment,
``.venv-lerobot``) on a generated v3.0 dataset (robopipe's conversion: 2 cameras, videos in
several files) and on ``../shared/datasets/cr5_20ep_v30_lerobot`` (lerobot's own converter):
lengths and attributes, the ``meta`` fields ``lerobot-train`` reads, and items (every key, in
order; dtypes, shapes, values) at the edges of episodes, with and without ``delta_timestamps``
and ``episodes=``. Without the peer environment the parity tests are skipped; the tests of
what robopipe refuses run everywhere."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from robopipe.loading import LeRobotDataset
from robopipe.loading.lerobot_meta import dataset_url

REPO_ROOT = Path(__file__).resolve().parents[2]
LEROBOT_PYTHON = REPO_ROOT / ".venv-lerobot" / "bin" / "python"
CR5 = "cr5_20ep_v30_lerobot"

# One peer run per dataset: every case's lengths, attributes, meta fields and items.
LEROBOT_SIDE = """
import json, sys, torch
from lerobot.datasets.lerobot_dataset import LeRobotDataset
root, cases, out = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
results = []
for case in cases:
    ds = LeRobotDataset("local/parity", root=root, episodes=case["episodes"],
                        delta_timestamps=case["delta_timestamps"],
                        return_uint8=case["return_uint8"], video_backend="torchcodec")
    m = ds.meta
    info = m.info.to_dict()
    results.append({
        "length": len(ds), "num_frames": ds.num_frames, "num_episodes": ds.num_episodes,
        "episodes": ds.episodes, "absolute_to_relative_idx": ds.absolute_to_relative_idx,
        "fps": ds.fps, "features": ds.features,
        "hf_task_index": ds.hf_dataset.data.column("task_index").to_pylist(),
        "meta": {
            "info": info, "features": m.features, "fps": m.fps,
            "total_frames": m.total_frames, "total_episodes": m.total_episodes,
            "total_tasks": m.total_tasks, "camera_keys": m.camera_keys,
            "video_keys": m.video_keys, "image_keys": m.image_keys,
            "depth_keys": m.depth_keys, "has_language_columns": m.has_language_columns,
            "robot_type": m.robot_type, "repo_id": m.repo_id, "shapes": m.shapes,
            "names": m.names, "stats": m.stats,
            "tasks": [list(m.tasks.index), m.tasks["task_index"].tolist()],
            "episodes": {c: list(m.episodes[c]) for c in m.episodes.column_names},
            "episode_rows": [m.episodes[e] for e in (0, len(m.episodes) - 1)],
        },
        "items": [ds[p] for p in case["positions"]],
    })
torch.save(results, out)
"""


def _cases(root: Path) -> list[dict]:
    """Parity cases of a dataset: all episodes with windows over every camera, the state
    and the action (lerobot-train's uint8 frames), and a selection of episodes (given out of
    order) without windows, float frames; positions at the first two and last two frames of
    some episodes and one in the middle."""
    ds = LeRobotDataset("local/parity", root=root)
    cams = ds.meta.camera_keys
    deltas = {
        **{cam: [-0.2, 0.0] for cam in cams},
        "observation.state": [-0.1, 0.0],
        "action": [0.0, 0.1, 0.2, 0.3],
    }
    starts = ds.meta.episodes["dataset_from_index"]
    lengths = ds.meta.episodes["length"]
    n = len(starts)

    def edges(episodes, offset=lambda e: starts[e]):
        positions = []
        for e in episodes:
            first, length = offset(e), lengths[e]
            positions += [first, first + 1, first + length // 2, first + length - 2]
            positions.append(first + length - 1)
        return positions

    selected = [n - 1, 1, n // 2]  # given out of order, as a user may
    in_order = sorted(selected)
    selected_start = {e: sum(lengths[x] for x in in_order[: in_order.index(e)]) for e in in_order}
    return [
        {
            "episodes": None,
            "delta_timestamps": deltas,
            "return_uint8": True,
            "positions": edges([0, n // 2, n - 1]),
        },
        {
            "episodes": selected,
            "delta_timestamps": None,
            "return_uint8": False,
            "positions": edges(in_order, offset=lambda e: selected_start[e]),
        },
        {
            "episodes": selected,
            "delta_timestamps": {cams[0]: [-0.1, 0.0, 0.1], "action": [0.0, 0.1]},
            "return_uint8": True,
            "positions": edges(in_order, offset=lambda e: selected_start[e]),
        },
    ]


def _lerobot_results(root: Path, cases: list[dict], tmp: Path) -> list[dict]:
    if not LEROBOT_PYTHON.exists():
        pytest.skip(f"{LEROBOT_PYTHON} is missing (tools/lerobot_env.sh makes it)")
    out = tmp / "lerobot.pt"
    env = {"PATH": "/usr/bin:/bin", "HF_HOME": str(tmp / "hf"), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [str(LEROBOT_PYTHON), "-c", LEROBOT_SIDE, str(root), json.dumps(cases), str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return torch.load(out, weights_only=False)


def _differences(theirs, ours, where: str = "") -> list[str]:
    """Every difference between two values: tensors and arrays by dtype, shape and values,
    dicts by keys (in order) and values, lists element by element, others by ``==``."""
    if isinstance(theirs, torch.Tensor):
        if not isinstance(ours, torch.Tensor):
            return [f"{where}: {type(ours).__name__}, not a tensor"]
        if theirs.dtype != ours.dtype or theirs.shape != ours.shape:
            return [f"{where}: {theirs.dtype} {tuple(theirs.shape)} != {ours.dtype} {ours.shape}"]
        return [] if torch.equal(theirs, ours) else [f"{where}: values differ"]
    if isinstance(theirs, np.ndarray):
        same = (
            isinstance(ours, np.ndarray)
            and theirs.dtype == ours.dtype
            and np.array_equal(theirs, ours)
        )
        return [] if same else [f"{where}: {theirs!r} != {ours!r}"]
    if isinstance(theirs, dict):
        if not isinstance(ours, dict) or list(theirs) != list(ours):
            return [f"{where}: keys {list(theirs)} != {list(ours)}"]
        return [d for k in theirs for d in _differences(theirs[k], ours[k], f"{where}/{k}")]
    if isinstance(theirs, list | tuple) and isinstance(ours, list | tuple):
        if len(theirs) != len(ours) or type(theirs) is not type(ours):
            return [f"{where}: {theirs!r} != {ours!r}"]
        return [
            d
            for i, (a, b) in enumerate(zip(theirs, ours, strict=True))
            for d in _differences(a, b, f"{where}[{i}]")
        ]
    return (
        []
        if theirs == ours and type(theirs) is type(ours)
        else [f"{where}: {theirs!r} != {ours!r}"]
    )


def _robopipe_result(root: Path, case: dict, lerobot_info: dict) -> dict:
    ds = LeRobotDataset(
        "local/parity",
        root=root,
        episodes=case["episodes"],
        delta_timestamps=case["delta_timestamps"],
        return_uint8=case["return_uint8"],
        video_backend="torchcodec",
    )
    m = ds.meta
    return {
        "length": len(ds),
        "num_frames": ds.num_frames,
        "num_episodes": ds.num_episodes,
        "episodes": ds.episodes,
        "absolute_to_relative_idx": ds.absolute_to_relative_idx,
        "fps": ds.fps,
        "features": ds.features,
        "hf_task_index": ds.hf_dataset.data.column("task_index").to_pylist(),
        "meta": {
            # the keys lerobot's DatasetInfo keeps (it drops others, and tools when None)
            "info": {k: m.info[k] for k in lerobot_info if k in m.info},
            "features": m.features,
            "fps": m.fps,
            "total_frames": m.total_frames,
            "total_episodes": m.total_episodes,
            "total_tasks": m.total_tasks,
            "camera_keys": m.camera_keys,
            "video_keys": m.video_keys,
            "image_keys": m.image_keys,
            "depth_keys": m.depth_keys,
            "has_language_columns": m.has_language_columns,
            "robot_type": m.robot_type,
            "repo_id": m.repo_id,
            "shapes": m.shapes,
            "names": m.names,
            "stats": m.stats,
            "tasks": [list(m.tasks.index), m.tasks["task_index"].tolist()],
            "episodes": {c: list(m.episodes[c]) for c in m.episodes.column_names},
            "episode_rows": [m.episodes[e] for e in (0, len(m.episodes) - 1)],
        },
        "items": [ds[p] for p in case["positions"]],
    }


def _assert_parity(root: Path, tmp: Path) -> None:
    cases = _cases(root)
    theirs = _lerobot_results(root, cases, tmp)
    for case, their in zip(cases, theirs, strict=True):
        ours = _robopipe_result(root, case, their["meta"]["info"])
        # lerobot's DatasetInfo.to_dict writes shapes back as lists
        their["meta"]["info"]["features"] = their["meta"]["features"]
        assert _differences(their, ours) == [], case
        assert their["items"] and len(their["items"]) == len(case["positions"])


def test_parity_on_a_generated_dataset(rollover, tmp_path):
    _assert_parity(rollover[1], tmp_path)


def test_parity_on_lerobots_conversion_of_cr5(shared_datasets, tmp_path):
    _assert_parity(shared_datasets / CR5, tmp_path)


@pytest.mark.parametrize(
    ("argument", "value"),
    [
        ("batch_encoding_size", 4),
        ("streaming_encoding", True),
        ("encoder_threads", 2),
        ("download_videos", False),
    ],
)
def test_writer_arguments_fail_loudly(rollover, argument, value):
    with pytest.raises(NotImplementedError, match=argument):
        LeRobotDataset("local/x", root=rollover[1], **{argument: value})


def test_episode_selection_and_filter(rollover):
    root = rollover[1]
    with pytest.raises(ValueError, match="99"):
        LeRobotDataset("local/x", root=root, episodes=[0, 99])
    ds = LeRobotDataset("local/x", root=root, episode_filter=lambda ep: ep["length"] >= 20)
    lengths = ds.meta.episodes["length"]
    assert ds.episodes == [e for e, n in enumerate(lengths) if n >= 20]
    assert len(ds) == sum(n for n in lengths if n >= 20) == ds.num_frames
    with pytest.raises(ValueError, match="did not match any episode"):
        LeRobotDataset("local/x", root=root, episode_filter=lambda ep: False)


def test_image_transforms_see_every_camera(rollover):
    seen = []

    def transform(frames):
        seen.append(tuple(frames.shape))
        return frames.flip(-1)

    plain = LeRobotDataset("local/x", root=rollover[1], return_uint8=True)
    ds = LeRobotDataset("local/x", root=rollover[1], image_transforms=transform)
    assert len(seen) == 0
    item = ds[3]
    assert len(seen) == len(ds.meta.camera_keys) == 2
    for cam in ds.meta.camera_keys:
        assert torch.equal(item[cam], plain[3][cam].flip(-1).float() / 255)
    ds.clear_image_transforms()
    cam = ds.meta.camera_keys[0]
    assert torch.equal(ds[3][cam], plain[3][cam].float() / 255)


def test_missing_dataset_names_the_folder(tmp_path):
    with pytest.raises(Exception, match="info.json"):
        LeRobotDataset("local/x", root=tmp_path / "nothing")


def test_where_a_repo_id_is_read_from(rollover, tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("HF_LEROBOT_HOME", str(home))
    assert dataset_url("me/ds", None, None) == "hf://datasets/me/ds@v3.0"
    assert dataset_url("me/ds", None, "my branch") == "hf://datasets/me/ds@my%20branch"
    assert dataset_url("me/ds", None, None, "bucket") == "hf://buckets/me/ds"
    assert dataset_url("me/ds", "s3://b/ds", None) == "s3://b/ds"
    with pytest.raises(ValueError, match="repo_type"):
        dataset_url("me/ds", None, None, "model")
    (home / "me").mkdir(parents=True)
    (home / "me" / "ds").symlink_to(rollover[1])  # lerobot's local copy of me/ds
    assert dataset_url("me/ds", None, None) == str(home / "me" / "ds")
    ds = LeRobotDataset("me/ds")
    assert ds.root == home / "me" / "ds" and len(ds) == ds.meta.total_frames

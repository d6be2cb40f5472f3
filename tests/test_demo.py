"""The demo dataset (layout, content, determinism, CLI), and the writer against real v2.1 data."""

from __future__ import annotations

import json
import subprocess
import sys

import av
import numpy as np
import pyarrow.parquet as pq

from robopipe.demo import DEFAULT_CAMERAS, DEFAULT_TASKS, generate_demo
from robopipe.stats import numeric_stats

PARAMS = dict(episodes=6, cameras=2, height=32, width=48, min_length=10, max_length=30)


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def decode(path):
    with av.open(str(path)) as container:
        return np.stack([f.to_ndarray(format="rgb24") for f in container.decode(video=0)])


def test_layout_and_meta(make_v21):
    root = make_v21(**PARAMS)
    info = json.loads((root / "meta/info.json").read_text())
    assert info["total_episodes"] == 6 and info["total_videos"] == 12
    assert list(info["features"])[:4] == ["observation.state", "action", *DEFAULT_CAMERAS]
    assert info["features"]["observation.state"]["shape"] == [6]
    assert info["features"]["action"]["shape"] == [7]
    episodes = read_jsonl(root / "meta/episodes.jsonl")
    assert all(10 <= ep["length"] <= 30 for ep in episodes)
    assert info["total_frames"] == sum(ep["length"] for ep in episodes)
    assert [ep["tasks"][0] for ep in episodes] == [DEFAULT_TASKS[i % 4] for i in range(6)]
    assert len(read_jsonl(root / "meta/tasks.jsonl")) == 4
    for ep in episodes:
        i = ep["episode_index"]
        table = pq.read_table(root / f"data/chunk-000/episode_{i:06d}.parquet")
        assert table.num_rows == ep["length"]
        for camera in DEFAULT_CAMERAS:
            frames = decode(root / f"videos/chunk-000/{camera}/episode_{i:06d}.mp4")
            assert frames.shape == (ep["length"], 32, 48, 3)


def test_trajectories_are_smooth(make_v21):
    root = make_v21(**PARAMS)
    table = pq.read_table(root / "data/chunk-000/episode_000003.parquet")
    state = np.stack(table["observation.state"].to_numpy(zero_copy_only=False))
    action = np.stack(table["action"].to_numpy(zero_copy_only=False))
    assert state.dtype == np.float32 and action.dtype == np.float32
    assert np.abs(np.diff(state, axis=0)).max() < 0.2  # radians per frame at 30 fps
    assert state.std(axis=0).min() > 0  # every joint moves
    np.testing.assert_array_equal(action[:-1, :6], state[1:])  # action = next state
    assert action[:, 6].min() >= 0 and action[:, 6].max() <= 1  # gripper


def test_images_move_and_differ_per_camera(make_v21):
    root = make_v21(**PARAMS)
    front, wrist = (
        decode(root / f"videos/chunk-000/{camera}/episode_000000.mp4").astype(np.int16)
        for camera in DEFAULT_CAMERAS
    )
    assert np.abs(np.diff(front, axis=0)).mean(axis=(1, 2, 3)).min() > 1  # every frame changes
    assert np.abs(front - wrist).mean() > 20
    assert front.std() > 20  # textured, not flat


def test_deterministic_given_seed(tmp_path):
    small = dict(episodes=2, height=16, width=16, min_length=5, max_length=8, codec="h264")
    a = generate_demo(tmp_path / "a", seed=3, **small)
    b = generate_demo(tmp_path / "b", seed=3, **small)
    c = generate_demo(tmp_path / "c", seed=4, **small)
    for name in ("meta/episodes_stats.jsonl", "data/chunk-000/episode_000001.parquet"):
        assert (a / name).read_bytes() == (b / name).read_bytes()
        assert (a / name).read_bytes() != (c / name).read_bytes()
    video = f"videos/chunk-000/{DEFAULT_CAMERAS[1]}/episode_000001.mp4"
    np.testing.assert_array_equal(decode(a / video), decode(b / video))


def test_cli(tmp_path):
    out = tmp_path / "cli"
    args = [
        "--episodes",
        "2",
        "--cameras",
        "3",
        "--codec",
        "h264",
        "--height",
        "16",
        "--width",
        "32",
    ]
    args += ["--min-length", "4", "--max-length", "6", "--fps", "10", "--seed", "1"]
    result = subprocess.run(
        [sys.executable, "-m", "robopipe.demo", str(out), *args],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "wrote 2 episodes" in result.stdout and "(h264)" in result.stdout
    info = json.loads((out / "meta/info.json").read_text())
    assert info["fps"] == 10 and info["total_episodes"] == 2
    cameras = [k for k, ft in info["features"].items() if ft["dtype"] == "video"]
    assert cameras == [*DEFAULT_CAMERAS, "observation.images.cam2"]
    assert info["features"][DEFAULT_CAMERAS[0]]["shape"] == [16, 32, 3]
    assert len(list(out.glob("videos/chunk-000/*/episode_000001.mp4"))) == 3
    assert not list(tmp_path.glob(".tmp-*"))  # written under a temporary name, then renamed


def test_same_files_and_schema_as_real_dataset(make_v21, shared_datasets):
    """Our writer's info keys, default features and parquet types match a real v2.1 dataset."""
    real = shared_datasets / "cr5_banana_plate_v21"
    ours = make_v21(**PARAMS)
    real_info = json.loads((real / "meta/info.json").read_text())
    our_info = json.loads((ours / "meta/info.json").read_text())
    assert list(our_info) == list(real_info)
    assert list(our_info["features"])[-5:] == list(real_info["features"])[-5:]
    for key in list(real_info["features"])[-5:]:
        assert our_info["features"][key] == real_info["features"][key]
    camera = our_info["features"][DEFAULT_CAMERAS[0]]["info"]
    assert list(camera) == list(real_info["features"]["observation.images.top"]["info"])
    real_schema = pq.read_schema(real / "data/chunk-000/episode_000000.parquet")
    our_schema = pq.read_schema(ours / "data/chunk-000/episode_000000.parquet")
    for name in ("observation.state", "action", "timestamp", "index"):
        assert our_schema.field(name).type == real_schema.field(name).type
    real_hf = json.loads(real_schema.metadata[b"huggingface"])["info"]["features"]
    our_hf = json.loads(our_schema.metadata[b"huggingface"])["info"]["features"]
    for name in ("observation.state", "action", "timestamp", "index"):
        assert our_hf[name] == real_hf[name]


def test_numeric_stats_reproduce_real_episode_stats(shared_datasets):
    """lerobot's own stats of float32 features are what numeric_stats gives on the parquet."""
    real = shared_datasets / "cr5_banana_plate_v21"
    rows = read_jsonl(real / "meta/episodes_stats.jsonl")[:3]
    for row in rows:
        table = pq.read_table(real / f"data/chunk-000/episode_{row['episode_index']:06d}.parquet")
        for key in ("observation.state", "action", "frame_index", "index"):
            column = table[key].to_numpy(zero_copy_only=False)
            values = np.stack(column) if column.dtype == object else column
            ours = {k: v.tolist() for k, v in numeric_stats(values).items()}
            assert ours == row["stats"][key], key

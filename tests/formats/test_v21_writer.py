"""The v2.1 writer: meta files, episode parquet, mp4s and episode stats, as lerobot 0.3.x."""

from __future__ import annotations

import json
import os
from fractions import Fraction

import av
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from robopipe.errors import DatasetError
from robopipe.formats.v21_writer import V21Writer

FPS = 30
H, W = 32, 48
FEATURES = {
    "observation.state": {"dtype": "float32", "shape": [6], "names": [f"j{i}" for i in range(6)]},
    "observation.images.top": {"dtype": "video", "shape": [H, W, 3]},
    "reward": {"dtype": "float32", "shape": [1], "names": None},
    "action": {"dtype": "float32", "shape": [7], "names": None},
}
LENGTHS = (12, 7, 9)
TASKS = ("pick", "place", "pick")
DEFAULT_KEYS = ["timestamp", "frame_index", "episode_index", "index", "task_index"]


def smooth_frames(rng: np.random.Generator, length: int) -> np.ndarray:
    """uint8 (T, H, W, 3): a smooth gradient that drifts, easy for a lossy codec."""
    y, x = np.mgrid[0:H, 0:W]
    base = rng.uniform(40, 200, size=3)
    t = np.arange(length)[:, None, None, None]
    img = base + 30 * np.sin((x[..., None] + 2 * t) / 8) + 20 * np.cos(y[..., None] / 6)
    return np.clip(img, 0, 255).astype(np.uint8)


def write(root, codec="libsvtav1", chunks_size=1000):
    rng = np.random.default_rng(0)
    episodes = []
    with V21Writer(
        root, fps=FPS, features=FEATURES, robot_type="test", codec=codec, chunks_size=chunks_size
    ) as writer:
        for length, task in zip(LENGTHS, TASKS, strict=True):
            ep = {
                "frames": {"observation.images.top": smooth_frames(rng, length)},
                "columns": {
                    "observation.state": rng.normal(size=(length, 6)).astype(np.float32),
                    "reward": rng.uniform(size=length).astype(np.float32),
                    "action": rng.normal(size=(length, 7)).astype(np.float32),
                },
            }
            writer.add_episode(ep["frames"], ep["columns"], task)
            episodes.append(ep)
    return episodes


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    root = tmp_path_factory.mktemp("w") / "ds"
    return root, write(root)


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_info(written):
    root, _ = written
    info = json.loads((root / "meta/info.json").read_text())
    assert list(info) == [
        "codebase_version",
        "robot_type",
        "total_episodes",
        "total_frames",
        "total_tasks",
        "total_videos",
        "total_chunks",
        "chunks_size",
        "fps",
        "splits",
        "data_path",
        "video_path",
        "features",
    ]
    assert info["codebase_version"] == "v2.1"
    assert info["robot_type"] == "test"
    assert info["total_episodes"] == 3
    assert info["total_frames"] == sum(LENGTHS)
    assert (info["total_tasks"], info["total_videos"], info["total_chunks"]) == (2, 3, 1)
    assert (info["chunks_size"], info["fps"], info["splits"]) == (1000, FPS, {"train": "0:3"})
    assert info["data_path"] == "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet"
    assert (
        info["video_path"]
        == "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4"
    )
    assert list(info["features"]) == list(FEATURES) + DEFAULT_KEYS
    assert info["features"]["timestamp"] == {"dtype": "float32", "shape": [1], "names": None}
    for key in DEFAULT_KEYS[1:]:
        assert info["features"][key] == {"dtype": "int64", "shape": [1], "names": None}
    assert info["features"]["observation.state"] == FEATURES["observation.state"]
    video = info["features"]["observation.images.top"]
    assert video["dtype"] == "video" and video["shape"] == [H, W, 3]
    assert video["names"] == ["height", "width", "channels"]
    assert video["info"] == {
        "video.height": H,
        "video.width": W,
        "video.codec": "av1",
        "video.pix_fmt": "yuv420p",
        "video.is_depth_map": False,
        "video.fps": FPS,
        "video.channels": 3,
        "has_audio": False,
    }


def test_episodes_and_tasks(written):
    root, _ = written
    assert read_jsonl(root / "meta/tasks.jsonl") == [
        {"task_index": 0, "task": "pick"},
        {"task_index": 1, "task": "place"},
    ]
    assert read_jsonl(root / "meta/episodes.jsonl") == [
        {"episode_index": i, "tasks": [task], "length": n}
        for i, (n, task) in enumerate(zip(LENGTHS, TASKS, strict=True))
    ]


def test_parquet_schema(written):
    root, _ = written
    schema = pq.read_schema(root / "data/chunk-000/episode_000001.parquet")
    assert schema.names == ["observation.state", "reward", "action", *DEFAULT_KEYS]
    element = pa.field("element", pa.float32())
    assert schema.field("observation.state").type == pa.list_(element, 6)
    assert schema.field("action").type == pa.list_(element, 7)
    assert schema.field("reward").type == pa.float32()
    assert schema.field("timestamp").type == pa.float32()
    for key in DEFAULT_KEYS[1:]:
        assert schema.field(key).type == pa.int64()
    hf = json.loads(schema.metadata[b"huggingface"])
    value = {"dtype": "float32", "_type": "Value"}
    assert hf == {
        "info": {
            "features": {
                "observation.state": {"feature": value, "length": 6, "_type": "Sequence"},
                "reward": value,
                "action": {"feature": value, "length": 7, "_type": "Sequence"},
                "timestamp": value,
                **{k: {"dtype": "int64", "_type": "Value"} for k in DEFAULT_KEYS[1:]},
            }
        }
    }


def test_parquet_values(written):
    root, episodes = written
    start = 0
    task_of = {"pick": 0, "place": 1}
    for ep, (data, length, task) in enumerate(zip(episodes, LENGTHS, TASKS, strict=True)):
        table = pq.read_table(root / f"data/chunk-000/episode_{ep:06d}.parquet")
        assert table.num_rows == length
        cols = data["columns"]
        np.testing.assert_array_equal(
            np.stack(table["observation.state"].to_numpy(zero_copy_only=False)),
            cols["observation.state"],
        )
        np.testing.assert_array_equal(table["reward"].to_numpy(), cols["reward"])
        np.testing.assert_array_equal(table["frame_index"].to_numpy(), np.arange(length))
        np.testing.assert_array_equal(
            table["timestamp"].to_numpy(), (np.arange(length) / FPS).astype(np.float32)
        )
        assert set(table["episode_index"].to_pylist()) == {ep}
        assert set(table["task_index"].to_pylist()) == {task_of[task]}
        # the global index continues where the previous episode stopped
        np.testing.assert_array_equal(table["index"].to_numpy(), np.arange(start, start + length))
        start += length


@pytest.mark.parametrize("codec", ["libsvtav1", "h264"])
def test_videos_decode_to_input(tmp_path, codec, written):
    if codec == "libsvtav1":
        root, episodes = written
    else:
        root = tmp_path / "ds"
        episodes = write(root, codec="h264")
    info = json.loads((root / "meta/info.json").read_text())
    assert (
        info["features"]["observation.images.top"]["info"]["video.codec"]
        == {
            "libsvtav1": "av1",
            "h264": "h264",
        }[codec]
    )
    for ep, (data, length) in enumerate(zip(episodes, LENGTHS, strict=True)):
        path = root / f"videos/chunk-000/observation.images.top/episode_{ep:06d}.mp4"
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            packets = [p for p in container.demux(stream) if p.size]
            assert len(packets) == length
            assert min(p.pts for p in packets) == 0
            assert stream.duration * stream.time_base == Fraction(length, FPS)
            if codec == "libsvtav1":
                assert stream.time_base == Fraction(1, 15360)  # what lerobot's files have
            container.seek(0)
            decoded = np.stack([f.to_ndarray(format="rgb24") for f in container.decode(stream)])
        assert decoded.shape == (length, H, W, 3)
        error = np.abs(decoded.astype(np.int16) - data["frames"]["observation.images.top"])
        assert error.mean() < 4, f"episode {ep}: mean abs error {error.mean():.1f}"


def test_episode_stats(written):
    root, episodes = written
    rows = read_jsonl(root / "meta/episodes_stats.jsonl")
    assert [r["episode_index"] for r in rows] == [0, 1, 2]
    start = 0
    for row, data, length in zip(rows, episodes, LENGTHS, strict=True):
        stats = row["stats"]
        assert list(stats) == list(FEATURES) + DEFAULT_KEYS
        for key in ("observation.state", "action", "reward"):
            values = data["columns"][key]
            assert stats[key]["min"] == np.min(values, axis=0, keepdims=values.ndim == 1).tolist()
            assert stats[key]["max"] == np.max(values, axis=0, keepdims=values.ndim == 1).tolist()
            assert stats[key]["mean"] == np.mean(values, axis=0, keepdims=values.ndim == 1).tolist()
            assert stats[key]["std"] == np.std(values, axis=0, keepdims=values.ndim == 1).tolist()
            assert stats[key]["count"] == [length]
        assert stats["reward"]["mean"] == [pytest.approx(float(np.mean(data["columns"]["reward"])))]
        assert stats["index"]["min"] == [start] and stats["index"]["max"] == [start + length - 1]
        assert stats["frame_index"]["mean"] == [(length - 1) / 2]
        assert stats["timestamp"]["max"] == [pytest.approx((length - 1) / FPS)]
        image = stats["observation.images.top"]
        frames = data["frames"]["observation.images.top"]
        assert image["count"] == [length]  # fewer than 100 frames: every frame is sampled
        for key in ("min", "max", "mean", "std"):
            assert np.shape(image[key]) == (3, 1, 1)
        per_channel = frames.reshape(-1, 3)
        np.testing.assert_allclose(np.ravel(image["mean"]), per_channel.mean(axis=0) / 255)
        np.testing.assert_allclose(np.ravel(image["std"]), per_channel.std(axis=0) / 255)
        np.testing.assert_allclose(np.ravel(image["max"]), per_channel.max(axis=0) / 255)
        start += length


def test_chunks(tmp_path):
    write(tmp_path / "ds", codec="h264", chunks_size=2)
    root = tmp_path / "ds"
    info = json.loads((root / "meta/info.json").read_text())
    assert info["total_chunks"] == 2
    assert (root / "data/chunk-001/episode_000002.parquet").is_file()
    assert (root / "videos/chunk-001/observation.images.top/episode_000002.mp4").is_file()
    assert not (root / "data/chunk-000/episode_000002.parquet").exists()


def test_bad_episode_names_dataset_and_episode(tmp_path):
    writer = V21Writer(tmp_path / "bad", fps=FPS, features=FEATURES, codec="h264")
    frames = {"observation.images.top": np.zeros((5, H, W + 2, 3), np.uint8)}
    columns = {
        "observation.state": np.zeros((5, 6)),
        "reward": np.zeros(5),
        "action": np.zeros((5, 7)),
    }
    with pytest.raises(DatasetError, match=r"dataset 'bad': episode 0: .*observation.images.top"):
        writer.add_episode(frames, columns, "t")
    frames = {"observation.images.top": np.zeros((5, H, W, 3), np.uint8)}
    with pytest.raises(DatasetError, match="frame counts"):
        writer.add_episode(frames, columns | {"action": np.zeros((4, 7))}, "t")
    with pytest.raises(DatasetError, match="columns"):
        writer.add_episode(frames, {"reward": np.zeros(5)}, "t")
    with pytest.raises(ValueError, match="codec"):
        V21Writer(tmp_path / "x", fps=FPS, features=FEATURES, codec="vp9")
    assert not (tmp_path / "bad" / "meta").exists()


def test_an_av1_encode_leaves_the_scheduling_policy_as_it_was(make_v21):
    # SVT-AV1 switches the thread driving it to SCHED_FIFO 99 when run as root; processes
    # forked afterwards inherited it and starved the machine (robopipe.remux.scheduling_kept)
    before = os.sched_getscheduler(0), os.sched_getparam(0).sched_priority
    make_v21(episodes=2, cameras=1, codec="libsvtav1", seed=11)
    assert (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority) == before

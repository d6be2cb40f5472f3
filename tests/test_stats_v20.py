"""Episode stats of LeRobot v2.0 datasets as lerobot 0.3.3's v2.0 -> v2.1 script computes them
(robopipe.stats.v20_episode_stats), on generated datasets made v2.0."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import av
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from robopipe.layout import V21_DATA_PATH, V21_EPISODES_STATS_PATH, V21_INFO_PATH, V21_VIDEO_PATH
from robopipe.stats import _stats_numpy22, numeric_stats, sample_indices, v20_episode_stats

FPS = 30


@pytest.fixture(scope="module")
def v20(make_v21, tmp_path_factory) -> Path:
    """A v2.0 copy of a generated dataset: no episodes_stats.jsonl, codebase_version v2.0;
    episode 0 is the shortest, so later episodes sample past its end."""
    source = make_v21(episodes=3, cameras=2, min_length=12, max_length=40, fps=FPS, seed=3)
    lengths = [int(_lines(source, "meta/episodes.jsonl")[i]["length"]) for i in range(3)]
    assert lengths[0] < max(lengths[1:])
    root = tmp_path_factory.mktemp("v20") / "demo"
    shutil.copytree(source, root)
    (root / V21_EPISODES_STATS_PATH).unlink()
    info = json.loads((root / V21_INFO_PATH).read_text())
    info["codebase_version"] = "v2.0"
    (root / V21_INFO_PATH).write_text(json.dumps(info, indent=4))
    return root


def _lines(root: Path, rel: str) -> list[dict]:
    return [json.loads(line) for line in (root / rel).read_text().splitlines()]


def _episode(root: Path, index: int) -> tuple[dict, int, Path, dict[str, Path]]:
    info = json.loads((root / V21_INFO_PATH).read_text())
    length = _lines(root, "meta/episodes.jsonl")[index]["length"]
    data = root / V21_DATA_PATH.format(episode_chunk=0, episode_index=index)
    videos = {
        key: root / V21_VIDEO_PATH.format(episode_chunk=0, video_key=key, episode_index=index)
        for key, ft in info["features"].items()
        if ft["dtype"] == "video"
    }
    return info, length, data, videos


def _stats(root: Path, index: int) -> dict:
    info, length, data, videos = _episode(root, index)
    return v20_episode_stats(root, info, index, length, pq.read_table(data), videos)


def _all_frames(path: Path) -> np.ndarray:
    with av.open(str(path)) as container:
        return np.stack([f.to_ndarray(format="rgb24") for f in container.decode(video=0)])


def test_cameras_sample_the_dataset_rows_not_the_episodes(v20):
    """lerobot 0.3.3 reads the sampled indices as rows of the whole dataset: an episode longer
    than episode 0 takes its later samples at episode 1's times, from 0 s again."""
    lengths = [line["length"] for line in _lines(v20, "meta/episodes.jsonl")]
    for index, length in enumerate(lengths):
        info, _, _, videos = _episode(v20, index)
        rows = sample_indices(length)
        frame_of_row = np.concatenate([np.arange(n) for n in lengths])  # timestamps k / fps
        picked = frame_of_row[rows]
        assert (picked != rows).any() == (length > lengths[0])
        stats = _stats(v20, index)
        for key, path in videos.items():
            frames = _all_frames(path)[picked].transpose(0, 3, 1, 2) / np.float32(255)
            frames = np.ascontiguousarray(frames, dtype=np.float32)
            ours = stats[key]
            assert ours["count"] == [len(rows)]
            for stat, reduce in (("min", np.min), ("max", np.max), ("mean", np.mean)):
                expected = reduce(frames, axis=(0, 2, 3)).reshape(3, 1, 1)
                assert expected.dtype == np.float32
                assert ours[stat] == expected.tolist(), (index, key, stat)
            assert ours["std"] == np.std(frames, axis=(0, 2, 3)).reshape(3, 1, 1).tolist()


def test_numeric_features_as_torch_gives_them(v20, tmp_path):
    """Every feature in info.json's order; columns as ``torch.tensor`` of their Python values
    (float64 -> float32, int32 -> int64), so widening or narrowing a column's type changes
    nothing."""
    stats = _stats(v20, 1)
    info, length, data, _ = _episode(v20, 1)
    assert list(stats) == list(info["features"])
    table = pq.read_table(data)
    state = np.array(table.column("observation.state").to_pylist(), dtype=np.float32)
    assert stats["observation.state"] == {k: v.tolist() for k, v in numeric_stats(state).items()}
    assert stats["frame_index"]["count"] == [length]
    assert isinstance(stats["frame_index"]["mean"][0], float)

    root = tmp_path / "retyped"
    shutil.copytree(v20, root)
    retyped = table.set_column(
        table.schema.get_field_index("action"),
        "action",
        table.column("action").cast(pa.list_(pa.float64())),
    ).set_column(
        table.schema.get_field_index("frame_index"),
        "frame_index",
        table.column("frame_index").cast(pa.int32()),
    )
    pq.write_table(retyped, root / V21_DATA_PATH.format(episode_chunk=0, episode_index=1))
    assert _stats(root, 1) == stats


def test_refusals(v20, tmp_path):
    info, length, data, videos = _episode(v20, 0)
    with_string = {**info, "features": {**info["features"], "note": {"dtype": "string"}}}
    with pytest.raises(ValueError, match="string feature 'note'"):
        v20_episode_stats(v20, with_string, 0, length, pq.read_table(data), videos)

    # timestamps off the frames by half a frame: lerobot's 1e-4 s tolerance fails
    root = tmp_path / "shifted"
    shutil.copytree(v20, root)
    for path in sorted((root / "data").rglob("*.parquet")):
        table = pq.read_table(path)
        shifted = pa.array(table.column("timestamp").to_numpy() + np.float32(0.5 / FPS))
        pq.write_table(
            table.set_column(table.schema.get_field_index("timestamp"), "timestamp", shifted), path
        )
    with pytest.raises(ValueError, match="within 0.0001 s"):
        _stats(root, 0)


def test_sums_in_numpy_2_2_order():
    """numpy 2.3 changed how float sums are cut into chunks: the stats keep numpy 2.2.6's bits
    (the numpy of lerobot 0.3.3 on Python 3.10). Expected values printed by numpy 2.2.6."""
    x = (np.random.default_rng(11).normal(size=30000) * 3 + 1).astype(np.float32)
    column = _stats_numpy22(x, axis=0, keepdims=True)
    assert column["mean"].dtype == np.float32 and column["mean"].shape == (1,)
    assert float(column["mean"][0]).hex() == "0x1.0212380000000p+0"
    assert float(column["std"][0]).hex() == "0x1.7f46e40000000p+1"

    rng = np.random.default_rng(11)
    rng.normal(size=8193)
    frames = rng.integers(0, 256, (7, 3, 101, 97), dtype=np.uint8) / np.float32(255)
    camera = _stats_numpy22(frames, axis=(0, 2, 3), keepdims=True)
    assert camera["mean"].shape == (1, 3, 1, 1) and camera["count"].tolist() == [7]
    assert [float(v).hex() for v in camera["mean"].ravel()] == [
        "0x1.feae020000000p-2",
        "0x1.007a000000000p-1",
        "0x1.fff6620000000p-2",
    ]
    assert [float(v).hex() for v in camera["std"].ravel()] == [
        "0x1.28a0120000000p-2",
        "0x1.2820be0000000p-2",
        "0x1.28d3140000000p-2",
    ]
    ints = _stats_numpy22(np.arange(20000, dtype=np.int64)[:, None], axis=0, keepdims=False)
    assert ints["mean"].dtype == np.float64 and ints["mean"].tolist() == [9999.5]
    assert ints["min"].tolist() == [0] and ints["max"].tolist() == [19999]


def test_real_camera_stats_equal_lerobots(shared_datasets, tmp_path):
    """cr5 episode 2 (275 frames, episode 0 has 197) made v2.0 with timestamps restamped as
    ``frame_index / fps`` (lerobot 0.3 refuses cr5's own): the camera stats equal those that
    lerobot 0.3.3's convert_dataset_v20_to_v21 wrote (torchcodec 0.5, numpy 2.2.6)."""
    source = shared_datasets / "cr5_banana_plate_v21"
    info = json.loads((source / V21_INFO_PATH).read_text())
    info["codebase_version"] = "v2.0"
    for index in range(3):
        rel = V21_DATA_PATH.format(episode_chunk=0, episode_index=index)
        table = pq.read_table(source / rel)
        restamped = (table.column("frame_index").to_numpy() / info["fps"]).astype(np.float32)
        column = table.schema.get_field_index("timestamp")
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table.set_column(column, "timestamp", pa.array(restamped)), tmp_path / rel)
    camera = "observation.images.top"
    video = source / V21_VIDEO_PATH.format(episode_chunk=0, video_key=camera, episode_index=2)
    data = pq.read_table(tmp_path / V21_DATA_PATH.format(episode_chunk=0, episode_index=2))
    stats = v20_episode_stats(tmp_path, info, 2, 275, data, {camera: video})
    assert stats[camera] == {
        "min": [[[0.0]], [[0.0]], [[0.0]]],
        "max": [[[1.0]], [[1.0]], [[1.0]]],
        "mean": [[[0.43426522612571716]], [[0.40693652629852295]], [[0.30853912234306335]]],
        "std": [[[0.2555699646472931]], [[0.20488892495632172]], [[0.21023337543010712]]],
        "count": [100],
    }
    # cr5's own files with `restamp_timestamps` (issue 39, item 2): the frames are looked up at
    # the rewritten times, so the stats are those of the restamped copy; without it, no frame
    # sits at cr5's wall-clock times
    restamped = v20_episode_stats(source, info, 2, 275, data, {camera: video}, restamped=True)
    assert restamped == stats
    with pytest.raises(ValueError, match="within 0.0001 s"):
        v20_episode_stats(source, info, 2, 275, data, {camera: video})

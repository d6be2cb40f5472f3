"""The real cr5 recording (../shared/datasets; skipped where absent): its off timestamps, also
as a v2.0 dataset."""

import json
import shutil
from pathlib import Path

import av
import numpy as np
import pyarrow.parquet as pq
import pytest

from robopipe.checks.v30 import check_v30
from robopipe.conversion.serial import convert_dataset
from robopipe.errors import DatasetError
from robopipe.layout import V21_EPISODES_STATS_PATH, V21_INFO_PATH, V21_VIDEO_PATH
from robopipe.loading import MapDataset
from robopipe.sources import open_source


def test_off_timestamps_are_reported_with_the_fix(shared_datasets, tmp_path):
    with pytest.raises(DatasetError, match="restamp_timestamps: true") as caught:
        convert_dataset(shared_datasets / "cr5_banana_plate_v21", tmp_path / "v3.0", name="cr5")
    assert "timestamp differs from frame_index / fps" in str(caught.value)
    assert caught.value.file.startswith("data/chunk-000/episode_")
    assert not (tmp_path / "v3.0").exists()


def test_restamped_conversion_validates(shared_datasets, tmp_path):
    plan = convert_dataset(
        shared_datasets / "cr5_banana_plate_v21",
        tmp_path / "v3.0",
        name="cr5",
        restamp_timestamps=True,
    )
    assert plan.total_frames == 18039 and len(plan.episodes) == 81
    table = pq.read_table(tmp_path / "v3.0/data/chunk-000/file-000.parquet")
    frame_index = table.column("frame_index").to_numpy()
    timestamp = table.column("timestamp").to_numpy()
    assert abs(timestamp - frame_index / 10).max() < 1e-6
    # the timestamp stats describe the restamped column, not the source's wall-clock times
    stats = json.loads((tmp_path / "v3.0/meta/stats.json").read_text())["timestamp"]
    assert stats["min"] == [0.0]
    assert stats["max"] == [pytest.approx((frame_index.max()) / 10, rel=1e-6)]
    assert stats["mean"] == [pytest.approx(timestamp.astype("float64").mean(), rel=1e-5)]
    assert stats["count"] == [18039]


@pytest.fixture
def cr5_v20(cr5_small, tmp_path):
    """cr5's first 4 episodes as LeRobot v2.0 (issue 39, item 2): no episodes_stats.jsonl,
    codebase_version v2.0; its timestamps wall-clock, as cr5's are."""
    root = Path(shutil.copytree(cr5_small, tmp_path / "src"))
    (root / V21_EPISODES_STATS_PATH).unlink()
    info = json.loads((root / V21_INFO_PATH).read_text())
    (root / V21_INFO_PATH).write_text(json.dumps({**info, "codebase_version": "v2.0"}, indent=4))
    return root


def _source_frame(root: Path, episode: int, key: str, frame: int) -> np.ndarray:
    """Frame ``frame`` of the v2.1/v2.0 source's own mp4 of ``episode``, uint8 (C, H, W)."""
    rel = V21_VIDEO_PATH.format(episode_chunk=0, video_key=key, episode_index=episode)
    with av.open(str(root / rel)) as container:
        for position, decoded in enumerate(container.decode(video=0)):
            if position == frame:
                return decoded.to_ndarray(format="rgb24").transpose(2, 0, 1)
    raise AssertionError(f"{rel} has no frame {frame}")


def test_cr5_as_v20_with_restamped_timestamps_converts(cr5_v20, tmp_path, lerobot_loads):
    """The v2.0 stats look frames up at the restamped times, as every other step does: the
    conversion goes through (it failed in the shard job, no frame at cr5's wall-clock times),
    robopipe's loader and lerobot 0.6.1's serve the source's frames."""
    source = open_source("cr5", {"path": str(cr5_v20), "conversion": {"restamp_timestamps": True}})
    assert source.version == "v2.0"
    out = tmp_path / "v3.0"
    convert_dataset(cr5_v20, out, name="cr5", **source.options.to_dict())  # validated
    assert check_v30(out, "cr5").ok
    stamps = pq.read_table(next(out.glob("data/*/*.parquet")), columns=["frame_index", "timestamp"])
    assert np.array_equal(
        stamps.column("timestamp").to_numpy(),
        (stamps.column("frame_index").to_numpy() / 10).astype(np.float32),
    )
    episodes = pq.read_table(next(out.glob("meta/episodes/*/*.parquet"))).to_pylist()
    features = json.loads((out / "meta/info.json").read_text())["features"]
    cameras = [key for key, feature in features.items() if feature["dtype"] == "video"]
    for row in episodes:  # computed from the frames at the restamped times, per channel
        for key in cameras:
            assert row[f"stats/{key}/count"] == [100]
            assert 0 < np.asarray(row[f"stats/{key}/mean"]).min() < 1

    items = MapDataset(str(out), image_dtype="uint8")
    rng = np.random.default_rng(0)
    for index in sorted(rng.choice(len(items), 6, replace=False).tolist()):
        item = items[index]
        episode, frame = int(item["episode_index"]), int(item["frame_index"])
        for key in cameras:
            want = _source_frame(cr5_v20, episode, key, frame)
            assert np.array_equal(item[key].numpy(), want), (index, key)

    lerobot_loads(out, cr5_v20, tmp_path)

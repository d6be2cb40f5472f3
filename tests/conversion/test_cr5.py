"""The real cr5 recording (../shared/datasets; skipped where absent): its off timestamps."""

import json

import pyarrow.parquet as pq
import pytest

from robopipe.conversion.serial import convert_dataset
from robopipe.errors import DatasetError


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

"""Items of both loaders equal the source v2.1 parquet rows and mp4 frames, bit for bit."""

import numpy as np
import pytest
import torch

from robopipe.errors import DatasetError
from robopipe.loading import MapDataset, StreamingDataset, mode_delta_timestamps

CAMERAS = ["observation.images.front", "observation.images.wrist"]
WINDOW = {"observation.images.front": [-0.3, -0.1, 0.0, 0.2], "observation.state": [-0.2, 0.0, 0.1]}


def check_item(item, source, delta_timestamps):
    """Compare one item with the source rows and frames; return the pad masks seen."""
    index = int(item["index"])
    row = source.rows.iloc[index]
    episode_rows = source.rows[source.rows.episode_index == row.episode_index]
    lo, hi = int(episode_rows["index"].min()), int(episode_rows["index"].max())
    for key in ("timestamp", "frame_index", "episode_index", "task_index"):
        assert item[key].ndim == 0
        assert item[key].item() == pytest.approx(row[key])
    assert item["action"].numpy().tolist() == pytest.approx(row["action"].tolist())
    assert isinstance(item["task"], str)
    for key, deltas in (delta_timestamps or {}).items():
        wanted = [index + round(d * 10) for d in deltas]
        clamped = [min(max(q, lo), hi) for q in wanted]
        pad = [q != c for q, c in zip(wanted, clamped, strict=True)]
        assert item[f"{key}_is_pad"].tolist() == pad
        if key in CAMERAS:
            expected = np.stack([source.frame(key, q) for q in clamped])
            assert item[key].dtype == torch.uint8 and np.array_equal(item[key].numpy(), expected)
        else:
            expected = np.stack([source.rows.iloc[q][key] for q in clamped])
            assert np.array_equal(item[key].numpy(), expected)
    for cam in CAMERAS:
        if cam not in (delta_timestamps or {}):
            assert item[cam].shape == (3, 32, 48)
            assert np.array_equal(item[cam].numpy(), source.frame(cam, index))
    if "observation.state" not in (delta_timestamps or {}):
        assert np.array_equal(item["observation.state"].numpy(), np.stack(row["observation.state"]))


@pytest.mark.parametrize("delta_timestamps", [None, WINDOW], ids=["single", "window"])
def test_map_items_equal_source(rollover, source, delta_timestamps):
    ds = MapDataset(rollover[1], delta_timestamps=delta_timestamps)
    assert len(ds) == len(source.rows)
    rng = np.random.default_rng(0)
    starts = source.rows.groupby("episode_index")["index"].agg(["min", "max"])
    edges = [*starts["min"].tolist()[:3], *starts["max"].tolist()[-3:]]
    for index in [*edges, *rng.integers(0, len(ds), 25).tolist()]:
        check_item(ds[int(index)], source, delta_timestamps)


def test_map_pads_at_episode_edges(rollover):
    ds = MapDataset(rollover[1], delta_timestamps=WINDOW)
    first = ds[int(ds.meta.episodes["dataset_from_index"][3])]
    last = ds[int(ds.meta.episodes["dataset_to_index"][3]) - 1]
    assert first["observation.images.front_is_pad"].tolist() == [True, True, False, False]
    assert last["observation.images.front_is_pad"].tolist() == [False, False, False, True]
    assert torch.equal(last["observation.images.front"][2], last["observation.images.front"][3])


def test_sarm_mode_shapes_and_float32(rollover):
    ds = MapDataset(
        rollover[1],
        delta_timestamps=mode_delta_timestamps("sarm", CAMERAS, 10),
        image_dtype="float32",
    )
    item = ds[len(ds) - 1]
    for cam in CAMERAS:
        assert item[cam].shape == (8, 3, 32, 48) and item[cam].dtype == torch.float32
        assert float(item[cam].min()) >= 0.0 and float(item[cam].max()) <= 1.0
    assert item["observation.state"].shape == (8, 6)
    assert item["observation.state_is_pad"][-1].item() is False


def test_streaming_items_equal_source(rollover, source):
    ds = StreamingDataset(rollover[1], delta_timestamps=WINDOW, shuffle_buffer=16)
    items = list(ds)
    assert sorted(int(i["index"]) for i in items) == list(range(len(source.rows)))
    for item in items[::7]:
        check_item(item, source, WINDOW)


def test_timestamp_that_misses_a_frame_is_a_clear_error(rollover):
    ds = MapDataset(rollover[1])
    ds.columns["timestamp"] = ds.columns["timestamp"] + np.float32(0.03)
    with pytest.raises(DatasetError, match=r"rollover.*episode 0.*tolerance_s"):
        ds[1]


def test_cuda_decode_matches_cpu_shape(rollover):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    cpu = MapDataset(rollover[1])[5]
    ds = MapDataset(rollover[1], decode_device="cuda")
    item = ds[5]
    assert item[CAMERAS[0]].device.type == "cuda"
    assert item[CAMERAS[0]].shape == cpu[CAMERAS[0]].shape
    assert ds.reader.decoders.cpu_fallback is not None

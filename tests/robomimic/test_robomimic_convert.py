"""robomimic -> v2.1 -> v3.0: the sharded conversion, and the HDF5 loader's items against the
v3.0 loader's for the same demo and step (every cache mode, single steps and windows)."""

from __future__ import annotations

import filecmp
import json

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from robopipe.errors import DatasetError
from robopipe.loading import MapDataset
from robopipe.robomimic.dataset import CACHE_MODES, RobomimicDataset, seq_length_delta_timestamps
from robopipe.robomimic.to_v21 import RobomimicOptions, assemble, make_plan

SEQ_LENGTH = 4


def items_equal(hdf5_item: dict, v30_item: dict, image_tolerance: float | None = None) -> None:
    """Same keys, dtypes and shapes; equal values (images: mean |diff| within tolerance)."""
    assert set(hdf5_item) == set(v30_item)
    for key, value in hdf5_item.items():
        other = v30_item[key]
        if key == "task":
            assert value == other
            continue
        assert (value.dtype, value.shape) == (other.dtype, other.shape), key
        if image_tolerance is not None and key.startswith("observation.images."):
            diff = (value.float() - other.float()).abs().mean().item()
            assert diff <= image_tolerance, (key, diff)
        else:
            assert torch.equal(value, other), key


def sample_indices(lengths) -> list[int]:
    """First, second and last step of every demo (window padding at both ends)."""
    starts = np.concatenate([[0], np.cumsum(lengths)])
    return sorted(
        {int(i) for s, e in zip(starts[:-1], starts[1:], strict=True) for i in (s, s + 1, e - 1)}
    )


def test_lossless_items_equal_exactly(generated_hdf5, convert):
    _, v30 = convert(generated_hdf5, "gen", codec="h264_lossless", demos_per_batch=5)
    features = list(RobomimicDataset(generated_hdf5, cache_mode="none").file.features())
    delta = seq_length_delta_timestamps(features, SEQ_LENGTH, 20)
    for window in (None, delta):
        v30_ds = MapDataset(str(v30), delta_timestamps=window)
        for mode in CACHE_MODES:
            kwargs = {"seq_length": SEQ_LENGTH} if window else {}
            ds = RobomimicDataset(generated_hdf5, cache_mode=mode, **kwargs)
            assert len(ds) == len(v30_ds)
            for i in sample_indices(ds.file.lengths):
                items_equal(ds[i], v30_ds[i])
    item = ds[int(ds.starts[10]) + int(ds.file.lengths[10]) - 2]  # demo_10, second-last step
    assert int(item["episode_index"]) == 10
    assert item["action_is_pad"].tolist() == [False, False, True, True]
    assert torch.equal(item["action"][2], item["action"][1])  # padded by the last step
    assert item["observation.images.agentview_image"].shape == (SEQ_LENGTH, 3, 32, 48)


def test_default_codec_within_loss(generated_hdf5, convert):
    v21, v30 = convert(generated_hdf5, "gen_av1")
    info = json.loads((v30 / "meta/info.json").read_text())
    assert info["features"]["observation.images.agentview_image"]["info"]["video.codec"] == "av1"
    ds = RobomimicDataset(generated_hdf5, cache_mode="all")
    v30_ds = MapDataset(str(v30))
    # AV1 at crf 30 is off by ~3-4.5 levels on average on these 32x48 frames; the generated
    # stripes move one pixel per step, so the next step's frame is off by more than 7.
    for i in sample_indices(ds.file.lengths):
        items_equal(ds[i], v30_ds[i], image_tolerance=6.0)
    key = "observation.images.agentview_image"
    for i in range(1, 6):
        assert (ds[i][key].float() - v30_ds[i + 1][key].float()).abs().mean() > 6.0


def test_v30_episodes_keep_demo_names_and_masks(generated_hdf5, convert):
    _, v30 = convert(generated_hdf5, "gen", codec="h264_lossless", demos_per_batch=5)
    episodes = pq.read_table(v30 / "meta/episodes/chunk-000/file-000.parquet").to_pydict()
    source = RobomimicDataset(generated_hdf5, cache_mode="none").file
    assert episodes["robomimic/demo"] == source.demos
    assert episodes["robomimic/masks"] == [source.masks[d] for d in source.demos]
    assert sorted({m for masks in episodes["robomimic/masks"] for m in masks}) == ["train", "valid"]
    info = json.loads((v30 / "meta/info.json").read_text())
    assert info["features"]["next.done"]["dtype"] == "bool"
    assert info["total_episodes"] == 12 and info["robot_type"] == "Panda"
    tasks = pq.read_table(v30 / "meta/tasks.parquet").to_pandas()
    assert list(tasks.index) == ["GeneratedReach"]


def test_batches_equal_one_writer_and_are_hard_linked(generated_hdf5, convert, tmp_path):
    batched, _ = convert(generated_hdf5, "gen", codec="h264_lossless", demos_per_batch=5)
    single, _ = convert(generated_hdf5, "gen1", codec="h264_lossless", demos_per_batch=100)
    files = sorted(p.relative_to(single) for p in single.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(batched) for p in batched.rglob("*") if p.is_file())
    _, mismatch, errors = filecmp.cmpfiles(single, batched, [str(f) for f in files], shallow=False)
    assert mismatch == [] and errors == []
    parquet = batched / "data/chunk-000/episode_000007.parquet"
    linked = (
        batched.with_name(f".{batched.name}.batches") / "batch-001" / parquet.relative_to(batched)
    )
    assert parquet.stat().st_ino == linked.stat().st_ino  # demo 7 is in the second batch


def test_assemble_refuses_a_missing_batch(generated_hdf5, convert, tmp_path):
    batched, _ = convert(generated_hdf5, "gen", codec="h264_lossless", demos_per_batch=5)
    plan = make_plan(generated_hdf5, "gen", RobomimicOptions(demos_per_batch=5))
    work = batched.with_name(f".{batched.name}.batches")
    with pytest.raises(DatasetError, match="2 batches for 3 planned"):
        assemble(plan, [work / "batch-000", work / "batch-002"], tmp_path / "out")
    with pytest.raises(DatasetError, match="does not follow"):
        assemble({**plan, "batches": plan["batches"][:2]}, [work / "batch-000", work / "batch-002"],
                 tmp_path / "out")  # fmt: skip
    assert not (tmp_path / "out").exists()


def test_assemble_links_only_episode_files_and_leaves_the_batches_alone(
    generated_hdf5, convert, tmp_path
):
    batched, _ = convert(generated_hdf5, "gen", codec="h264_lossless", demos_per_batch=5)
    plan = make_plan(generated_hdf5, "gen", RobomimicOptions(demos_per_batch=5))
    work = batched.with_name(f".{batched.name}.batches")
    batches = [work / b["id"] for b in plan["batches"]]
    for i, batch in enumerate(batches):  # what Snakemake leaves in a directory output
        (batch / ".snakemake_timestamp").write_text(str(i))
    assemble(plan, batches, tmp_path / "out")
    assert not (tmp_path / "out/.snakemake_timestamp").exists()
    assert not (tmp_path / "out/part.json").exists()
    assert [(b / ".snakemake_timestamp").read_text() for b in batches] == ["0", "1", "2"]
    files = sorted(p.relative_to(batched) for p in batched.rglob("*") if p.is_file())
    assert files == sorted(
        p.relative_to(tmp_path / "out") for p in (tmp_path / "out").rglob("*") if p.is_file()
    )


def test_real_lift_low_dim(lift_hdf5, convert):
    _, v30 = convert(lift_hdf5, "lift", task="Lift", demos_per_batch=64)
    info = json.loads((v30 / "meta/info.json").read_text())
    assert (info["total_episodes"], info["total_frames"], info["fps"]) == (200, 10167, 20)
    features = ["observation.state", "action", "next.reward", "next.done"]
    delta = seq_length_delta_timestamps(features, 10, 20)
    v30_ds = MapDataset(str(v30), delta_timestamps=delta)
    indices = sample_indices(RobomimicDataset(lift_hdf5, task="Lift").file.lengths)[::7]
    for mode in CACHE_MODES:
        ds = RobomimicDataset(lift_hdf5, cache_mode=mode, task="Lift", seq_length=10)
        for i in indices:
            items_equal(ds[i], v30_ds[i])
    episodes = pq.read_table(v30 / "meta/episodes/chunk-000/file-000.parquet")
    assert episodes.column("robomimic/demo").to_pylist()[:11][-1] == "demo_10"
    assert "robomimic/masks" not in episodes.column_names  # the file has no masks

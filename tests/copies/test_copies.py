"""Training copies: each encoding gives a v3.0 dataset the loaders read, with the source's
items and timestamps, its size and fidelity measured; fidelity metrics on known inputs."""

from __future__ import annotations

import json
import math
import tracemalloc
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from robopipe.copies.encodings import parse_encoding
from robopipe.copies.fidelity import Fidelity, psnr, ssim
from robopipe.copies.make import make_copy
from robopipe.errors import DatasetError
from robopipe.formats.v30_reader import read_data_file, read_meta
from robopipe.loading import MapDataset, StreamingDataset

# encoding -> (frame height, width) at the source's 48x64, lossless?
ENCODINGS = {
    "original": ((48, 64), True),
    "h264g2": ((48, 64), False),
    "h264intra": ((48, 64), False),
    "hevc": ((48, 64), False),
    "av1fast": ((48, 64), False),
    "jpeg90": ((48, 64), False),
    "raw": ((48, 64), True),
    "h264g2_24x32": ((24, 32), False),
    "raw_16": ((16, 16), True),
}


@pytest.mark.parametrize("encoding", list(ENCODINGS))
def test_copy_loads_like_the_source(v30, tmp_path, encoding):
    (height, width), lossless = ENCODINGS[encoding]
    measured = make_copy(v30, tmp_path / "v3.0", tmp_path / "copy.json", encoding)
    assert json.loads((tmp_path / "copy.json").read_text()) == measured
    source, copy = MapDataset(v30), MapDataset(tmp_path / "v3.0")
    cams = source.meta.video_keys
    assert len(copy) == len(source) and copy.meta.camera_keys == cams
    assert measured["frames"] == len(source) * len(cams)
    assert measured["raw_bytes"] == measured["frames"] * height * width * 3
    assert measured["compression_factor"] == measured["raw_bytes"] / measured["frame_bytes"]
    fidelity = measured["fidelity"]
    assert fidelity["lossless"] is lossless
    if encoding != "original":
        assert fidelity["frames_compared"] == measured["frames"]
    if not lossless:
        assert 20 < fidelity["psnr_worst_db"] <= fidelity["psnr_mean_db"] < 60
        assert 0.5 < fidelity["ssim_worst"] <= fidelity["ssim_mean"] < 1
    for i in range(0, len(source), 7):
        a, b = source[i], copy[i]
        assert a.keys() == b.keys()
        for key in a:
            if key in cams:
                assert b[key].shape == (3, height, width) and b[key].dtype == torch.uint8
            elif key != "task":
                assert torch.equal(a[key], b[key])
        if (height, width) == (48, 64):  # the same frame, within the codec's loss
            diff = (a[cams[0]].int() - b[cams[0]].int()).abs().float().mean()
            assert diff == 0 if encoding == "original" else diff < 12
    stream = StreamingDataset(tmp_path / "v3.0")
    assert sum(1 for _ in stream) == len(source)


def test_original_is_a_stream_copy(v30, tmp_path):
    make_copy(v30, tmp_path / "v3.0", tmp_path / "copy.json", "original")
    for mp4 in v30.glob("videos/*/*/*.mp4"):
        assert (tmp_path / "v3.0" / mp4.relative_to(v30)).read_bytes() == mp4.read_bytes()


def test_raw_frames_are_the_source_frames(v30, tmp_path):
    make_copy(v30, tmp_path / "v3.0", tmp_path / "copy.json", "raw")
    source, copy = MapDataset(v30), MapDataset(tmp_path / "v3.0", image_dtype="float32")
    info = json.loads((tmp_path / "v3.0/meta/info.json").read_text())
    cam = source.meta.video_keys[0]
    assert info["features"][cam]["dtype"] == "image" and info["video_path"] is None
    for i in (0, len(source) // 2, len(source) - 1):
        assert torch.equal(source[i][cam].float() / 255, copy[i][cam])


def test_data_columns_are_read_without_the_frames(v30, tmp_path):
    """A loader reads a raw copy's data columns without reading its frames into memory (the
    whole file once cost a 2.7 GB peak on cr5's raw_224 copy)."""
    make_copy(v30, tmp_path / "v3.0", tmp_path / "copy.json", "raw")
    meta = read_meta(tmp_path / "v3.0")
    relative = meta.data_file(0)
    size = Path(meta.path(relative)).stat().st_size
    tracemalloc.start()
    columns = read_data_file(meta, relative)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert set(columns) == set(meta.data_keys)
    assert peak < size / 4, f"reading the data columns peaked at {peak} B of a {size} B file"


def test_windows_read_stored_frames(v30, tmp_path):
    make_copy(v30, tmp_path / "v3.0", tmp_path / "copy.json", "jpeg95")
    deltas = {"observation.images.front": [-0.1, 0.0]}
    copy = MapDataset(tmp_path / "v3.0", delta_timestamps=deltas)
    item = copy[0]
    assert item["observation.images.front"].shape == (2, 3, 48, 64)
    assert item["observation.images.front_is_pad"].tolist() == [True, False]


def test_an_undecodable_stored_frame_names_its_episode_frame_and_file(v30, tmp_path):
    make_copy(v30, tmp_path / "v3.0", tmp_path / "copy.json", "jpeg90")
    copy = MapDataset(tmp_path / "v3.0")
    relative = copy.meta.data_file(1)
    table = pq.read_table(tmp_path / "v3.0" / relative)
    key = "observation.images.front"
    frames = table.column(key).to_pylist()
    episodes, positions = (table.column(c).to_numpy() for c in ("episode_index", "frame_index"))
    at = int(np.flatnonzero((episodes == 1) & (positions == 2))[0])  # episode 1's third frame
    frames[at] = {"bytes": frames[at]["bytes"][:200], "path": ""}  # a truncated JPEG
    column = pa.array(frames, type=table.schema.field(key).type)
    table = table.set_column(table.schema.get_field_index(key), key, column)
    pq.write_table(table, tmp_path / "v3.0" / relative, row_group_size=1)
    copy = MapDataset(tmp_path / "v3.0")
    with pytest.raises(DatasetError) as raised:
        copy[int(copy.meta.episodes["dataset_from_index"][1]) + 2]
    message = str(raised.value)
    assert "episode 1" in message and relative in message and f"frame 2 of {key}" in message
    assert len(message.splitlines()) == 1


@pytest.mark.parametrize(
    "name, error",
    [("original_224", "cannot resize"), ("jpeg0", "quality"), ("webp", "bad encoding"),
     ("h264g2_0", "positive"), ("lance_224", "no size")],
)  # fmt: skip
def test_bad_encodings(name, error):
    with pytest.raises(ValueError, match=error):
        parse_encoding(name)


def test_encoding_names():
    e = parse_encoding("jpeg85_224")
    assert (e.kind, e.base, e.size, e.quality, e.in_video_files) == (
        "jpeg",
        "jpeg85",
        (224, 224),
        85,
        False,
    )
    assert parse_encoding("av1fast_240x320").size == (240, 320)
    assert parse_encoding("hevc").in_video_files
    assert parse_encoding("lance").kind == "lance"


def test_the_lance_copy_is_one_job_not_one_per_file():
    import re

    from robopipe.copies.encodings import ENCODING_PATTERN, FILE_ENCODING_PATTERN

    assert re.fullmatch(ENCODING_PATTERN, "lance")
    assert not re.fullmatch(FILE_ENCODING_PATTERN, "lance")
    assert re.fullmatch(FILE_ENCODING_PATTERN, "jpeg90_224")


def test_fidelity_metrics():
    rng = np.random.default_rng(0)
    frame = rng.integers(0, 256, (32, 40, 3), dtype=np.uint8)
    assert math.isinf(psnr(frame, frame)) and ssim(frame, frame) == pytest.approx(1.0)
    shifted = np.clip(frame.astype(int) + 1, 0, 255).astype(np.uint8)
    mse = np.mean((shifted.astype(int) - frame) ** 2)
    assert psnr(frame, shifted) == pytest.approx(10 * math.log10(255**2 / mse))
    noisy = np.clip(frame + rng.normal(0, 20, frame.shape), 0, 255).astype(np.uint8)
    assert ssim(frame, noisy) < ssim(frame, shifted) < 1
    fidelity = Fidelity(stride=2)
    for _ in range(3):
        fidelity.add(frame, noisy)
    summary = fidelity.summary()
    assert summary["frames_compared"] == 2 and not summary["lossless"]
    assert summary["psnr_worst_db"] == pytest.approx(psnr(frame, noisy))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU: NVDEC decoding not tested")
def test_cuda_decodes_the_h264_copy(v30, tmp_path):
    make_copy(v30, tmp_path / "v3.0", tmp_path / "copy.json", "h264g2")
    cpu = MapDataset(tmp_path / "v3.0")
    cuda = MapDataset(tmp_path / "v3.0", decode_device="cuda")
    cam = cpu.meta.video_keys[0]
    for i in (0, len(cpu) // 2, len(cpu) - 1):
        a, b = cpu[i][cam], cuda[i][cam]
        assert b.device.type == "cuda" and b.shape == a.shape
        assert (a.int() - b.cpu().int()).abs().float().mean() < 3  # NVDEC's colour conversion
    assert cuda.reader.decoders.cpu_fallback is False

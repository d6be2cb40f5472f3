"""The checks on v3.0: faults injected into a v2.1 copy and converted in-process
(robopipe.conversion.serial), and faults written into a v3.0 copy's packed files; batches
per data file (v30_batches); the readers give the same columns and frames for both versions."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from robopipe.conversion.serial import convert_dataset
from robopipe.harness import faults
from robopipe.quality import (
    QualityOptions,
    check_batch,
    merge_batches,
    read_episode_columns,
    read_episode_frames,
    v30_batches,
)

# small files: one data file and one video file per episode, so batches are per data file
SMALL_FILES = dict(data_file_size_in_mb=0.002, video_file_size_in_mb=0.01)


def run_v30(root: Path, out: Path, options: QualityOptions | None = None) -> dict:
    """The checks in one batch job per data file of ``root``, merged."""
    options = options or QualityOptions()
    parts = []
    for i, episodes in enumerate(v30_batches(str(root))):
        parts.append(out / "parts" / f"{i}.json")
        check_batch(str(root), episodes, options, parts[-1])
    return merge_batches(parts, out, dataset=root.name, source=str(root), options=options)


@pytest.fixture(scope="session")
def clean_v30(clean_v21, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("v30") / "clean"
    convert_dataset(clean_v21, out, name="clean", **SMALL_FILES)
    return out


def by_episode(report: dict) -> dict:
    found: dict = {}
    for f in report["findings"]:
        found.setdefault(f["episode_index"], set()).add(f["check"])
    return found


def test_converted_faults_are_found_in_their_episodes(clean_v21, tmp_path):
    source = faults.copy_dataset(clean_v21, tmp_path / "src")
    injected = [
        faults.inject_action_jump(source, 1),
        faults.inject_frozen_camera(source, 2),
        faults.inject_wrong_stats(source, 3),
        faults.inject_black_camera(source, 4),
        faults.inject_length_outlier(source, 5, length=4),
        faults.inject_duplicate_episode(source, 7, of=0),
    ]
    v30 = tmp_path / "v30"
    convert_dataset(source, v30, name="damaged", **SMALL_FILES)
    assert len(v30_batches(str(v30))) > 1
    report = run_v30(v30, tmp_path / "q")
    assert report["codebase_version"] == "v3.0"
    found = by_episode(report)
    assert {e: found.get(e) for e in range(8)} == {
        **{e: None for e in range(8)},
        **{f.episode: {f.check} for f in injected},
    }
    # stats.json aggregates the wrong episode stats: a dataset-wide finding, no episode
    assert found[None] == {"stats_mismatch"}
    assert not [f for f in report["findings"] if f["severity"] == "error"]


def test_faults_written_into_v30_files(clean_v30, tmp_path):
    root = Path(shutil.copytree(clean_v30, tmp_path / "v30"))
    injected = [
        faults.inject_nan(root, 2, value=float("inf")),
        faults.inject_frozen_signal(root, 4, frames=15),
        faults.inject_black_camera(root, 6, start=8),
    ]
    report = run_v30(root, tmp_path / "q")
    found = by_episode(report)
    assert {e: found.get(e) for e in range(8)} == {
        **{e: None for e in range(8)},
        **{f.episode: {f.check} for f in injected},
    }


def test_readers_agree_across_versions(clean_v21, clean_v30):
    keys = ["observation.state", "action", "timestamp"]
    for episode in (0, 5):
        old = read_episode_columns(str(clean_v21), episode, keys)
        new = read_episode_columns(str(clean_v30), episode, keys)
        for key in keys:
            np.testing.assert_array_equal(old[key], new[key])
        assert old["observation.state"].shape == (len(old["timestamp"]), 6)
        camera = "observation.images.front"
        frames = [0, 7, 3]
        a = read_episode_frames(str(clean_v21), episode, camera, frames)
        b = read_episode_frames(str(clean_v30), episode, camera, frames)
        assert a.shape == (3, 32, 48, 3) and a.dtype == np.uint8
        np.testing.assert_array_equal(a, b)  # the conversion copies the packets


@pytest.mark.parametrize("version", ["v2.1", "v3.0"])
def test_a_dataset_in_an_s3_bucket_is_checked_as_locally(
    clean_v21, clean_v30, s3_server, tmp_path, version
):
    local = Path(shutil.copytree(clean_v21 if version == "v2.1" else clean_v30, tmp_path / "d"))
    faults.inject_black_camera(local, 3)
    faults.inject_nan(local, 5)
    s3_server.fs.put(str(local), f"{s3_server.bucket}/d", recursive=True)
    options = QualityOptions()
    url, episodes = s3_server.url("d"), list(range(8))
    check_batch(url, episodes, options, tmp_path / "remote.json",
                storage_options=s3_server.storage_options)  # fmt: skip
    check_batch(str(local), episodes, options, tmp_path / "local.json")
    remote = merge_batches([tmp_path / "remote.json"], tmp_path / "r", dataset="d", source=url,
                           options=options)  # fmt: skip
    here = merge_batches([tmp_path / "local.json"], tmp_path / "l", dataset="d", source="d",
                         options=options)  # fmt: skip
    assert remote["findings"] == here["findings"]
    assert {(f["episode_index"], f["check"]) for f in remote["findings"]} == {
        (3, "black_camera"),
        (5, "nan_inf"),
    }

"""lerobot-lancedb's doctor as validation's outside opinion: a good dataset passes, a broken
one fails with the doctor's words, and without the peer environment it is skipped."""

import shutil
from pathlib import Path

import pytest

from robopipe.bench import peers
from robopipe.conversion.doctor import run_doctor
from robopipe.conversion.serial import convert_dataset
from robopipe.errors import DatasetError

REPO = Path(__file__).resolve().parents[2]
PEER_PYTHON = str(REPO / peers.DEFAULT_PEER_PYTHON)
needs_peers = pytest.mark.skipif(
    "lerobot-lancedb" not in peers.peer_packages(PEER_PYTHON),
    reason="no peer environment with lerobot-lancedb (tools/install.sh --peers)",
)


@pytest.fixture(scope="module")
def v30(make_v21, tmp_path_factory) -> Path:
    source = make_v21(episodes=4, cameras=2, fps=10, min_length=10, max_length=20)
    out = tmp_path_factory.mktemp("doctor") / "v3.0"
    convert_dataset(source, out, name="tiny", video_file_size_in_mb=0.02)
    return out


def test_without_the_peer_environment_the_doctor_is_skipped(v30):
    verdict = run_doctor(v30, None, "tiny")
    assert verdict["passed"] is None and peers.NO_PEERS in verdict["skipped"]


@needs_peers
def test_a_converted_dataset_passes(v30):
    verdict = run_doctor(v30, PEER_PYTHON, "tiny")
    assert verdict["passed"] and verdict["tool"] == "lerobot-lancedb 0.3.1"
    assert verdict["checks"] == dict.fromkeys(
        ["META", "BOUNDARIES", "DATA", "VIDEOS", "SUPPLY"], "ok"
    )


@needs_peers
@pytest.mark.parametrize(
    ("breakage", "flag"),
    [
        ("empty_video", "VIDEOS: referenced, non-empty, readable, no orphans; zero-byte video"),
        ("orphan_parquet", "DATA: parquet files referenced, accounted, no orphans; 1 orphan"),
    ],
)
def test_a_broken_dataset_fails_with_the_doctors_message(v30, tmp_path, breakage, flag):
    broken = tmp_path / "v3.0"
    shutil.copytree(v30, broken)
    if breakage == "empty_video":
        next(broken.glob("videos/*/*/file-001.mp4")).write_bytes(b"")
    else:
        data = next(broken.glob("data/*/file-000.parquet"))
        shutil.copy(data, data.with_name("file-099.parquet"))
    with pytest.raises(DatasetError, match=f"^dataset 'tiny': lerobot-lance-doctor flags .*{flag}"):
        run_doctor(broken, PEER_PYTHON, "tiny")

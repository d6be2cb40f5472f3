"""lerobot-lancedb's doctor as validation's outside opinion: a good dataset passes, a broken
one fails with the doctor's words, and without the peer environment it is skipped. The check
of a v3.0 source asks it too (check.json's ``doctor``), of local folders only."""

import shutil
from pathlib import Path

import pytest

from robopipe import peer_env
from robopipe.bench.servers import nginx_binary, serve_nginx
from robopipe.checks.doctor import DOCTOR, run_doctor
from robopipe.checks.v30 import check_v30
from robopipe.conversion.serial import convert_dataset
from robopipe.errors import DatasetError

REPO = Path(__file__).resolve().parents[2]
PEER_PYTHON = str(REPO / peer_env.DEFAULT_PEER_PYTHON)
needs_peers = pytest.mark.skipif(
    "lerobot-lancedb" not in peer_env.peer_packages(PEER_PYTHON),
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
    assert verdict["passed"] is None and peer_env.NO_PEERS in verdict["skipped"]


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


def test_the_v30_check_records_why_the_doctor_did_not_run(v30):
    assert "doctor" not in check_v30(v30, "tiny").to_json()  # not asked
    report = check_v30(v30, "tiny", doctor=True, doctor_python=None)
    assert report.ok and report.to_json()["doctor"] == {
        "tool": None,
        "passed": None,
        "skipped": f"{DOCTOR} not run: {peer_env.NO_PEERS}",
    }


@pytest.mark.skipif(nginx_binary() is None, reason="nginx is not installed")
def test_a_remote_v30_source_is_not_given_to_the_doctor(v30):
    with serve_nginx(v30.parent) as server:
        url = f"{server.url}/{v30.name}"
        report = check_v30(url, "tiny", doctor=True, doctor_python=PEER_PYTHON)
    assert report.ok, report.summary()
    verdict = report.to_json()["doctor"]
    assert verdict["passed"] is None and verdict["tool"] is None
    assert verdict["skipped"].startswith(f"{DOCTOR} not run: {url} is remote")


@needs_peers
def test_the_v30_check_of_a_good_folder_records_the_doctors_pass(v30):
    report = check_v30(v30, "tiny", doctor=True, doctor_python=PEER_PYTHON)
    verdict = report.to_json()["doctor"]
    assert report.ok and verdict["passed"] and verdict["tool"] == "lerobot-lancedb 0.3.1"
    assert set(verdict["checks"].values()) == {"ok"}


@needs_peers
def test_a_v30_source_the_doctor_flags_fails_its_check(v30, tmp_path):
    broken = tmp_path / "v3.0"
    shutil.copytree(v30, broken)
    video = next(broken.glob("videos/*/*/file-000.mp4"))
    shutil.copy(video, video.with_name("file-099.mp4"))  # an orphan: the check's own note
    assert check_v30(broken, "tiny").ok
    report = check_v30(broken, "tiny", doctor=True, doctor_python=PEER_PYTHON)
    assert not report.ok and [p.kind for p in report.problems] == ["doctor"]
    line = report.problems[0].line("tiny")
    assert line.startswith("robopipe: dataset 'tiny': lerobot-lance-doctor flags ")
    assert "VIDEOS: referenced, non-empty, readable, no orphans;" in line
    verdict = report.to_json()["doctor"]
    assert verdict["passed"] is False and verdict["message"] == report.problems[0].message
    # the doctor reads every episode: where some are left out, its flag is a note
    chosen = check_v30(broken, "tiny", doctor=True, doctor_python=PEER_PYTHON, episodes=[0, 1])
    assert chosen.ok and chosen.to_json()["doctor"]["passed"] is False
    assert [n for n in chosen.notes if n.kind == "doctor"][0].message.endswith(
        "(a note: the doctor reads every episode, those left out included)"
    )

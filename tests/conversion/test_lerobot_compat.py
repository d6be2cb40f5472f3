"""Opt-in: robopipe's output matches lerobot 0.6.1's own converter (``robopipe-lerobot-compat``,
:mod:`robopipe.harness.lerobot_compat`).

Skipped unless the lerobot environment exists (``tools/lerobot_env.sh`` -> ``.venv-lerobot``,
Python 3.12, lerobot 0.6.1). Thresholds are set from the generated episodes' sizes so that the
data and each camera roll over into several files and chunk directories.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
LEROBOT_PYTHON = REPO_ROOT / ".venv-lerobot" / "bin" / "python"


def _lerobot_available() -> bool:
    if not LEROBOT_PYTHON.exists():
        return False
    probe = [str(LEROBOT_PYTHON), "-c", "import lerobot"]
    return subprocess.run(probe, capture_output=True).returncode == 0


pytestmark = pytest.mark.skipif(
    not _lerobot_available(), reason="lerobot 0.6.1 env missing (run tools/lerobot_env.sh)"
)


def _uncompressed_mb(path: Path) -> float:
    """lerobot 0.6.1 io_utils.get_parquet_file_size_in_mb: sum of uncompressed column chunks."""
    meta = pq.ParquetFile(path).metadata
    total = sum(
        meta.row_group(g).column(c).total_uncompressed_size
        for g in range(meta.num_row_groups)
        for c in range(meta.num_columns)
    )
    return total / 2**20


def _compat(*args) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "robopipe.harness.lerobot_compat", *map(str, args)]
    cmd += ["--lerobot-python", str(LEROBOT_PYTHON)]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=REPO_ROOT)


def test_matches_lerobot_converter_with_rollover(make_v21, tmp_path):
    source = make_v21(episodes=8, min_length=10, max_length=20)
    data_mb = 2.5 * max(_uncompressed_mb(p) for p in source.glob("data/*/*.parquet"))
    video_mb = 2.5 * max(p.stat().st_size for p in source.glob("videos/*/*/*.mp4")) / 2**20
    work = tmp_path / "rollover"
    args = ["--source", source, "--data-mb", data_mb, "--video-mb", video_mb]
    result = _compat(*args, "--chunks-size", 2, "--random-frames", 10, "--work", work)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS: 8/8 checks" in result.stdout
    ref = work / "lerobot"
    assert len(list(ref.glob("data/chunk-*"))) >= 2
    for camera in ref.glob("videos/*"):
        assert len(list(camera.glob("chunk-*/*.mp4"))) >= 3

    # The comparison fails when the outputs differ: default thresholds (one file per stream)
    # against the rollover reference.
    mismatch = _compat("--source", source, "--lerobot-ref", ref, "--work", tmp_path / "other")
    assert mismatch.returncode == 1
    assert "FAIL files" in mismatch.stdout
    assert "FAIL info.json" in mismatch.stdout

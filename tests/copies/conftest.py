"""A small converted v3.0 dataset with videos and data in several files, for the copies."""

from __future__ import annotations

from pathlib import Path

import pytest

from robopipe.conversion.serial import convert_dataset


@pytest.fixture(scope="session")
def v30(make_v21, tmp_path_factory) -> Path:
    """6 episodes, 2 cameras 48x64, 10 fps, several video and data files (libx265 of PyAV's
    wheels corrupts its heap on 32x48 frames)."""
    source = make_v21(
        episodes=6, cameras=2, height=48, width=64, fps=10, min_length=12, max_length=30
    )
    out = tmp_path_factory.mktemp("copies") / "v3.0"
    convert_dataset(
        source, out, name="tiny", video_file_size_in_mb=0.03, data_file_size_in_mb=0.004
    )
    return out

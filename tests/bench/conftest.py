"""A small converted v3.0 dataset (videos in several files) at results/<name>/v3.0 layout."""

from __future__ import annotations

from pathlib import Path

import pytest

from robopipe.conversion.serial import convert_dataset


@pytest.fixture(scope="session")
def workdir(make_v21, tmp_path_factory) -> Path:
    """A folder holding ``results/tiny/v3.0``: 6 episodes, 2 cameras 32x48, 10 fps."""
    source = make_v21(episodes=6, cameras=2, fps=10, min_length=12, max_length=30)
    work = tmp_path_factory.mktemp("bench")
    convert_dataset(source, work / "results/tiny/v3.0", name="tiny", video_file_size_in_mb=0.02)
    return work


@pytest.fixture(scope="session")
def v30(workdir) -> Path:
    return workdir / "results/tiny/v3.0"

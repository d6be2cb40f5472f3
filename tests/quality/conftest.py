"""Fixtures of the quality tests: a small clean v2.1 dataset to damage, and one run of the
checks (one batch job, then the merge) on a dataset folder."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from robopipe.quality import QualityOptions, check_batch, merge_batches
from robopipe.quality.dataset import open_dataset

# 8 episodes of 3-4 s at 10 fps, one 32x48 camera: long enough for a 2.5 s camera fault
SMALL = dict(episodes=8, cameras=1, height=32, width=48, fps=10, min_length=30, max_length=40)


@pytest.fixture(scope="session")
def clean_v21(make_v21) -> Path:
    """The shared clean dataset (read-only: copy it with ``damaged``)."""
    return make_v21(**SMALL)


@pytest.fixture
def damaged(clean_v21, tmp_path) -> Path:
    """A private copy of :func:`clean_v21` to inject faults into."""
    return Path(shutil.copytree(clean_v21, tmp_path / "src"))


def run_quality(root: Path, out: Path, options: QualityOptions | None = None, batches=1) -> dict:
    """The checks on every episode of ``root`` in ``batches`` batch jobs, merged into
    ``out``; the quality.json content."""
    options = options or QualityOptions()
    episodes = list(range(open_dataset(str(root)).num_episodes))
    parts = []
    for i in range(batches):
        part = out / "parts" / f"{i}.json"
        check_batch(str(root), episodes[i::batches], options, part)
        parts.append(part)
    return merge_batches(parts, out, dataset=root.name, source=str(root), options=options)


@pytest.fixture(scope="session")
def quality_of():
    """``quality_of(root, out, options=None, batches=1) -> quality.json``: see
    :func:`run_quality`."""
    return run_quality

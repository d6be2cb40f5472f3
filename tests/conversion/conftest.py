"""Small v2.1 datasets to damage: 4 episodes of the real cr5 recording (skipped where
``../shared`` is absent) and 4 generated demo episodes (always available).

``small_source`` is parametrised over both; each test gets its own copy (``tmp_path/src``),
made with real file copies, never links, so that damaging it cannot touch the original.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


def load_tool(name: str):
    """A developer tool of ``tools/`` imported as a module."""
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def tool():
    """``tool(name)``: a developer tool of ``tools/`` imported as a module."""
    return load_tool


@pytest.fixture(scope="session")
def cr5_small(shared_datasets, tmp_path_factory) -> Path:
    """The first 4 episodes of cr5 (640x480 AV1, 10 fps, timestamps off frame_index / fps)."""
    dest = tmp_path_factory.mktemp("cr5") / "cr5x4"
    return load_tool("make_repeated").make_repeated(
        shared_datasets / "cr5_banana_plate_v21", dest, episodes=4
    )


@pytest.fixture(scope="session")
def demo_small(make_v21) -> Path:
    """4 generated episodes with 2 cameras (32x48 AV1, 30 fps)."""
    return make_v21(episodes=4, min_length=10, max_length=16)


@pytest.fixture(params=["cr5", "demo"])
def small_source(request, tmp_path) -> Path:
    """A private copy of a 4-episode dataset, cr5's or the demo's."""
    base = request.getfixturevalue(f"{request.param}_small")
    return Path(shutil.copytree(base, tmp_path / "src"))

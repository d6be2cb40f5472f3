"""Fixtures of the robomimic tests: a tiny generated file and its conversions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from robopipe.conversion.serial import convert_dataset
from robopipe.robomimic.generate import generate_robomimic
from robopipe.robomimic.to_v21 import RobomimicOptions, convert_robomimic

# 12 demos (demo_10 and demo_11 sort after demo_9 only numerically), 2 cameras 32x48
GENERATED = dict(demos=12, height=32, width=48, min_length=8, max_length=16, seed=3)


@pytest.fixture(scope="session")
def generated_hdf5(tmp_path_factory) -> Path:
    """A generated robomimic file with image observations (read-only)."""
    return generate_robomimic(tmp_path_factory.mktemp("robomimic") / "gen.hdf5", **GENERATED)


@pytest.fixture(scope="session")
def convert(tmp_path_factory):
    """``convert(hdf5, name, **options) -> (v21_dir, v30_dir)``, cached per arguments: the
    sharded robomimic -> v2.1 conversion, then the standard v2.1 -> v3.0 one (validated)."""
    cache: dict[tuple, tuple[Path, Path]] = {}

    def run(hdf5: Path, name: str, **options) -> tuple[Path, Path]:
        key = (str(hdf5), name, tuple(sorted(options.items())))
        if key not in cache:
            root = tmp_path_factory.mktemp(name)
            v21 = convert_robomimic(
                hdf5, root / "v21", name=name, options=RobomimicOptions(**options)
            )
            convert_dataset(v21, root / "v3.0", name=name, episodes_per_shard=5)
            cache[key] = (v21, root / "v3.0")
        return cache[key]

    return run


@pytest.fixture
def lift_hdf5(shared_datasets) -> Path:
    """The real robosuite Lift low-dim file, or skip."""
    path = shared_datasets / "robomimic_lift_low_dim" / "low_dim.hdf5"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    return path


def _assert_same(expected, actual, where=""):
    """Same nested keys in the same order; arrays (or tensors) of the same type, dtype, shape
    and values."""
    if isinstance(expected, dict):
        assert list(actual) == list(expected), where
        for key in expected:
            _assert_same(expected[key], actual[key], f"{where}/{key}")
        return
    assert type(actual) is type(expected), where
    assert (actual.dtype, actual.shape) == (expected.dtype, expected.shape), where
    np.testing.assert_array_equal(np.asarray(actual), np.asarray(expected), err_msg=where)


@pytest.fixture
def assert_same():
    """``assert_same(expected, actual, where="")``: two robomimic items or batches are equal
    (nested keys, types, dtypes, shapes and values)."""
    return _assert_same

"""Fixtures of the workflow tests."""

import pytest

from robopipe.conversion.serial import convert_dataset


@pytest.fixture(scope="module")
def v30(make_v21, tmp_path_factory):
    """A small v3.0 dataset (4 episodes, 2 cameras) written by robopipe's own conversion, one
    per test module (the tests may change the module's copy)."""
    root = tmp_path_factory.mktemp("v30") / "ds"
    convert_dataset(make_v21(episodes=4), root, name="ds")
    return root

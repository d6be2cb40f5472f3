"""The checks on real data with faults: 8 episodes of cr5 (640x480 AV1 at 10 fps, wall-clock
timestamps, quantised joint velocities), one fault per episode. Skipped without ../shared."""

from __future__ import annotations

import pytest

from robopipe.formats.v21_repeat import make_repeated
from robopipe.harness import faults


@pytest.fixture(scope="module")
def cr5x8(shared_datasets, tmp_path_factory):
    dest = tmp_path_factory.mktemp("cr5") / "cr5x8"
    return make_repeated(shared_datasets / "cr5_banana_plate_v21", dest, episodes=8)


def test_cr5_clean_has_only_its_timestamp_oddity(cr5x8, quality_of, tmp_path):
    report = quality_of(cr5x8, tmp_path / "q")
    assert {(f["check"], f["severity"]) for f in report["findings"]} == {
        ("timestamp_drift", "info")
    }


def test_cr5_faults_each_in_its_episode(cr5x8, quality_of, tmp_path):
    root = faults.copy_dataset(cr5x8, tmp_path / "src")
    injected = [
        faults.inject_nan(root, 0, frame=40),
        faults.inject_frozen_signal(root, 1, start=50, frames=20),
        faults.inject_action_jump(root, 2, frame=60),
        faults.inject_idle_episode(root, 3),
        faults.inject_black_camera(root, 4, start=30, seconds=2.0),
        faults.inject_wrong_stats(root, 5),
        faults.inject_timestamp_drift(root, 6),
        faults.inject_duplicate_episode(root, 7, of=5),
    ]
    report = quality_of(root, tmp_path / "q", batches=2)
    found: dict = {}
    for f in report["findings"]:
        if f["severity"] != "info":  # cr5's wall-clock timestamps: info in every episode
            found.setdefault(f["episode_index"], set()).add(f["check"])
    assert found == {f.episode: {f.check} for f in injected}
    assert {f["episode_index"] for f in report["findings"] if f["severity"] == "error"} == {0}

"""Each content check against its fault, injected into one episode of a copy of a small
generated v2.1 dataset (robopipe.harness.faults): the right check flags that episode, and no
other episode gets an error (nor, where the check is per episode, that check)."""

from __future__ import annotations

import pytest

from robopipe.harness import faults
from robopipe.quality import CHECKS, QualityOptions


def flagged(report: dict, check: str) -> set:
    """The episodes with a finding of ``check``."""
    return {f["episode_index"] for f in report["findings"] if f["check"] == check}


def assert_only(report: dict, fault: faults.Fault) -> None:
    """``fault``'s check flags its episode and no other; no other episode has an error."""
    assert flagged(report, fault.check) == {fault.episode}, report["findings"]
    others = [
        f
        for f in report["findings"]
        if f["severity"] == "error" and f["episode_index"] != fault.episode
    ]
    assert not others, others


def test_clean_dataset_has_no_findings(clean_v21, quality_of, tmp_path):
    report = quality_of(clean_v21, tmp_path / "q")
    assert report["findings"] == []
    assert [c["name"] for c in report["checks"]] == list(CHECKS)
    assert report["counts"] == {"error": 0, "warning": 0, "info": 0}
    assert report["decode"]["frames_decoded"] > 0


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_nan_inf(damaged, quality_of, tmp_path, value):
    fault = faults.inject_nan(damaged, 2, frame=4, dimension=3, value=value)
    report = quality_of(damaged, tmp_path / "q")
    assert_only(report, fault)
    (found,) = [f for f in report["findings"] if f["check"] == "nan_inf"]
    assert found["severity"] == "error"
    assert (found["feature"], found["dimension"], found["frames"]) == (
        "observation.state",
        3,
        [4, 4],
    )


def test_frozen_signal(damaged, quality_of, tmp_path):
    fault = faults.inject_frozen_signal(damaged, 5, start=3, frames=15)
    report = quality_of(damaged, tmp_path / "q")
    assert_only(report, fault)
    (found,) = [f for f in report["findings"] if f["check"] == "frozen_signal"]
    assert found["frames"] == [3, 17] and found["feature"] == "observation.state"


def test_frozen_signal_shorter_than_threshold_passes(damaged, quality_of, tmp_path):
    faults.inject_frozen_signal(damaged, 5, start=3, frames=8)  # 0.8 s < frozen_signal_s 1 s
    assert "frozen_signal" not in {
        f["check"] for f in quality_of(damaged, tmp_path / "q")["findings"]
    }


def test_constant_dimension(damaged, quality_of, tmp_path):
    fault = faults.inject_constant_dimension(damaged, 1, dimension=2)
    report = quality_of(damaged, tmp_path / "q")
    assert_only(report, fault)
    (found,) = [f for f in report["findings"] if f["check"] == "constant_dimension"]
    assert (found["severity"], found["dimension"]) == ("warning", 2)


def test_constant_gripper_is_info(damaged, quality_of, tmp_path):
    faults.inject_constant_dimension(damaged, 1, feature="action", dimension=6)
    report = quality_of(damaged, tmp_path / "q")
    (found,) = [f for f in report["findings"] if f["check"] == "constant_dimension"]
    assert (found["episode_index"], found["severity"]) == (1, "info")


def test_clipped_dimension(damaged, quality_of, tmp_path):
    fault = faults.inject_clipped_dimension(damaged, 6, dimension=0, fraction=0.3)
    report = quality_of(damaged, tmp_path / "q")
    assert_only(report, fault)


def test_action_jump(damaged, quality_of, tmp_path):
    fault = faults.inject_action_jump(damaged, 3, frame=12, dimension=1)
    report = quality_of(damaged, tmp_path / "q")
    assert_only(report, fault)
    (found,) = [f for f in report["findings"] if f["check"] == "action_jump"]
    assert found["dimension"] == 1 and 12 in found["frames"]  # the spike: up, then down


def test_idle_episode(damaged, quality_of, tmp_path):
    fault = faults.inject_idle_episode(damaged, 4)
    report = quality_of(damaged, tmp_path / "q")
    assert_only(report, fault)
    assert "frozen_signal" not in {f["check"] for f in report["findings"]}  # jitter, not frozen


def test_episode_length_outlier(damaged, quality_of, tmp_path):
    fault = faults.inject_length_outlier(damaged, 6, length=2)
    report = quality_of(damaged, tmp_path / "q")
    assert_only(report, fault)
    assert report["episodes"] == 8


@pytest.mark.parametrize("near", [False, True])
def test_duplicate_episode(damaged, quality_of, tmp_path, near):
    fault = faults.inject_duplicate_episode(damaged, 5, of=2, near=near)
    report = quality_of(damaged, tmp_path / "q")
    assert_only(report, fault)
    (found,) = [f for f in report["findings"] if f["check"] == "duplicate_episode"]
    assert found["value"] == 2
    assert ("near" in found["message"]) == near


def test_stats_mismatch(damaged, quality_of, tmp_path):
    fault = faults.inject_wrong_stats(damaged, 7, stat="std", offset=0.5)
    report = quality_of(damaged, tmp_path / "q")
    assert_only(report, fault)


def test_timestamp_drift(damaged, quality_of, tmp_path):
    fault = faults.inject_timestamp_drift(damaged, 0, rate=1.25)
    report = quality_of(damaged, tmp_path / "q")
    assert_only(report, fault)
    (found,) = [f for f in report["findings"] if f["check"] == "timestamp_drift"]
    assert found["severity"] == "warning"


@pytest.mark.parametrize("decode", ["sample", "all"])
def test_frozen_camera(damaged, quality_of, tmp_path, decode):
    fault = faults.inject_frozen_camera(damaged, 3, start=5, seconds=2.5)
    report = quality_of(damaged, tmp_path / "q", QualityOptions(decode=decode))
    assert_only(report, fault)
    (found,) = [f for f in report["findings"] if f["check"] == "frozen_camera"]
    first, last = found["frames"]
    assert fault.frames[0] <= first < last <= fault.frames[1]
    assert report["decode"]["mode"] == decode


def test_black_camera(damaged, quality_of, tmp_path):
    fault = faults.inject_black_camera(damaged, 1, start=10, seconds=1.5)
    report = quality_of(damaged, tmp_path / "q")
    assert_only(report, fault)
    (found,) = [f for f in report["findings"] if f["check"] == "black_camera"]
    assert fault.frames[0] <= found["frames"][0] <= found["frames"][1] <= fault.frames[1]


def test_every_fault_at_once_in_batches(damaged, quality_of, tmp_path):
    """One fault per episode, checked in 3 batch jobs: each episode has its own check."""
    injected = [
        faults.inject_nan(damaged, 0),
        faults.inject_frozen_signal(damaged, 1, frames=15),
        faults.inject_action_jump(damaged, 2),
        faults.inject_idle_episode(damaged, 3),
        faults.inject_wrong_stats(damaged, 4),
        faults.inject_timestamp_drift(damaged, 5),
        faults.inject_frozen_camera(damaged, 6),
        faults.inject_black_camera(damaged, 7),
    ]
    report = quality_of(damaged, tmp_path / "q", batches=3)
    for fault in injected:
        assert fault.episode in flagged(report, fault.check), fault
    by_episode = {}
    for f in report["findings"]:
        by_episode.setdefault(f["episode_index"], set()).add(f["check"])
    assert {e: by_episode.get(e) for e in range(8)} == {f.episode: {f.check} for f in injected}

"""Rule quality_peer: `snakemake quality` runs lerobot-doctor on the dataset beside robopipe's
checks and writes doctor.json (its verdicts compared with quality.json's findings) where the
peer environment has lerobot-doctor; without a peer environment it records why it skipped."""

import json
from pathlib import Path

import pytest

from robopipe import peer_env
from robopipe.harness.faults import ACTION, copy_dataset, inject_nan

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
PEER_PYTHON = str(REPO / peer_env.DEFAULT_PEER_PYTHON)
HAS_DOCTOR = "lerobot-doctor" in peer_env.peer_packages(PEER_PYTHON)


@pytest.fixture(scope="module")
def nan_source(make_v21, tmp_path_factory) -> Path:
    """4 episodes, NaN in episode 1's action (lerobot-doctor names the episode of a NaN in
    an action column only)."""
    clean = make_v21(episodes=4, cameras=1, min_length=30, max_length=40, fps=10)
    root = copy_dataset(clean, tmp_path_factory.mktemp("peer") / "nan")
    inject_nan(root, 1, feature=ACTION, frame=3)
    return root


def test_quality_runs_lerobot_doctor_beside_robopipe_or_says_why_not(
    nan_source, tmp_path, run_snakemake
):
    config = {"datasets": {"nan": {"path": str(nan_source)}}, "bench": {}}
    if HAS_DOCTOR:
        config["bench"]["lerobot_python"] = PEER_PYTHON
    run_snakemake(tmp_path, config, "--cores", "2", "quality")
    doctor = json.loads((tmp_path / "results/nan/quality/doctor.json").read_text())
    assert doctor["dataset"] == "nan" and doctor["root"] == str(nan_source)
    if HAS_DOCTOR:
        assert doctor["tool"] == "lerobot-doctor 0.2.0" and doctor["overall_severity"] == "FAIL"
        both = {(f["check"], f["episode_index"]) for f in doctor["comparison"]["both"]}
        assert ("nan_inf", 1) in both
    else:  # no peer environment here: it says why it skipped, and nothing more is to be seen
        assert doctor["tool"] is None and peer_env.NO_PEERS in doctor["skipped"]
        return
    # no peer interpreter: only quality_peer runs again, and says why it skipped
    config["bench"]["lerobot_python"] = None
    done = run_snakemake(tmp_path, config, "--cores", "2", "quality")
    assert "quality_peer" in done.stderr and "quality_batch" not in done.stderr
    doctor = json.loads((tmp_path / "results/nan/quality/doctor.json").read_text())
    assert doctor["tool"] is None and peer_env.NO_PEERS in doctor["skipped"]

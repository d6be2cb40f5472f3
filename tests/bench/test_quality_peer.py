"""lerobot-doctor as the quality stage's peer: its messages read into per-episode findings,
set beside robopipe's; run for real in the peer environment where it has lerobot-doctor."""

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from robopipe import peer_env
from robopipe.bench.quality_peer import (
    compare_findings,
    doctor_findings,
    doctor_root,
    quality_peer,
    run_lerobot_doctor,
)
from robopipe.sources import Demo, LocalV21, RemoteV30

REPO = Path(__file__).resolve().parents[2]
PEER_PYTHON = str(REPO / peer_env.DEFAULT_PEER_PYTHON)
needs_doctor = pytest.mark.skipif(
    "lerobot-doctor" not in peer_env.peer_packages(PEER_PYTHON),
    reason="no peer environment with lerobot-doctor (tools/install.sh --peers)",
)

# messages as lerobot-doctor 0.2.0 words them (lerobot_doctor/checks/*.py)
REPORT = {
    "overall_severity": "FAIL",
    "checks": [
        {
            "name": "Temporal Consistency",
            "severity": "WARN",
            "messages": [
                {"severity": "PASS", "message": "Episode 9: fine"},
                {
                    "severity": "WARN",
                    "message": "Episode 0: 9 dropped frame gap(s) at frame "
                    "indices [1, 5, 139, 143, 145]...",
                },
                {"severity": "WARN", "message": "...and 61 more episodes with issues"},
            ],
        },
        {
            "name": "Action Quality",
            "severity": "FAIL",
            "messages": [
                {"severity": "FAIL", "message": "action: 12 NaN values detected"},
                {
                    "severity": "WARN",
                    "message": "action: 40% of episode 4 is consecutive identical actions (frozen)",
                },
            ],
        },
        {
            "name": "Episode Health",
            "severity": "WARN",
            "messages": [
                {
                    "severity": "WARN",
                    "message": "1 abnormally long episode(s) (>3 std above mean): [50]",
                },
            ],
        },
        {
            "name": "Anomaly Detection",
            "severity": "WARN",
            "messages": [
                {
                    "severity": "WARN",
                    "message": "1 near-duplicate episode pair(s) detected: [(3, 57)]",
                },
            ],
        },
        {
            "name": "Per-Episode Summary",
            "severity": "WARN",
            "messages": [
                {"severity": "WARN", "message": "2/81 episode(s) flagged"},
                {
                    "severity": "WARN",
                    "message": "Episode 7: 1 dropped frame(s); 2 action jump(s) in action",
                },
            ],
        },
        {
            "name": "Training Readiness",
            "severity": "WARN",
            "messages": [
                {
                    "severity": "WARN",
                    "message": "No stats.json -- normalization "
                    "will need to be computed before training",
                }
            ],
        },
    ],
}


def test_messages_become_per_episode_findings_with_robopipes_check_names():
    findings = doctor_findings(REPORT)
    by_message = {(f["message"], f["episode_index"]): f for f in findings}
    assert all(f["severity"] in ("warning", "error") for f in findings)
    drop = by_message[
        ("Episode 0: 9 dropped frame gap(s) at frame indices [1, 5, 139, 143, 145]...", 0)
    ]
    assert drop["checks"] == ["timestamp_drift"] and drop["group"] == "Temporal Consistency"
    nan = by_message[("action: 12 NaN values detected", None)]
    assert (nan["checks"], nan["severity"], nan["feature"]) == (["nan_inf"], "error", "action")
    frozen = by_message[("action: 40% of episode 4 is consecutive identical actions (frozen)", 4)]
    assert frozen["checks"] == ["frozen_signal", "idle_episode"]
    assert by_message[("1 abnormally long episode(s) (>3 std above mean): [50]", 50)]["checks"] == [
        "episode_length_outlier"
    ]
    pair = "1 near-duplicate episode pair(s) detected: [(3, 57)]"
    assert {by_message[(pair, e)]["checks"][0] for e in (3, 57)} == {"duplicate_episode"}
    # one Per-Episode Summary message, two reasons: two findings
    assert by_message[("Episode 7: 1 dropped frame(s)", 7)]["checks"] == ["timestamp_drift"]
    assert by_message[("Episode 7: 2 action jump(s) in action", 7)]["checks"] == ["action_jump"]
    assert by_message[("...and 61 more episodes with issues", None)]["truncated"] == 61
    # the doctor's own topics stand for no robopipe check
    assert by_message[(REPORT["checks"][-1]["messages"][0]["message"], None)]["checks"] == []
    assert ("Episode 9: fine", 9) not in by_message  # PASS messages are no findings


def test_findings_both_tools_report_and_those_only_one_does():
    quality = {
        "findings": [
            {"check": "timestamp_drift", "severity": "warning", "episode_index": 0},
            {"check": "idle_episode", "severity": "error", "episode_index": 4},
            {"check": "nan_inf", "severity": "error", "episode_index": 12},
            {"check": "black_camera", "severity": "error", "episode_index": 20},
            {"check": "duplicate_episode", "severity": "warning", "episode_index": 57},
            {"check": "constant_dimension", "severity": "info", "episode_index": 1},
        ]
    }
    compared = compare_findings(quality, doctor_findings(REPORT))
    assert compared["both"] == [
        {"check": "timestamp_drift", "episode_index": 0, "groups": ["Temporal Consistency"]},
        {"check": "idle_episode", "episode_index": 4, "groups": ["Action Quality"]},
        {"check": "duplicate_episode", "episode_index": 57, "groups": ["Anomaly Detection"]},
    ]
    assert [(f["check"], f["episode_index"]) for f in compared["only_robopipe"]] == [
        ("nan_inf", 12),
        ("black_camera", 20),
    ]  # info findings are not compared
    assert [(f["episode_index"], f["checks"]) for f in compared["only_doctor"]] == [
        (3, ["duplicate_episode"]),
        (7, ["timestamp_drift"]),
        (7, ["action_jump"]),
        (50, ["episode_length_outlier"]),
    ]
    nan = next(f for f in compared["doctor_without_episode"] if f["checks"] == ["nan_inf"])
    assert nan["robopipe_reports"] == ["nan_inf"]
    assert compared["per_check"]["duplicate_episode"] == {"robopipe": 1, "doctor": 2, "both": 1}
    assert compared["doctor_truncated"] == 61


def test_without_the_peer_environment_it_is_skipped(tmp_path):
    assert peer_env.NO_PEERS in run_lerobot_doctor(tmp_path, None)["skipped"]
    missing = run_lerobot_doctor(tmp_path, str(tmp_path / "bin/python"))
    assert missing["tool"] is None and "lerobot-doctor does not exist" in missing["skipped"]
    out = tmp_path / "doctor.json"
    written = quality_peer(None, tmp_path / "quality.json", PEER_PYTHON, out, dataset="d")
    assert "remote" in written["skipped"] and json.loads(out.read_text()) == written


@pytest.fixture(scope="module")
def nan_in_episode_2(make_v21, tmp_path_factory) -> Path:
    """A v2.1 copy whose episode 2 has NaN in a stretch of its action."""
    source = make_v21(episodes=5, cameras=1, fps=10, min_length=20, max_length=30)
    root = tmp_path_factory.mktemp("doctor") / "nan"
    shutil.copytree(source, root)
    path = root / "data/chunk-000/episode_000002.parquet"
    table = pq.read_table(path)
    action = np.stack(table["action"].to_numpy(zero_copy_only=False)).astype(np.float32)
    action[5:8, 0] = np.nan
    column = pa.array(list(action), type=table.schema.field("action").type)
    pq.write_table(table.set_column(table.schema.get_field_index("action"), "action", column), path)
    return root


@needs_doctor
def test_lerobot_doctor_runs_and_its_verdicts_are_compared(nan_in_episode_2, tmp_path):
    quality = tmp_path / "quality.json"
    finding = {"check": "nan_inf", "severity": "error", "episode_index": 2}
    quality.write_text(json.dumps({"findings": [finding]}))
    out = tmp_path / "quality" / "doctor.json"
    result = quality_peer(nan_in_episode_2, quality, PEER_PYTHON, out, dataset="nan")
    assert result["tool"] == "lerobot-doctor 0.2.0" and not result["timed_out"]
    assert result["exit_code"] == 1 and result["overall_severity"] == "FAIL"  # NaN fails
    assert len(result["groups"]) == 11 and result["peak_rss_mb"] > 0
    assert {"check": "nan_inf", "episode_index": 2, "groups": ["Per-Episode Summary"]} in result[
        "comparison"
    ]["both"]
    assert json.loads(out.read_text()) == result


@needs_doctor
def test_a_doctor_past_its_timeout_is_killed(nan_in_episode_2):
    result = run_lerobot_doctor(nan_in_episode_2, PEER_PYTHON, timeout_s=0.2)
    assert result["timed_out"] and result["report"] is None and result["wall_s"] < 30
    assert "killed after the timeout" in result["error"]


def test_the_doctor_reads_the_folder_the_quality_checks_read_and_no_remote_source(tmp_path):
    local = LocalV21("d", {"path": str(tmp_path)})
    assert doctor_root(local) == str(tmp_path)
    assert doctor_root(Demo("demo", {"demo": {}})) == "results/demo/demo"
    remote = RemoteV30("r", {"url": "s3://bucket/r"}, info={"codebase_version": "v3.0"})
    assert doctor_root(remote) is None

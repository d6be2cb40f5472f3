"""An outside opinion of a v3.0 dataset: lerobot-lancedb's ``lerobot-lance-doctor``, run by the
peer interpreter (:mod:`robopipe.peer_env`) where there is one.

The doctor (lerobot_lancedb/doctor.py) makes five read-only checks: META (lerobot's
``LeRobotDatasetMetadata`` loads), BOUNDARIES (episode ranges tile ``[0, total_frames)``),
DATA (every referenced parquet exists, rows add up to ``total_frames``, no orphan parquet),
VIDEOS (every referenced mp4 exists, is non-empty and opens, no orphan mp4) and SUPPLY (each
mp4's container declares at least the frames the episodes imply). Its exit code is the
number of failed checks.

:func:`run_doctor` gives validation's opinion of a published output; :func:`doctor_opinion`
the check's of a v3.0 source (``check_v30(doctor=True)``).
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path

from robopipe.checks.report import Problem
from robopipe.errors import DatasetError
from robopipe.peer_env import NO_PEERS, peer_version

DOCTOR = "lerobot-lance-doctor"  # the console script next to the peer interpreter
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_CHECK = re.compile(r"^\[\s*(ok|FAIL)\s*\] (\w+)")


def run_doctor(root: str | Path, python: str | None, name: str) -> dict:
    """Run ``lerobot-lance-doctor --root root`` of the peer interpreter ``python`` (offline).

    Returns:
        ``{"tool": "lerobot-lancedb <version>", "passed": bool, "checks": {check: "ok" or
        "FAIL"}, "output": the doctor's text}``, or ``{"tool": None, "passed": None,
        "skipped": why}`` where there is no peer interpreter or it has no doctor.

    Raises:
        DatasetError: the doctor flags the dataset ``name`` (its failed checks and their
            lines in the message).
    """
    doctor = Path(python).parent / DOCTOR if python else None
    if doctor is None or not doctor.exists():
        why = f"{doctor} does not exist" if doctor else NO_PEERS
        return {"tool": None, "passed": None, "skipped": f"{DOCTOR} not run: {why}"}
    with tempfile.TemporaryDirectory(prefix="robopipe-doctor-") as home:
        env = {**os.environ, "HF_HOME": home, "HF_HUB_OFFLINE": "1", "NO_COLOR": "1"}
        env.pop("PYTHONPATH", None)
        done = subprocess.run(
            [str(doctor), "--root", str(Path(root).resolve()), "--repo-id", f"local/{name}"],
            capture_output=True,
            text=True,
            env=env,
        )
    output = _ANSI.sub("", done.stdout + done.stderr).strip()
    checks = {m[2]: m[1] for line in output.splitlines() if (m := _CHECK.match(line))}
    if done.returncode != 0:
        failed = [line.strip() for line in output.splitlines() if line.startswith(("[FAIL]", " "))]
        raise DatasetError(name, f"{DOCTOR} flags {root}: " + "; ".join(failed[:6]))
    return {
        "tool": peer_version(python, "lerobot-lancedb"),
        "passed": True,
        "checks": checks,
        "output": output,
    }


def doctor_opinion(
    root: str | Path, python: str | None, name: str, *, local: bool, selected: bool
) -> tuple[dict, Problem | None]:
    """The doctor's opinion of the v3.0 source ``root`` for its check (:func:`run_doctor`).

    Args:
        root: the dataset's folder (local), or its URL.
        python: the peer interpreter (None: the doctor is skipped).
        name: the dataset name (messages).
        local: ``root`` is a local folder; the doctor reads local files only, so a remote
            dataset is not given to it (its local copy is, where rule ``local_copy`` makes one).
        selected: episodes are left out (``episodes:`` or ``skip_episodes``); the doctor
            reads every episode, so its flag is then a note, not a problem.

    Returns:
        (verdict for ``check.json``: :func:`run_doctor`'s, ``{"tool", "passed": False,
        "message"}`` when it flags the dataset, or ``{"tool": None, "passed": None,
        "skipped": why}``; the flag as a :class:`~robopipe.checks.report.Problem` of kind
        ``doctor``, or None).
    """
    if not local:
        why = f"{root} is remote and the doctor reads local files (it runs on a local copy)"
        return {"tool": None, "passed": None, "skipped": f"{DOCTOR} not run: {why}"}, None
    try:
        return run_doctor(root, python, name), None
    except DatasetError as exc:
        verdict = {
            "tool": peer_version(python, "lerobot-lancedb"),
            "passed": False,
            "message": exc.reason,
        }
        message = exc.reason
        if selected:
            message += " (a note: the doctor reads every episode, those left out included)"
        return verdict, Problem("doctor", message)

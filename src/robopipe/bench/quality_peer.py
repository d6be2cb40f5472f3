"""The quality stage's peer: lerobot-doctor 0.2.0's ``check``, run in the peer environment
(:mod:`robopipe.peer_env`) on the same dataset as robopipe's quality checks, its verdicts read
into per-episode findings and set beside robopipe's ``quality.json``.

lerobot-doctor (PyPI ``lerobot-doctor``, ``lerobot_doctor/checks/*.py``) runs 11 check groups
on the episodes' parquet columns, which it loads whole into one process: Metadata & Format
Compliance, Temporal Consistency, Action Quality, Video Integrity (container probes and the
first frame of up to 20 files per camera: it decodes no other frame), Data Distribution,
Episode Health, Feature Consistency, Training Readiness, Anomaly Detection, Portability and
Per-Episode Summary. Its ``--json`` report is a list of groups, each with a severity (``PASS``
| ``WARN`` | ``FAIL``) and free-text messages; an episode appears in a message's words
(``Episode 3: ...``, ``... episode(s): [50]``, pairs ``[(3, 57)]``) and lists are cut short
(``...and 61 more episodes``). Its exit code is 1 when a group fails.

:func:`doctor_findings` reads those messages into findings ``{"group", "severity", "checks",
"episode_index", "message"}``, ``checks`` being the robopipe checks (robopipe.quality.CHECKS)
the message's topic stands for (:data:`TOPICS`; empty for the doctor's own topics, such as
training readiness), ``episode_index`` None where the message names no episode.
:func:`compare_findings` sets them beside robopipe's findings, episode by episode.
:func:`quality_peer` does both for the workflow's rule ``quality_peer`` (on
:func:`doctor_root`'s folder).

Importing this module imports nothing heavy.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from robopipe.atomic import write_json
from robopipe.peer_env import NO_PEERS, peer_version

DOCTOR = "lerobot-doctor"  # the console script next to the peer interpreter
DOCTOR_PACKAGE = "lerobot-doctor"  # its distribution, pinned by tools/lerobot_env.sh
SEVERITIES = {"WARN": "warning", "FAIL": "error"}  # lerobot-doctor's, as robopipe's words
# the workflow's cap on lerobot-doctor's wall time: a peer's opinion, not worth holding the
# run longer (on the DROID-shaped 20k episodes it has not finished after 1,500 s); past it,
# doctor.json says timed_out and holds no verdicts
DOCTOR_TIMEOUT_S = 1800.0
# robopipe's findings that count in the comparison (robopipe.quality severities)
COMPARED_SEVERITIES = ("error", "warning")

# (pattern of a lerobot-doctor message or reason, the robopipe checks its topic stands for);
# the first that matches wins. Read from lerobot_doctor 0.2.0's checks/*.py messages.
TOPICS: tuple[tuple[re.Pattern, tuple[str, ...]], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), checks)
    for pattern, checks in (
        (r"\bNaN\b|\bInf\b", ("nan_inf",)),
        # actions.py / per_episode.py: >= 5 % of an episode's action rows repeat the last one
        (r"frozen", ("frozen_signal", "idle_episode")),
        # anomalies.py: a dimension unchanged in > 80 % of the steps of > 80 % of episodes
        (r"stuck/static", ("constant_dimension", "frozen_signal")),
        (r"zero variance|constant dimension|dimensions constant", ("constant_dimension",)),
        (r"clipping detected|of values at (minimum|maximum)", ("clipped_dimension",)),
        (r"action jump", ("action_jump",)),
        (
            r"abnormally (short|long)|shorter than|too short|single frame|<=1 frame|"
            r"empty episode|length variance|length mismatch",
            ("episode_length_outlier",),
        ),
        (r"near-duplicate", ("duplicate_episode",)),
        (
            r"dropped frame|non-monotonic|mean interval|frame_index not sequential",
            ("timestamp_drift",),
        ),
        (r"failed to decode", ("unreadable_video",)),
        (r"unreadable file", ("unreadable_file",)),
        (r"video files? missing|files missing", ("missing_file",)),
    )
)
_EPISODE = re.compile(r"\bepisode (\d+)\b", re.IGNORECASE)
_PAIRS = re.compile(r"\((\d+), (\d+)\)")
_TUPLE_FIRST = re.compile(r"\((\d+), ['\[]")
_LIST_AFTER_EPISODES = re.compile(r"episode[^\[]*\[([\d, ]+)\]", re.IGNORECASE)
_PER_EPISODE = re.compile(r"^Episode (\d+): (.*)$")
_FEATURE = re.compile(r"^([A-Za-z_][\w.]*)(?:\[(\d+)\])?: ")
_MORE = re.compile(r"\.\.\.and (\d+) more")


def run_lerobot_doctor(
    root: str | Path,
    python: str | None,
    *,
    max_episodes: int | None = None,
    timeout_s: float | None = None,
) -> dict:
    """Run ``lerobot-doctor check <root> --json`` of the peer interpreter ``python``, offline.

    Args:
        root: a local v2.x or v3.0 dataset folder (lerobot-doctor reads local files, or
            downloads a Hub repo id, which this never asks it to).
        python: the peer interpreter (:func:`robopipe.peer_env.peer_python`); None: skipped.
        max_episodes: its ``--max-episodes`` (the first N episodes); None: all.
        timeout_s: kill it after this many seconds of wall time; None: no limit.

    Returns:
        ``tool`` ("lerobot-doctor 0.2.0"), ``command``, ``wall_s``, ``peak_rss_mb`` (the
        process's peak RSS, MiB, from ``wait4``), ``exit_code``, ``timed_out`` and ``report``
        (its parsed JSON; None when it timed out or printed none, then ``error`` holds its
        stderr's tail); or ``{"tool": None, "skipped": why}`` where there is no peer
        interpreter or it has no lerobot-doctor.
    """
    doctor = Path(python).parent / DOCTOR if python else None
    if doctor is None or not doctor.exists():
        why = f"{doctor} does not exist (tools/lerobot_env.sh installs it)" if doctor else NO_PEERS
        return {"tool": None, "skipped": f"{DOCTOR} not run: {why}"}
    command = [str(doctor), "check", str(Path(root).resolve()), "--json"]
    if max_episodes is not None:
        command += ["--max-episodes", str(max_episodes)]
    with tempfile.TemporaryDirectory(prefix="robopipe-lerobot-doctor-") as home:
        env = {**os.environ, "HF_HOME": home, "HF_HUB_OFFLINE": "1", "NO_COLOR": "1"}
        env.pop("PYTHONPATH", None)
        stdout, stderr = Path(home) / "stdout.json", Path(home) / "stderr.txt"
        with open(stdout, "wb") as out, open(stderr, "wb") as err:
            start = time.perf_counter()
            proc = subprocess.Popen(command, stdout=out, stderr=err, env=env)
            timer = threading.Timer(timeout_s, proc.kill) if timeout_s else None
            if timer:
                timer.start()
            _, status, usage = os.wait4(proc.pid, 0)
            wall_s = time.perf_counter() - start
            proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
            if timer:
                timer.cancel()
        timed_out = bool(timeout_s) and wall_s >= timeout_s and proc.returncode < 0
        text = stdout.read_text(errors="replace")
        result = {
            "tool": peer_version(python, DOCTOR_PACKAGE),
            "command": [DOCTOR, *command[1:]],
            "wall_s": round(wall_s, 2),
            "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
            "exit_code": proc.returncode,
            "timed_out": timed_out,
            "report": None,
        }
        with contextlib.suppress(json.JSONDecodeError):
            result["report"] = None if timed_out else json.loads(text)
        if result["report"] is None:
            why = "killed after the timeout" if timed_out else "printed no JSON report"
            tail = stderr.read_text(errors="replace")[-2000:]
            result["error"] = f"{DOCTOR} {why} (exit {proc.returncode}): {tail}".strip()
    return result


def doctor_findings(report: Mapping) -> list[dict]:
    """lerobot-doctor's ``--json`` report as findings, one per episode a message names.

    Only ``WARN`` and ``FAIL`` messages count (as ``warning`` and ``error``). A Per-Episode
    Summary message (``Episode 3: reason; reason``) gives one finding per reason.

    Returns:
        dicts ``{"group" (its check group's name), "severity", "checks" (robopipe check names
        the topic stands for, :data:`TOPICS`; [] for none), "episode_index" (int, or None
        where the message names no episode), "feature" (where the message starts with one,
        else None), "message", "truncated" (the number of items the doctor left out of its
        list: ``...and N more``, else 0)}``, in the report's order.
    """
    findings = []
    for group in report.get("checks", []):
        for entry in group.get("messages", []):
            severity = SEVERITIES.get(entry.get("severity"))
            if severity is None:
                continue
            message = entry["message"]
            per_episode = _PER_EPISODE.match(message)
            if per_episode and ";" in per_episode[2]:
                parts = [f"Episode {per_episode[1]}: {r}" for r in per_episode[2].split("; ")]
            else:
                parts = [message]
            for part in parts:
                feature = _FEATURE.match(part)
                more = _MORE.search(part)
                for episode in _episodes(part) or [None]:
                    findings.append(
                        {
                            "group": group["name"],
                            "severity": severity,
                            "checks": list(_topic(part)),
                            "episode_index": episode,
                            "feature": feature[1] if feature and feature[1] != "Episode" else None,
                            "message": part,
                            "truncated": int(more[1]) if more else 0,
                        }
                    )
    return findings


def _topic(message: str) -> tuple[str, ...]:
    """The robopipe checks a doctor message's topic stands for (:data:`TOPICS`), or ()."""
    return next((checks for pattern, checks in TOPICS if pattern.search(message)), ())


def _episodes(message: str) -> list[int] | None:
    """The episode indices a doctor message names, in its order without repeats, or None."""
    if found := _EPISODE.search(message):
        return [int(found[1])]
    if "pair" in message and (pairs := _PAIRS.findall(message)):
        return list(dict.fromkeys(int(i) for pair in pairs for i in pair))
    if tuples := _TUPLE_FIRST.findall(message):
        return list(dict.fromkeys(map(int, tuples)))
    if (listed := _LIST_AFTER_EPISODES.search(message)) and listed[1].strip():
        return list(dict.fromkeys(int(i) for i in listed[1].split(",") if i.strip()))
    return None


def compare_findings(quality: Mapping, doctor: Iterable[Mapping]) -> dict:
    """robopipe's findings (``quality.json``'s, ``error`` and ``warning`` only) beside
    lerobot-doctor's (:func:`doctor_findings`), episode by episode.

    A robopipe finding (check C, episode E) is reported by both where a doctor finding names
    episode E and its topic stands for C; a doctor finding that names an episode is its alone
    where no robopipe finding of that episode has a check its topic stands for (or its topic
    stands for none). A doctor finding that names no episode is neither: it is listed under
    ``doctor_without_episode``, with whether robopipe reports any of its checks anywhere.

    Returns:
        ``both`` [{"check", "episode_index", "groups"}]; ``only_robopipe`` [{"check",
        "episode_index", "severity"}]; ``only_doctor`` [{"group", "checks", "episode_index",
        "message"}]; ``doctor_without_episode`` [{"group", "checks", "message",
        "robopipe_reports"}]; ``per_check`` {check: {"robopipe", "doctor", "both"}: episodes
        flagged}; ``doctor_truncated`` (items lerobot-doctor's lists left out, summed); all
        sorted by episode, then check.
    """
    ours: dict[tuple[str, int], str] = {}
    for finding in quality.get("findings", []):
        episode = finding.get("episode_index")
        if finding.get("severity") in COMPARED_SEVERITIES and episode is not None:
            ours.setdefault((finding["check"], int(episode)), finding["severity"])
    doctor = list(doctor)
    theirs: dict[tuple[str, int], set[str]] = {}
    only_doctor, without_episode = [], []
    for finding in doctor:
        episode, checks = finding["episode_index"], finding["checks"]
        for check in checks:
            if episode is not None:
                theirs.setdefault((check, episode), set()).add(finding["group"])
        if episode is None:
            reported = sorted({c for c, _ in ours} & set(checks))
            without_episode.append(
                {
                    "group": finding["group"],
                    "checks": checks,
                    "message": finding["message"],
                    "robopipe_reports": reported,
                }
            )
        elif not any((check, episode) in ours for check in checks):
            only_doctor.append(
                {
                    "group": finding["group"],
                    "checks": checks,
                    "episode_index": episode,
                    "message": finding["message"],
                }
            )
    both = [
        {"check": c, "episode_index": e, "groups": sorted(theirs[(c, e)])}
        for c, e in sorted(ours, key=lambda k: (k[1], k[0]))
        if (c, e) in theirs
    ]
    only_robopipe = [
        {"check": c, "episode_index": e, "severity": ours[(c, e)]}
        for c, e in sorted(ours, key=lambda k: (k[1], k[0]))
        if (c, e) not in theirs
    ]
    per_check: dict[str, dict[str, int]] = {}
    for name, keys in (("robopipe", ours), ("doctor", theirs)):
        for check, _ in keys:
            per_check.setdefault(check, {"robopipe": 0, "doctor": 0, "both": 0})[name] += 1
    for entry in both:
        per_check[entry["check"]]["both"] += 1
    return {
        "both": both,
        "only_robopipe": only_robopipe,
        "only_doctor": sorted(only_doctor, key=lambda f: (f["episode_index"], f["group"])),
        "doctor_without_episode": without_episode,
        "per_check": dict(sorted(per_check.items())),
        "doctor_truncated": sum(f["truncated"] for f in doctor),
    }


def doctor_root(source) -> str | None:
    """The folder lerobot-doctor reads for a dataset's :class:`robopipe.sources.Source`: the
    one its quality checks read (a local v2.x or v3.0 folder, a generated source's folder);
    None for a remote source (lerobot-doctor reads local files, or downloads from the Hub)."""
    return None if source.kind.startswith("remote") else source.folder


def quality_peer(
    root: str | Path | None,
    quality_json: str | Path,
    python: str | None,
    out: str | Path,
    *,
    dataset: str,
    max_episodes: int | None = None,
    timeout_s: float | None = None,
) -> dict:
    """The workflow's rule ``quality_peer``: run lerobot-doctor on the dataset robopipe's
    quality checks read and write ``out`` (``results/<dataset>/quality/doctor.json``)
    atomically.

    Args:
        root: the dataset's local folder (v2.x or v3.0); None where the source is remote
            and no local copy exists (lerobot-doctor reads local files only): skipped.
        quality_json: robopipe's ``quality.json`` of the same dataset.
        python: the peer interpreter (:func:`robopipe.peer_env.peer_python`); None: skipped.
        out: where to write the result.
        dataset: the dataset's name.
        max_episodes, timeout_s: :func:`run_lerobot_doctor`'s.

    Returns:
        what it wrote: ``dataset``, ``root``, ``tool``, and either ``skipped`` (why), or the
        run's figures (:func:`run_lerobot_doctor`), ``overall_severity``, ``groups``
        [{"name", "severity"}], ``findings`` (:func:`doctor_findings`) and ``comparison``
        (:func:`compare_findings`).
    """
    if root is None:
        why = "the source is remote and it reads local files"
        ran = {"tool": None, "skipped": f"{DOCTOR} not run: {why}"}
    else:
        ran = run_lerobot_doctor(root, python, max_episodes=max_episodes, timeout_s=timeout_s)
    result = {"dataset": dataset, "root": None if root is None else str(root), **ran}
    report = result.pop("report", None)
    if report is not None:
        findings = doctor_findings(report)
        quality = json.loads(Path(quality_json).read_text())
        result |= {
            "overall_severity": report.get("overall_severity"),
            "groups": [{"name": g["name"], "severity": g["severity"]} for g in report["checks"]],
            "findings": findings,
            "comparison": compare_findings(quality, findings),
        }
    write_json(out, result)
    return result

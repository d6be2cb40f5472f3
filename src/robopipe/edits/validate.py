"""Validate an edit's staged output as a whole, after every file proved itself against its
input (:mod:`robopipe.edits.files`)."""

from __future__ import annotations

import json
from pathlib import Path

from robopipe.checks.v30 import check_v30
from robopipe.edits.plan import EditPlan
from robopipe.errors import DatasetError
from robopipe.formats.v30_reader import read_meta


def load_reports(paths: list[str | Path]) -> list[dict]:
    """The file jobs' reports at ``paths``, each without its ``episode_stats``
    (``recompute_stats``: edit_meta's input, one episode's stats each, which would otherwise
    all be held at once here)."""
    reports = []
    for path in paths:
        report = json.loads(Path(path).read_text("utf-8"))
        report.pop("episode_stats", None)
        reports.append(report)
    return reports


def validate_edit(plan: EditPlan, root: Path, reports: list[dict]) -> dict:
    """Check the staged dataset at ``root``: a report for every planned file, the episodes
    and frames the plan says, and robopipe's complete v3.0 check
    (:func:`robopipe.checks.v30.check_v30`: every cross-reference between meta, data and
    video files, timestamps within lerobot's 1e-4 s) without a problem.

    Returns:
        ``{"episodes", "frames", "data_files", "video_files", "linked", "cut",
        "reencoded", "reencoded_files", "packets"}``: ``reencoded`` counts the video files
        re-encoded because a cut fell inside a GOP (:mod:`robopipe.edits.reencode`), and
        ``reencoded_files`` lists them, each with ``reencoded_for`` (its episodes that start
        inside a GOP) and ``fidelity``.

    Raises:
        DatasetError: the first check that fails.
    """
    name = plan.dataset
    checked = {r["file"] for r in reports}
    for rel in plan.file_paths():
        if rel not in checked:
            raise DatasetError(name, "no validation report for this file", file=rel)
    meta = read_meta(str(root), name=name)
    if meta.num_episodes != plan.num_episodes or meta.num_frames != plan.total_frames:
        raise DatasetError(
            name,
            f"{meta.num_episodes} episodes and {meta.num_frames} frames in meta/episodes, "
            f"planned {plan.num_episodes} and {plan.total_frames}",
        )
    report = check_v30(root, name)
    if not report.ok:
        raise DatasetError(name, "the v3.0 check failed:\n" + report.summary())
    videos = [r for r in reports if "video_key" in r]
    return {
        "episodes": plan.num_episodes,
        "frames": plan.total_frames,
        "data_files": len(plan.data_files),
        "video_files": len(videos),
        "linked": sum(bool(r["linked"]) for r in reports),
        "cut": sum(not r["linked"] for r in videos),
        "reencoded": sum(r.get("reencoded", 0) for r in videos),
        "reencoded_files": [
            {key: r[key] for key in ("file", "reencoded_for", "fidelity")}
            for r in videos
            if r.get("reencoded")
        ],
        "packets": sum(r.get("packets") or 0 for r in videos),
    }

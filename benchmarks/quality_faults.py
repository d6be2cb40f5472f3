"""Injected faults: does robopipe's quality stage, and does lerobot-doctor 0.2.0, name each
fault's check and episode in copies of cr5?

Two copies of cr5 (``--dataset``, v2.1, 81 episodes), each with one fault per check of
:data:`robopipe.quality.CHECKS` in an episode of its own (:mod:`robopipe.harness.faults`):

- **v2.1**: a copy of cr5 with every fault, plus the structural ones (an unreadable mp4, a
  missing mp4);
- **v3.0**: cr5 with the two faults that change an episode's length (a length outlier, a
  duplicate of another length) converted to v3.0 (``restamp_timestamps``, small video files so
  that a camera fault re-encodes few episodes), then every other fault written into the v3.0
  files.

On each copy robopipe's quality runs in this process as the workflow's jobs do
(:func:`robopipe.quality.check_batch` per batch: the v3.0 data files, or ``--batch-episodes``
episodes of a v2.1 copy; then :func:`robopipe.quality.merge_batches`), default options, and
lerobot-doctor ``check`` in the peer environment (:mod:`robopipe.bench.quality_peer`). Per
fault it prints: flagged by robopipe with the right check and episode; by lerobot-doctor at
all (a message on the fault's topic at its episode or at none, on its feature where the
message names one); by lerobot-doctor at its episode; and per copy the
episodes without a fault that got an error from either tool.

Writes ``{results}/bench/quality/faults.json``. Usage::

    python benchmarks/quality_faults.py [--dataset ../shared/datasets/cr5_banana_plate_v21]
        [--work /tmp/quality_faults] [--batch-episodes 20] [--copies v2.1 v3.0] [--no-doctor]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from robopipe.atomic import write_json
from robopipe.bench.quality_peer import compare_findings, doctor_findings, run_lerobot_doctor
from robopipe.conversion.serial import convert_dataset
from robopipe.harness import faults as f
from robopipe.quality import CHECKS, QualityOptions, check_batch, merge_batches, v30_batches

REPO = Path(__file__).resolve().parents[1]
DATASET = REPO / ".." / "shared" / "datasets" / "cr5_banana_plate_v21"
LEROBOT_PYTHON = REPO / ".venv-lerobot" / "bin" / "python"
# (fault, its episode, keywords): one episode each, spread over cr5's 81 (episode 50 is cr5's
# one long episode, left alone); a duplicate copies an episode without a fault
FAULTS = (
    (f.inject_nan, 5, {}),
    (f.inject_frozen_signal, 11, {}),
    (f.inject_constant_dimension, 17, {}),
    (f.inject_clipped_dimension, 23, {}),
    (f.inject_action_jump, 29, {}),
    (f.inject_idle_episode, 35, {}),
    (f.inject_length_outlier, 41, {}),
    (f.inject_duplicate_episode, 47, {"of": 2}),
    (f.inject_wrong_stats, 53, {}),
    (f.inject_timestamp_drift, 59, {}),
    (f.inject_frozen_camera, 65, {}),
    (f.inject_black_camera, 71, {}),
)
STRUCTURAL = ((f.inject_unreadable_video, 77, {}), (f.inject_missing_file, 80, {}))
CHANGES_LENGTH = (f.inject_length_outlier, f.inject_duplicate_episode)  # v2.1 only


def v21_copy(source: Path, work: Path) -> tuple[Path, list]:
    """A copy of ``source`` with every fault, the structural ones included."""
    root = f.copy_dataset(source, work / "v21")
    return root, [inject(root, episode, **kw) for inject, episode, kw in FAULTS + STRUCTURAL]


def v30_copy(source: Path, work: Path) -> tuple[Path, list]:
    """``source`` with the length faults, converted to v3.0, then the other faults."""
    damaged = f.copy_dataset(source, work / "v30_source")
    done = [inject(damaged, e, **kw) for inject, e, kw in FAULTS if inject in CHANGES_LENGTH]
    root = work / "v30"
    convert_dataset(
        damaged, root, name="cr5_faults", restamp_timestamps=True, video_file_size_in_mb=5
    )
    shutil.rmtree(damaged)
    done += [inject(root, e, **kw) for inject, e, kw in FAULTS if inject not in CHANGES_LENGTH]
    return root, sorted(done, key=lambda fault: fault.episode)


COPIES = {"v2.1": v21_copy, "v3.0": v30_copy}


def run_quality(root: Path, batch_episodes: int) -> tuple[dict, float]:
    """robopipe's quality.json of ``root`` (default options), and its seconds."""
    options = QualityOptions()
    info = json.loads((root / "meta/info.json").read_text())
    if info["codebase_version"].startswith("v3"):
        batches = v30_batches(str(root))
    else:
        total = info["total_episodes"]
        batches = [
            list(range(i, min(i + batch_episodes, total))) for i in range(0, total, batch_episodes)
        ]
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="robopipe-quality-faults-") as tmp:
        partials = [Path(tmp) / f"batch-{i:04d}.partial" for i in range(len(batches))]
        for episodes, partial in zip(batches, partials, strict=True):
            check_batch(str(root), episodes, options, partial)
        quality = merge_batches(
            partials, Path(tmp) / "merged", dataset=root.name, source=str(root), options=options
        )
    return quality, time.perf_counter() - start


def judge(faults: list, quality: dict, doctor: list[dict] | None) -> dict:
    """Per fault: robopipe's and lerobot-doctor's verdicts; per copy: the errors either tool
    gave episodes without a fault."""
    ours = quality["findings"]
    faulted = {fault.episode for fault in faults}
    rows = []
    for fault in faults:
        hit = [x for x in ours if x["check"] == fault.check and x["episode_index"] == fault.episode]
        row = {
            "check": fault.check,
            "episode": fault.episode,
            "detail": fault.detail,
            "robopipe": bool(hit),
            "robopipe_severity": hit[0]["severity"] if hit else None,
            "robopipe_other_checks": sorted(
                {x["check"] for x in ours if x["episode_index"] == fault.episode} - {fault.check}
            ),
        }
        if doctor is not None:
            # a message on the fault's topic that could be about it: at its episode, or at
            # none, on its feature where the message names one
            topical = [
                x
                for x in doctor
                if fault.check in x["checks"]
                and x["episode_index"] in (None, fault.episode)
                and (fault.feature is None or x["feature"] in (None, fault.feature))
            ]
            at_episode = [x for x in topical if x["episode_index"] == fault.episode]
            row |= {
                "doctor": bool(topical),
                "doctor_episode": bool(at_episode),
                "doctor_messages": [x["message"] for x in (at_episode or topical)][:3],
            }
        rows.append(row)
    elsewhere = [x for x in ours if x["episode_index"] not in faulted]
    result = {
        "faults": rows,
        "robopipe_errors_elsewhere": [
            {"episode_index": x["episode_index"], "check": x["check"], "message": x["message"]}
            for x in elsewhere
            if x["severity"] == "error"
        ],
        "robopipe_warnings_elsewhere": _count(
            x["check"] for x in elsewhere if x["severity"] == "warning"
        ),
    }
    if doctor is not None:
        result["doctor_errors_elsewhere"] = [
            {"episode_index": x["episode_index"], "message": x["message"]}
            for x in doctor
            if x["severity"] == "error" and x["episode_index"] not in faulted | {None}
        ]
        result["comparison"] = compare_findings(quality, doctor)
    return result


def _count(items) -> dict[str, int]:
    counts: dict[str, int] = {}
    for item in items:
        counts[item] = counts.get(item, 0) + 1
    return dict(sorted(counts.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--work", type=Path, default=Path("/tmp/quality_faults"))
    parser.add_argument("--batch-episodes", type=int, default=20, help="per v2.1 batch")
    parser.add_argument("--results", type=Path, default=REPO / "results")
    parser.add_argument("--no-doctor", action="store_true", help="robopipe only")
    parser.add_argument("--copies", nargs="+", choices=COPIES, default=list(COPIES))
    args = parser.parse_args(argv)
    if not args.no_doctor and not LEROBOT_PYTHON.exists():
        sys.exit(f"{LEROBOT_PYTHON} missing: run tools/lerobot_env.sh first, or --no-doctor")
    work = args.work.resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    result = {"dataset": str(args.dataset), "checks": list(CHECKS), "load_1m": os.getloadavg()[0]}
    for name in args.copies:
        start = time.perf_counter()
        root, faults = COPIES[name](args.dataset.resolve(), work)
        made_s = time.perf_counter() - start
        quality, quality_s = run_quality(root, args.batch_episodes)
        doctor, ran = None, {}
        if not args.no_doctor:
            ran = run_lerobot_doctor(root, str(LEROBOT_PYTHON))
            report = ran.pop("report", None)
            doctor = doctor_findings(report) if report is not None else None
        result[name] = {
            "copy_s": round(made_s, 1),
            "robopipe_s": round(quality_s, 1),
            "decode": quality["decode"],
            "doctor": ran,
            **judge(faults, quality, doctor),
        }
    stem = "faults" if args.copies == list(COPIES) else "faults_" + "_".join(args.copies)
    write_json(args.results / "bench" / "quality" / f"{stem}.json", result)
    print_table(result)
    ok = all(
        row["robopipe"] and not result[name]["robopipe_errors_elsewhere"]
        for name in args.copies
        for row in result[name]["faults"]
    )
    return 0 if ok else 1


def print_table(result: dict) -> None:
    """One line per fault and copy; then, per copy, errors on episodes without a fault."""

    def mark(value) -> str:
        return "-" if value is None else ("yes" if value else "NO")

    print(f"{'copy':<5} {'fault (check)':<24} {'ep':>3} {'robopipe':>9} {'doctor':>7} "
          f"{'its ep':>7}  lerobot-doctor's words")  # fmt: skip
    for name in COPIES:
        if name not in result:
            continue
        copy = result[name]
        for row in copy["faults"]:
            words = (row.get("doctor_messages") or [""])[0][:60]
            print(
                f"{name:<5} {row['check']:<24} {row['episode']:>3} {mark(row['robopipe']):>9} "
                f"{mark(row.get('doctor')):>7} {mark(row.get('doctor_episode')):>7}  {words}"
            )
        doctor = copy["doctor"]
        print(
            f"{name}: robopipe {copy['robopipe_s']} s; errors on episodes without a fault: "
            f"robopipe {len(copy['robopipe_errors_elsewhere'])}, lerobot-doctor "
            f"{len(copy.get('doctor_errors_elsewhere', []))}; robopipe warnings there "
            f"{copy['robopipe_warnings_elsewhere']}; lerobot-doctor "
            f"{doctor.get('wall_s', '-')} s, {doctor.get('skipped') or doctor.get('exit_code')}"
        )


if __name__ == "__main__":
    sys.exit(main())

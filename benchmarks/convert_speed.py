"""Conversion speed: lerobot 0.6.1's converter vs robopipe's whole Snakemake conversion.

Sources: the demo dataset with N episodes (``--episodes N ...``; ``python -m robopipe.demo``,
2 cameras, cached under ``--work``) and/or real v2.1 folders (``--source DIR ...``, with
``--restamp`` for sources whose parquet timestamps are off ``frame_index / fps``). For each,
same machine, same run, ``--repeat`` times (default 3), alternating so that a slow spell of a
shared machine hits all three:

- ``cp -r`` of the source (the floor: every byte read and written once);
- lerobot: ``python -m lerobot.scripts.convert_dataset_v21_to_v30`` run as a whole process
  (interpreter start and imports included) on a writable copy of the source (it converts in
  place; copying is not timed), offline (``HF_HUB_OFFLINE=1``, ``HF_HOME`` in the work dir).
  Peak RSS is the process tree's ``ru_maxrss`` from ``os.wait4``.
- robopipe: ``python -m snakemake convert`` as a whole process, in a fresh Snakemake working
  directory, validation included (publish needs it). Each job's wall time and peak RSS come
  from Snakemake's benchmark TSVs (``results/jobs/{dataset}/{rule}/{name}.tsv``); the
  validation share is the seconds spent validating (the per-file checks inside the final-file
  jobs, from their reports' ``seconds``, plus the ``validate`` job) over all jobs' seconds
  (they run in parallel with the rest, so a share of the wall time cannot be cut out exactly).

Prints the medians, the range of the per-pair ratios, and writes
``{results}/bench/{dataset}/lerobot_convert.json`` (fields of the report's input contract
(robopipe.report.tables): dataset, episodes, lerobot_wall_s, lerobot_peak_rss_mb,
robopipe_wall_s, robopipe_max_job_rss_mb, as medians; plus cp -r, the validation figures and
each pair's figures under ``runs``) and copies the TSVs to ``{results}/jobs/{dataset}/``.

Needs ``.venv-lerobot`` (``tools/lerobot_env.sh``). Usage::

    python benchmarks/convert_speed.py --episodes 100 500 1000 [--repeat 3] [--cores 2] [--work DIR]
    python benchmarks/convert_speed.py --source ../shared/datasets/cr5_banana_plate_v21 --restamp
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from robopipe.atomic import write_json
from robopipe.harness.lerobot_convert import measure_lerobot_converter
from robopipe.harness.process import measured_process
from robopipe.report.tables import load_benchmarks

REPO = Path(__file__).resolve().parents[1]
LEROBOT_PYTHON = REPO / ".venv-lerobot" / "bin" / "python"


def demo_source(work: Path, episodes: int, codec: str) -> Path:
    """The N-episode demo dataset, generated once per work dir and codec."""
    root = work / "sources" / dataset_name(episodes, codec)
    if not (root / "meta/info.json").exists():
        print(f"generating {root} ...", flush=True)
        cmd = [sys.executable, "-m", "robopipe.demo", str(root), "--episodes", str(episodes)]
        cmd += ["--codec", codec]
        subprocess.run(cmd, check=True)
    return root


def run_copy(source: Path, work: Path, name: str) -> float:
    """Wall seconds of ``cp -r`` of ``source`` (the copy is removed afterwards)."""
    target = work / "copy" / name
    shutil.rmtree(target, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    copied = measured_process(["cp", "-r", str(source), str(target)], work / f"{name}.cp.log")
    shutil.rmtree(target)
    return copied["wall_s"]


def run_snakemake(source: Path, work: Path, name: str, cores: int, restamp: bool) -> float:
    """Wall seconds of ``snakemake convert`` in a fresh working directory ``work/snakemake``."""
    workdir = work / "snakemake"
    shutil.rmtree(workdir / "results" / name, ignore_errors=True)
    for sub in ("jobs", "logs"):
        shutil.rmtree(workdir / "results" / sub / name, ignore_errors=True)
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / f"{name}.yaml"
    entry = {"path": str(source), "conversion": {"restamp_timestamps": restamp}}
    config.write_text(json.dumps({"datasets": {name: entry}}))
    # `python -m snakemake`, as lerobot's converter runs as `python -m lerobot...`
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile")]
    cmd += ["-d", str(workdir)]
    # The default config first (relative paths resolve against -d, not the repo), then ours.
    cmd += ["--configfile", str(REPO / "config" / "config.yaml"), str(config)]
    cmd += ["--cores", str(cores), "convert"]
    return measured_process(cmd, work / f"{name}.snakemake.log", cwd=REPO)["wall_s"]


def read_benchmarks(name: str, folder: Path) -> dict[str, list[dict]]:
    """Snakemake benchmark TSVs per rule: ``{rule: [{"s": .., "max_rss": ..}, ...]}`` (0 where
    Snakemake wrote ``NA``: a job too short to sample)."""
    table = load_benchmarks(name, sorted(folder.glob("*/*.tsv"))).fillna(0.0)
    return {rule: rows[["s", "max_rss"]].to_dict("records") for rule, rows in table.groupby("rule")}


def per_file_validation_s(folder: Path) -> float:
    """Seconds the final-file jobs spent checking their files (``seconds`` of each report)."""
    return sum(json.loads(p.read_text())["seconds"] for p in folder.rglob("*.json"))


def dataset_name(episodes: int, codec: str) -> str:
    return f"demo{episodes}" + ("" if codec == "libsvtav1" else f"_{codec}")


def measure(
    name: str, source: Path, work: Path, results: Path, cores: int, repeat: int, restamp: bool
) -> dict:
    """Time cp -r, lerobot and robopipe ``repeat`` times, alternating, on ``source``; write and
    return lerobot_convert.json (medians; each round's figures under ``runs``)."""
    info = json.loads((source / "meta/info.json").read_text())
    load_before = os.getloadavg()[0]
    runs, job_rss = [], []
    benchmarks = work / "snakemake" / "results" / "jobs" / name
    for _ in range(repeat):
        copy_wall = run_copy(source, work, name)
        lerobot = measure_lerobot_converter(LEROBOT_PYTHON, source, work, name)
        lerobot_wall, lerobot_rss = lerobot["wall_s"], lerobot["tree_peak_rss_mb"]
        snakemake_wall = run_snakemake(source, work, name, cores, restamp)
        jobs = read_benchmarks(name, benchmarks)
        job_s = sum(r["s"] for rows in jobs.values() for r in rows)
        validate_s = sum(r["s"] for r in jobs.get("validate", []))
        validate_s += per_file_validation_s(work / "snakemake" / "results" / name / "validation")
        job_rss.append(max(r["max_rss"] for rows in jobs.values() for r in rows))
        runs.append(
            {
                "cp_wall_s": round(copy_wall, 3),
                "lerobot_wall_s": round(lerobot_wall, 3),
                "lerobot_peak_rss_mb": round(lerobot_rss, 1),
                "robopipe_wall_s": round(snakemake_wall, 3),
                "validate_job_s": round(validate_s, 3),
                "validate_share": round(validate_s / job_s, 3),
                "rule_max_rss_mb": {
                    rule: max(r["max_rss"] for r in rows) for rule, rows in jobs.items()
                },
            }
        )
    medians = ("cp_wall_s", "lerobot_wall_s", "lerobot_peak_rss_mb", "robopipe_wall_s")
    medians += ("validate_job_s", "validate_share")
    result = {
        "dataset": name,
        "episodes": info["total_episodes"],
        "frames": info["total_frames"],
        "cores": cores,
        **{key: statistics.median(r[key] for r in runs) for key in medians},
        "robopipe_max_job_rss_mb": max(job_rss),
        "robopipe_jobs": {rule: len(rows) for rule, rows in jobs.items()},
        "speedup_range": [
            round(min(r["lerobot_wall_s"] / r["robopipe_wall_s"] for r in runs), 3),
            round(max(r["lerobot_wall_s"] / r["robopipe_wall_s"] for r in runs), 3),
        ],
        "runs": runs,
        "load_avg_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],  # before, after
    }
    write_json(results / "bench" / name / "lerobot_convert.json", result)
    shutil.rmtree(results / "jobs" / name, ignore_errors=True)  # no earlier run's TSVs
    shutil.copytree(benchmarks, results / "jobs" / name)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, nargs="*", default=[])
    parser.add_argument("--source", type=Path, nargs="*", default=[], help="v2.1 folders")
    parser.add_argument(
        "--restamp", action="store_true", help="convert --source with restamp_timestamps"
    )
    parser.add_argument("--cores", type=int, default=os.cpu_count(), help="snakemake --cores")
    parser.add_argument(
        "--codec",
        choices=("libsvtav1", "h264"),
        default="libsvtav1",
        help="demo video codec (h264 generates faster than libsvtav1)",
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs of each converter, alternating (medians)"
    )
    parser.add_argument("--work", type=Path, default=REPO / "results" / "convert_speed")
    parser.add_argument("--results", type=Path, default=REPO / "results")
    args = parser.parse_args(argv)
    if not LEROBOT_PYTHON.exists():
        sys.exit(f"{LEROBOT_PYTHON} missing: run tools/lerobot_env.sh first")
    work = args.work.resolve()
    sources = [(p.resolve().name, p.resolve(), args.restamp) for p in args.source]
    for n in args.episodes:
        sources.append((dataset_name(n, args.codec), demo_source(work, n, args.codec), False))
    if not sources:
        parser.error("give --episodes and/or --source")
    print(
        f"{'dataset':>24} {'frames':>7} {'cp -r s':>7} {'lerobot s':>9} {'robopipe s':>10} "
        f"{'speedup':>7} {'range':>10} {'x cp -r':>7} {'valid.':>6} {'max job MB':>10}"
    )
    for name, source, restamp in sources:
        r = measure(name, source, work, args.results.resolve(), args.cores, args.repeat, restamp)
        low, high = r["speedup_range"]
        print(
            f"{name:>24} {r['frames']:>7} {r['cp_wall_s']:>7.1f} {r['lerobot_wall_s']:>9.1f} "
            f"{r['robopipe_wall_s']:>10.1f} {r['lerobot_wall_s'] / r['robopipe_wall_s']:>7.2f} "
            f"{f'{low:.2f}-{high:.2f}':>10} {r['robopipe_wall_s'] / r['cp_wall_s']:>7.1f} "
            f"{r['validate_share']:>6.0%} {r['robopipe_max_job_rss_mb']:>10.0f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

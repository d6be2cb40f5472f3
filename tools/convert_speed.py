"""Conversion speed: lerobot 0.6.1's converter vs robopipe's whole Snakemake conversion.

For each episode count N: generate the demo dataset (``python -m robopipe.demo``, 2 cameras;
cached under ``--work``), then, same machine, same run, ``--repeat`` times (default 3),
alternating the two so that a slow spell of a shared machine hits both:

- lerobot: ``python -m lerobot.scripts.convert_dataset_v21_to_v30`` run as a whole process
  (interpreter start and imports included) on a writable copy of the source (it converts in
  place; copying is not timed), offline (``HF_HUB_OFFLINE=1``, ``HF_HOME`` in the work dir).
  Peak RSS is the process's ``ru_maxrss`` from ``os.wait4``.
- robopipe: ``python -m snakemake convert`` as a whole process, in a fresh Snakemake working
  directory, with a config naming the local source. Validation is part of that run (publish
  needs it); the comparison uses the run's wall time minus the ``validate`` job's wall time,
  which is exact enough because validate runs alone (after every aggregate and meta job,
  before publish). Each job's peak RSS comes from Snakemake's benchmark TSVs
  (``results/jobs/{dataset}/{rule}/{name}.tsv``, column ``max_rss``, MB).

Prints the medians, the range of the per-pair ratios, and writes
``{results}/bench/{dataset}/lerobot_convert.json`` (fields of the report's input contract
(robopipe.report.results): dataset, episodes, lerobot_wall_s, lerobot_peak_rss_mb,
robopipe_wall_s, robopipe_max_job_rss_mb, as medians; plus the validation figures and each
pair's figures under ``runs``) and copies the TSVs to ``{results}/jobs/{dataset}/``.

Needs ``.venv-lerobot`` (``tools/lerobot_env.sh``). Usage::

    python tools/convert_speed.py --episodes 100 500 1000 [--repeat 3] [--cores 2] [--work DIR]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from lerobot_compat import LEROBOT_PYTHON, REPO, lerobot_convert_command, offline_env, writable_copy

from robopipe.atomic import write_json
from robopipe.layout import DEFAULT_DATA_FILE_SIZE_IN_MB, DEFAULT_VIDEO_FILE_SIZE_IN_MB


def timed_process(cmd: list[str], log: Path, env: dict | None = None, cwd: Path | None = None):
    """Run ``cmd`` to completion; return (wall seconds, peak RSS in MB of the process itself).

    Raises:
        SystemExit: the command failed (its log is named).
    """
    with open(log, "w") as f:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=cwd)
        _, status, rusage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"{cmd[:3]} failed (exit {proc.returncode}), see {log}")
    return wall, rusage.ru_maxrss / 1024  # ru_maxrss is in KiB on Linux


def demo_source(work: Path, episodes: int, codec: str) -> Path:
    """The N-episode demo dataset, generated once per work dir and codec."""
    root = work / "sources" / dataset_name(episodes, codec)
    if not (root / "meta/info.json").exists():
        print(f"generating {root} ...", flush=True)
        cmd = [sys.executable, "-m", "robopipe.demo", str(root), "--episodes", str(episodes)]
        cmd += ["--codec", codec]
        subprocess.run(cmd, check=True)
    return root


def run_lerobot(source: Path, work: Path, name: str) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of lerobot's converter on a copy of ``source``."""
    root = work / "lerobot" / name
    for path in (root, root.with_name(name + "_old"), root.with_name(name + "_v30")):
        shutil.rmtree(path, ignore_errors=True)
    root.parent.mkdir(parents=True, exist_ok=True)
    writable_copy(source, root)
    cmd = lerobot_convert_command(
        root, DEFAULT_DATA_FILE_SIZE_IN_MB, DEFAULT_VIDEO_FILE_SIZE_IN_MB, 1000
    )
    hf_home = work / "hf"
    shutil.rmtree(hf_home, ignore_errors=True)  # no arrow cache left from an earlier run
    return timed_process(cmd, work / f"{name}.lerobot.log", env=offline_env(hf_home))


def run_snakemake(source: Path, work: Path, name: str, cores: int) -> float:
    """Wall seconds of ``snakemake convert`` in a fresh working directory ``work/snakemake``."""
    workdir = work / "snakemake"
    shutil.rmtree(workdir / "results" / name, ignore_errors=True)
    for sub in ("jobs", "logs"):
        shutil.rmtree(workdir / "results" / sub / name, ignore_errors=True)
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / f"{name}.yaml"
    config.write_text(json.dumps({"datasets": {name: {"path": str(source)}}}))
    # `python -m snakemake`, as lerobot's converter runs as `python -m lerobot...`
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(REPO / "workflow" / "Snakefile"),
        "-d",
        str(workdir),
    ]
    # The default config first (relative paths resolve against -d, not the repo), then ours.
    cmd += ["--configfile", str(REPO / "config" / "config.yaml"), str(config)]
    cmd += ["--cores", str(cores), "convert"]
    wall, _ = timed_process(cmd, work / f"{name}.snakemake.log", cwd=REPO)
    return wall


def read_benchmarks(folder: Path) -> dict[str, list[dict]]:
    """Snakemake benchmark TSV rows per rule: ``{rule: [{"s": .., "max_rss": ..}, ...]}``."""
    rows: dict[str, list[dict]] = {}
    for tsv in sorted(folder.glob("*/*.tsv")):
        with open(tsv) as f:
            for row in csv.DictReader(f, delimiter="\t"):
                rows.setdefault(tsv.parent.name, []).append(
                    {"s": float(row["s"]), "max_rss": _float_or_zero(row["max_rss"])}
                )
    return rows


def _float_or_zero(value: str) -> float:
    """Snakemake writes ``NA`` for jobs too short to sample."""
    try:
        return float(value)
    except ValueError:
        return 0.0


def dataset_name(episodes: int, codec: str) -> str:
    return f"demo{episodes}" + ("" if codec == "libsvtav1" else f"_{codec}")


def measure(episodes: int, work: Path, results: Path, cores: int, codec: str, repeat: int) -> dict:
    """Time both converters ``repeat`` times, alternating, on the N-episode demo; write and
    return lerobot_convert.json (medians; each pair's figures under ``runs``)."""
    name = dataset_name(episodes, codec)
    source = demo_source(work, episodes, codec)
    frames = json.loads((source / "meta/info.json").read_text())["total_frames"]
    load_before = os.getloadavg()[0]
    runs, job_rss = [], []
    benchmarks = work / "snakemake" / "results" / "jobs" / name
    for _ in range(repeat):
        lerobot_wall, lerobot_rss = run_lerobot(source, work, name)
        snakemake_wall = run_snakemake(source, work, name, cores)
        jobs = read_benchmarks(benchmarks)
        validate = jobs.get("validate", [])
        validate_s = sum(r["s"] for r in validate)
        conversion = [r for rule, rows in jobs.items() if rule != "validate" for r in rows]
        job_rss.append(max(r["max_rss"] for r in conversion))
        runs.append(
            {
                "lerobot_wall_s": round(lerobot_wall, 3),
                "lerobot_peak_rss_mb": round(lerobot_rss, 1),
                "robopipe_wall_s": round(snakemake_wall - validate_s, 3),
                "snakemake_wall_s_with_validation": round(snakemake_wall, 3),
                "validate_s": validate_s,
                "validate_max_rss_mb": max((r["max_rss"] for r in validate), default=None),
            }
        )
    result = {
        "dataset": name,
        "episodes": episodes,
        "frames": frames,
        "codec": codec,
        "cores": cores,
        **{key: statistics.median(r[key] for r in runs) for key in runs[0]},
        "robopipe_max_job_rss_mb": max(job_rss),
        "robopipe_jobs": {rule: len(rows) for rule, rows in jobs.items() if rule != "validate"},
        "ratio_range": [
            round(min(r["robopipe_wall_s"] / r["lerobot_wall_s"] for r in runs), 3),
            round(max(r["robopipe_wall_s"] / r["lerobot_wall_s"] for r in runs), 3),
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
    parser.add_argument("--episodes", type=int, nargs="+", default=[100, 500, 1000])
    parser.add_argument("--cores", type=int, default=os.cpu_count(), help="snakemake --cores")
    parser.add_argument(
        "--codec",
        choices=("libsvtav1", "h264"),
        default="libsvtav1",
        help="demo video codec (h264: PyAV's libsvtav1 can hang on long runs, see README)",
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
    print(
        f"{'episodes':>8} {'frames':>7} {'lerobot s':>9} {'robopipe s':>10} {'ratio':>6} "
        f"{'range':>10} {'lerobot MB':>10} {'max job MB':>10} {'validate s':>10} {'val. MB':>7}"
    )
    for episodes in args.episodes:
        r = measure(episodes, work, args.results.resolve(), args.cores, args.codec, args.repeat)
        ratio = r["robopipe_wall_s"] / r["lerobot_wall_s"]
        low, high = r["ratio_range"]
        print(
            f"{episodes:>8} {r['frames']:>7} {r['lerobot_wall_s']:>9.1f} "
            f"{r['robopipe_wall_s']:>10.1f} {ratio:>6.2f} {f'{low:.2f}-{high:.2f}':>10} "
            f"{r['lerobot_peak_rss_mb']:>10.0f} "
            f"{r['robopipe_max_job_rss_mb']:>10.0f} {r['validate_s']:>10.1f} "
            f"{r['validate_max_rss_mb'] or 0:>7.0f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

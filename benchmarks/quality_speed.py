"""Quality checks at scale: robopipe's (every check of every episode, sampled video) against
lerobot-doctor 0.2.0's ``check`` (all episodes) on the DROID-shaped dataset, in the same run.

The dataset is ``benchmarks/droid_bench.py``'s (``build_dataset``: 40 generated episodes, 3
cameras 64x64 H.264 15 fps, hard-linked to ``--episodes``), built once under ``--work``. Then,
each after a ``sync`` (untimed):

- robopipe: ``python -m snakemake quality --cores N`` in a fresh working directory
  (``--via snakemake``; the source's check and plan jobs included, the doctor's rule
  ``quality_peer`` told there is no peer environment), or (``--via library``) one process
  per episode batch running :func:`robopipe.quality.check_batch` (``--cores`` at a time),
  then one running :func:`robopipe.quality.merge_batches`. Wall time of the whole; peak RSS
  of every job (Snakemake's benchmark TSVs, or each process's own VmHWM);
- lerobot-doctor: ``lerobot-doctor check <root> --json`` in the peer environment, killed after
  ``--doctor-timeout-s`` (then its wall time is a lower bound);
- the decode cost: :func:`robopipe.quality.check_batch` in this process on the first
  ``--decode-episodes`` episodes, once with ``decode: sample`` and once with ``decode: all``:
  seconds and frames decoded per episode.

Prints a table and writes ``{results}/bench/quality/speed_droid{N}.json``. Needs
``.venv-lerobot`` with lerobot-doctor (``tools/lerobot_env.sh``) unless ``--no-doctor``::

    python benchmarks/quality_speed.py --episodes 20000 --cores 2 --doctor-timeout-s 1800
    python benchmarks/quality_speed.py --episodes 2000 --cores 2 --via library
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from droid_bench import (  # the same dataset, the same TSVs
    REPO,
    dataset_figures,
    dataset_parser,
    job_figures,
    prepare_dataset,
)

from robopipe.atomic import write_json
from robopipe.bench.quality_peer import run_lerobot_doctor
from robopipe.harness.process import measured_process
from robopipe.quality import QualityOptions, check_batch, merge_batches

LEROBOT_PYTHON = REPO / ".venv-lerobot" / "bin" / "python"
# one check_batch job of the library path: argv[1] is a JSON of its arguments
BATCH_JOB = (
    "import json, sys\n"
    "from pathlib import Path\n"
    "from robopipe.quality import QualityOptions, check_batch\n"
    "a = json.loads(sys.argv[1])\n"
    "check_batch(a['root'], a['episodes'], QualityOptions.from_config(a['options']),"
    " Path(a['out']))\n"
)
MERGE_JOB = (
    "import json, sys\n"
    "from pathlib import Path\n"
    "from robopipe.quality import QualityOptions, merge_batches\n"
    "a = json.loads(sys.argv[1])\n"
    "merge_batches([Path(p) for p in a['partials']], Path(a['out_dir']), dataset=a['dataset'],"
    " source=a['root'], options=QualityOptions.from_config(a['options']))\n"
)


def run_snakemake(source: Path, work: Path, name: str, cores: int) -> dict:
    """``snakemake quality`` of ``source`` in a fresh working directory: the process's
    figures, every job's (``jobs``: rule -> [{"name", "s", "cpu_s", "max_rss_mb"}]) and the
    ``quality.json`` it wrote."""
    workdir = work / "quality_snakemake"
    subprocess.run(["rm", "-rf", str(workdir)], check=True)
    workdir.mkdir(parents=True)
    config = workdir / "config.yaml"
    # lerobot-doctor is timed on its own below, not inside the quality target (quality_peer)
    settings = {"datasets": {name: {"path": str(source)}}, "bench": {"lerobot_python": None}}
    config.write_text(json.dumps(settings))
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d", str(workdir)]
    cmd += ["--configfile", str(REPO / "config" / "config.yaml"), str(config)]
    cmd += ["--cores", str(cores), "quality"]
    result = measured_process(cmd, work / f"{name}.quality.snakemake.log", cwd=REPO)
    result["jobs"] = job_figures(name, workdir / "results" / "jobs" / name)
    result["quality"] = json.loads((workdir / f"results/{name}/quality/quality.json").read_text())
    return result


def run_library(source: Path, work: Path, name: str, cores: int, batch_episodes: int) -> dict:
    """robopipe's quality as the workflow runs it, without Snakemake: one process per batch
    of ``batch_episodes`` episodes (``cores`` at a time), then the merge process."""
    out = work / "quality_library"
    subprocess.run(["rm", "-rf", str(out)], check=True)
    out.mkdir(parents=True)
    episodes = json.loads((source / "meta/info.json").read_text())["total_episodes"]
    options = QualityOptions().to_config()
    batches = [
        list(range(first, min(first + batch_episodes, episodes)))
        for first in range(0, episodes, batch_episodes)
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}

    def job(i: int) -> dict:
        args = {"root": str(source), "episodes": batches[i], "options": options}
        args["out"] = str(out / f"batch-{i:04d}.partial")
        cmd = [sys.executable, "-c", BATCH_JOB, json.dumps(args)]
        return {"name": f"batch-{i:04d}", **measured_process(cmd, out / f"batch-{i}.log", env)}

    start = time.perf_counter()
    with ThreadPoolExecutor(cores) as pool:
        jobs = list(pool.map(job, range(len(batches))))
    args = {"partials": [str(out / f"{j['name']}.partial") for j in jobs], "dataset": name}
    args |= {"out_dir": str(out / "merged"), "root": str(source), "options": options}
    cmd = [sys.executable, "-c", MERGE_JOB, json.dumps(args)]
    merge = {"name": "merge", **measured_process(cmd, out / "merge.log", env)}
    wall = time.perf_counter() - start
    # each job's own peak (VmHWM): wait4's ru_maxrss of a child counts this process's pages
    # at its spawn (2.2 GB here at 80,000 episodes), whatever the job used
    rows = {
        "quality_batch": [
            {
                "name": j["name"],
                "s": j["wall_s"],
                "cpu_s": j["cpu_s"],
                "max_rss_mb": j["own_peak_rss_mb"],
            }
            for j in jobs
        ],
        "quality_merge": [
            {
                "name": "merge",
                "s": merge["wall_s"],
                "cpu_s": merge["cpu_s"],
                "max_rss_mb": merge["own_peak_rss_mb"],
            }
        ],
    }
    cpu = sum(j["cpu_s"] for j in jobs) + merge["cpu_s"]
    quality = json.loads((out / "merged/quality.json").read_text())
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "jobs": rows, "quality": quality}


def decode_cost(source: Path, episodes: int) -> dict:
    """check_batch on the first ``episodes`` episodes, sampled and full decode: seconds and
    frames decoded per episode (quality.json's ``decode`` section of a one-batch merge).
    An untimed pass over the first episode goes before: without it the first mode timed paid
    this process's one-time costs (sampled came out at 70.6 ms an episode, full at 26.2)."""
    with tempfile.TemporaryDirectory(prefix="robopipe-quality-warmup-") as tmp:
        warm = QualityOptions.from_config({"decode": "all"})
        check_batch(str(source), [0], warm, Path(tmp) / "batch.partial")
    cost = {}
    for mode in ("sample", "all"):
        options = QualityOptions.from_config({"decode": mode})
        with tempfile.TemporaryDirectory(prefix="robopipe-quality-decode-") as tmp:
            partial = Path(tmp) / "batch.partial"
            start = time.perf_counter()
            check_batch(str(source), list(range(episodes)), options, partial)
            seconds = time.perf_counter() - start
            merged = merge_batches(
                [partial],
                Path(tmp) / "merged",
                dataset="decode",
                source=str(source),
                options=options,
            )
        frames = merged["decode"].get("frames_decoded", 0)
        cost[mode] = {
            "episodes": episodes,
            "s_per_episode": round(seconds / episodes, 4),
            "frames_per_episode": round(frames / episodes, 1),
            "device": merged["decode"].get("used"),
        }
    return cost


def main(argv: list[str] | None = None) -> int:
    parser = dataset_parser(__doc__, cores=2)
    parser.add_argument("--via", choices=["snakemake", "library"], default="snakemake")
    parser.add_argument("--batch-episodes", type=int, default=1000, help="--via library")
    parser.add_argument("--doctor-timeout-s", type=float, default=1800.0)
    parser.add_argument("--decode-episodes", type=int, default=40)
    parser.add_argument("--no-doctor", action="store_true", help="robopipe only")
    args = parser.parse_args(argv)
    work, source, info, name = prepare_dataset(args, peer_needed=not args.no_doctor)
    result = {
        **dataset_figures(name, info, args.cores),
        "cpus": os.cpu_count(),
        "via": args.via,
        "load_1m_before": round(os.getloadavg()[0], 2),
    }
    if args.via == "snakemake":
        robopipe = run_snakemake(source, work, name, args.cores)
    else:
        robopipe = run_library(source, work, name, args.cores, args.batch_episodes)
    quality = robopipe.pop("quality")
    robopipe["findings"] = len(quality["findings"])
    robopipe["decode"] = quality["decode"]
    result["robopipe"] = robopipe
    result["load_1m_after_robopipe"] = round(os.getloadavg()[0], 2)
    if not args.no_doctor:
        os.sync()
        ran = run_lerobot_doctor(source, str(LEROBOT_PYTHON), timeout_s=args.doctor_timeout_s)
        ran.pop("report", None)
        result["lerobot_doctor"] = ran
        result["load_1m_after_doctor"] = round(os.getloadavg()[0], 2)
    result["decode_cost"] = decode_cost(source, args.decode_episodes)
    write_json(args.results / "bench" / "quality" / f"speed_{name}.json", result)
    report(result)
    return 0


def report(result: dict) -> None:
    """Print the two tools' wall time, CPU and peak RSS, the jobs' and the decode cost."""
    ours = result["robopipe"]
    print(
        f"{result['dataset']}: {result['episodes']} episodes, {result['frames']} frames, "
        f"{result['videos']} mp4s; {result['cores']} cores of {result['cpus']}, load "
        f"{result['load_1m_before']} (1 min, before)"
    )
    print(f"{'':<22} {'wall s':>9} {'CPU s':>8} {'peak RSS MB':>12}")
    jobs = [j for rows in ours["jobs"].values() for j in rows]
    peak = max(j["max_rss_mb"] for j in jobs)
    print(
        f"{'robopipe (' + result['via'] + ')':<22} {ours['wall_s']:>9.1f} {ours['cpu_s']:>8.1f} "
        f"{peak:>12.0f}  (largest job; {len(jobs)} jobs, {ours['findings']} findings)"
    )
    if doctor := result.get("lerobot_doctor"):
        if doctor.get("skipped"):
            print(f"lerobot-doctor: {doctor['skipped']}")
        else:
            wall = f"{'>=' if doctor['timed_out'] else ''}{doctor['wall_s']:.1f}"
            print(f"{'lerobot-doctor 0.2.0':<22} {wall:>9} {'':>8} {doctor['peak_rss_mb']:>12.0f}")
            ratio = doctor["wall_s"] / ours["wall_s"]
            bound = " (a lower bound: it was stopped)" if doctor["timed_out"] else ""
            print(f"lerobot-doctor / robopipe wall: {ratio:.1f}x{bound}")
    for rule, rows in sorted(ours["jobs"].items()):
        print(
            f"  {rule:<20} {len(rows):>5} jobs, {sum(r['s'] for r in rows):>8.1f} job s, "
            f"max RSS {max(r['max_rss_mb'] for r in rows):>6.0f} MB"
        )
    for mode, cost in result["decode_cost"].items():
        print(
            f"  decode {mode:<6}: {cost['s_per_episode'] * 1000:.1f} ms and "
            f"{cost['frames_per_episode']:.0f} frames per episode ({cost['episodes']} episodes, "
            f"{cost['device']})"
        )


if __name__ == "__main__":
    sys.exit(main())

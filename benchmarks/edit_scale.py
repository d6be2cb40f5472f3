"""Edits at scale on the DROID-shaped dataset: ``snakemake edit`` against robopipe's own
conversion, against the conversion with ``skip_episodes``, and against lerobot 0.6.1's
``lerobot-edit-dataset``, in the same run.

The dataset is ``benchmarks/droid_bench.py``'s (40 generated episodes, 3 cameras, hard-linked
to ``--episodes``), built once under ``--work``. Each step runs in a fresh working directory
after a ``sync``, timed from the outside (wall seconds of the whole command), one after the
other:

1. ``convert``: ``snakemake convert`` of the v2.1 dataset: the edits' input and the goal's
   yardstick (an edit takes no longer than this);
2. ``delete``: ``snakemake edit``, ``delete_episodes`` of every ``--every``-th episode
   (0, 10, 20, ...), its source the v3.0 folder of step 1;
3. ``skip``: ``snakemake convert`` of the v2.1 dataset with ``skip_episodes`` set to the same
   episodes; its output is compared with step 2's;
4. ``halves``: ``snakemake edit`` of a split 0.5 / 0.5 of step 1's output and a merge of the
   two halves, compared with step 1's output;
5. ``lerobot``: ``lerobot-edit-dataset --operation.type delete_episodes`` with the same
   episodes on step 1's output, killed after ``--lerobot-timeout-s`` (default: 11x step 2's
   seconds, at least 600), its wall time then a lower bound.

Comparisons (``edits_vs_lerobot.compare``): the data rows (every column), ``meta/episodes``
(episode_index, length, tasks, dataset_from_index, dataset_to_index), the tasks, info.json's
totals (equal), the stats (within 1e-5 relative). Every robopipe job's peak RSS and seconds
come from its Snakemake benchmark TSV. Prints a table and writes
``{results}/bench/edits/edit_scale_droid{N}.json``::

    python benchmarks/edit_scale.py --episodes 20000 --cores 2
    python benchmarks/edit_scale.py --episodes 2000 --cores 2 --no-lerobot
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from droid_bench import (  # the same dataset, the same TSVs
    LEROBOT_PYTHON,
    REPO,
    dataset_figures,
    dataset_parser,
    job_figures,
    prepare_dataset,
)
from edits_vs_lerobot import compare

from robopipe.atomic import write_json
from robopipe.harness.process import measured_process


def snakemake_step(work: Path, step: str, config: dict, target: str, cores: int) -> dict:
    """``snakemake <target>`` with ``config`` in ``work/<step>`` (made fresh): the process's
    figures (``robopipe.harness.process.measured_process``) and every job's, by rule."""
    workdir = work / step
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    (workdir / "config.yaml").write_text(json.dumps(config))
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d", str(workdir)]
    cmd += ["--cores", str(cores), target, "--configfile", str(workdir / "config.yaml")]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    result = measured_process(cmd, work / f"{step}.snakemake.log", env=env, cwd=REPO)
    jobs = {}
    for folder in sorted((workdir / "results/jobs").glob("*")):
        for rule, rows in job_figures(folder.name, folder).items():
            jobs.setdefault(rule, []).extend(rows)
    result["jobs"] = jobs
    result["max_job_rss_mb"] = max(r["max_rss_mb"] for rows in jobs.values() for r in rows)
    return result


def lerobot_delete(source: Path, deleted: list[int], work: Path, timeout_s: float) -> dict:
    """lerobot-edit-dataset's delete_episodes of ``deleted`` from ``source`` (offline), killed
    after ``timeout_s``: ``{"wall_s", "finished"}`` (unfinished: a lower bound)."""
    out = work / "lerobot"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    tool = str(LEROBOT_PYTHON.parent / "lerobot-edit-dataset")
    cmd = [tool, "--repo_id", "src", "--root", str(source), "--new_repo_id", "src_deleted",
           "--new_root", str(out / "deleted"), "--operation.type", "delete_episodes",
           "--operation.episode_indices", json.dumps(deleted)]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_LEROBOT_HOME": str(out / "home")}
    os.sync()
    with open(work / "lerobot.log", "w") as log:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)  # fmt: skip
        try:
            finished = proc.wait(timeout=timeout_s) == 0
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            finished = False
    return {"wall_s": round(time.perf_counter() - start, 1), "finished": finished,
            "timeout_s": timeout_s}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = dataset_parser(__doc__, cores=os.cpu_count())
    parser.add_argument("--every", type=int, default=10, help="delete every N-th episode")
    parser.add_argument("--lerobot-timeout-s", type=float, default=None)
    parser.add_argument("--no-lerobot", action="store_true", help="robopipe only")
    args = parser.parse_args(argv)
    work, source, info, name = prepare_dataset(args, peer_needed=not args.no_lerobot)
    work = work / "edit_scale"
    deleted = list(range(0, info["total_episodes"], args.every))
    v30 = work / "convert/results" / name / "v3.0"
    result = {**dataset_figures(name, info, args.cores), "deleted": len(deleted),
              "load_1m_before": round(os.getloadavg()[0], 2)}  # fmt: skip
    steps = {
        "convert": ({"datasets": {name: {"path": str(source)}}}, "convert"),
        "delete": ({"datasets": {}, "edits": {f"{name}_deleted": {"source": str(v30),
                   "operation": {"type": "delete_episodes", "episode_indices": deleted}}}},
                   "edit"),
        "skip": ({"datasets": {f"{name}_skip": {"path": str(source),
                 "conversion": {"skip_episodes": deleted}}}}, "convert"),
        "halves": ({"datasets": {}, "edits": {
            f"{name}_half": {"source": str(v30),
                             "operation": {"type": "split", "splits": {"a": 0.5, "b": 0.5}}},
            f"{name}_halves": {"operation": {"type": "merge",
                               "sources": [f"{name}_half_a", f"{name}_half_b"]}}}}, "edit"),
    }  # fmt: skip
    for step, (config, target) in steps.items():
        print(f"{step} ...", flush=True)
        result[step] = snakemake_step(work, step, config, target, args.cores)
    outputs = {
        "delete": work / f"delete/results/{name}_deleted/v3.0",
        "skip": work / f"skip/results/{name}_skip/v3.0",
        "halves": work / f"halves/results/{name}_halves/v3.0",
    }
    result["delete_vs_skip_episodes"] = compare(outputs["delete"], outputs["skip"])
    result["halves_vs_source"] = compare(outputs["halves"], v30)
    if not args.no_lerobot:
        print("lerobot ...", flush=True)
        timeout = args.lerobot_timeout_s or max(600.0, 11 * result["delete"]["wall_s"])
        result["lerobot_delete"] = lerobot_delete(v30, deleted, work, timeout)
        result["lerobot_vs_robopipe_delete"] = round(
            result["lerobot_delete"]["wall_s"] / result["delete"]["wall_s"], 1
        )
    result["load_1m_after"] = round(os.getloadavg()[0], 2)
    out = args.results / "bench/edits" / f"edit_scale_{name}.json"
    write_json(out, result)
    for step in steps:
        seconds, rss = result[step]["wall_s"], result[step]["max_job_rss_mb"]
        print(f"{step:<8} {seconds:>8.1f} s  max job RSS {rss:.0f} MB")
    if "lerobot_delete" in result:
        lerobot = result["lerobot_delete"]
        bound = "" if lerobot["finished"] else " (killed: a lower bound)"
        print(f"lerobot  {lerobot['wall_s']:>8.1f} s{bound}: "
              f"{result['lerobot_vs_robopipe_delete']}x robopipe's delete")  # fmt: skip
    for key in ("delete_vs_skip_episodes", "halves_vs_source"):
        print(key, result[key])
    print(f"wrote {out}")
    comparisons = [result["delete_vs_skip_episodes"], result["halves_vs_source"]]
    ok = all(c["rows"] and c["episodes"] and c["tasks"] and c["totals"]
             and not c["stats_mismatch"] for c in comparisons)  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

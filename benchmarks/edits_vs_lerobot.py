"""robopipe's edits (``snakemake edit``) against lerobot 0.6.1's ``lerobot-edit-dataset`` on
one v3.0 dataset: delete episodes, split 0.8 / 0.2, merge the two splits back, recompute the
stats; timed, then compared.

    python benchmarks/edits_vs_lerobot.py [--source results/cr5/v3.0] [--delete 10 40 70]
        [--cores 2] [--work results/edits_vs_lerobot] [--lerobot-python .venv-lerobot/bin/python]

Each of the four steps runs once with each tool, from the same input, timed from the
outside (wall seconds of the command). Then for each step it compares the two outputs: the
data rows (every column), ``meta/episodes`` (episode_index, length, tasks,
dataset_from_index, dataset_to_index), the tasks, info.json's totals (equal), the stats
(within 1e-5 relative), and the frames: per episode, the video packets of each output
against the source's (robopipe copies them; lerobot re-encodes a file that mixes kept and
deleted episodes). And merge(split(source)) against the source. Prints one JSON object
(and writes it to ``<work>/result.json``); exit status 1 when a comparison fails.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from robopipe.formats.v30_reader import read_episodes_table, read_meta
from robopipe.mp4 import read_track

REPO = Path(__file__).resolve().parents[1]
EPISODE_COLUMNS = ["episode_index", "length", "tasks", "dataset_from_index", "dataset_to_index"]


def run(command: list[str], cwd: Path | None = None, env: dict | None = None) -> float:
    """Run ``command``; its wall seconds. Raises CalledProcessError (output shown)."""
    start = time.perf_counter()
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    if result.returncode:
        sys.stderr.write(result.stdout[-4000:] + result.stderr[-4000:])
        raise subprocess.CalledProcessError(result.returncode, command)
    return round(time.perf_counter() - start, 2)


def robopipe_edits(source: Path, deleted: list[int], work: Path, cores: int) -> dict:
    """The four steps as `snakemake edit` runs, one after the other; their seconds."""
    work.mkdir(parents=True, exist_ok=True)
    edits = {
        "src_deleted": {"source": str(source),
                        "operation": {"type": "delete_episodes", "episode_indices": deleted}},
        "src_split": {"source": str(source),
                      "operation": {"type": "split", "splits": {"train": 0.8, "val": 0.2}}},
        "src_merged": {"operation": {"type": "merge",
                                     "sources": ["src_split_train", "src_split_val"]}},
        "src_restated": {"source": str(source), "operation": {"type": "recompute_stats"}},
    }  # fmt: skip
    config = work / "config.yaml"
    config.write_text(yaml.safe_dump({"datasets": {}, "edits": edits}))
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    base = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d", str(work)]
    base += ["--cores", str(cores)]
    seconds = {}
    for step, targets in (
        ("delete", ["src_deleted"]),
        ("split", ["src_split_train", "src_split_val"]),
        ("merge", ["src_merged"]),
        ("recompute", ["src_restated"]),
    ):
        files = [f"results/{t}/v3.0/meta/info.json" for t in targets]
        seconds[step] = run([*base, *files, "--configfile", str(config)], env=env)
    outputs = {
        "delete": work / "results/src_deleted/v3.0",
        "train": work / "results/src_split_train/v3.0",
        "val": work / "results/src_split_val/v3.0",
        "merge": work / "results/src_merged/v3.0",
        "recompute": work / "results/src_restated/v3.0",
    }
    return {"seconds": seconds, "outputs": outputs}


def lerobot_edits(python: str, source: Path, deleted: list[int], work: Path) -> dict:
    """The four steps with lerobot-edit-dataset (lerobot 0.6.1); their seconds."""
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    tool = [str(Path(python).parent / "lerobot-edit-dataset")]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_LEROBOT_HOME": str(work / "home")}
    src = ["--repo_id", "src", "--root", str(source)]
    seconds = {
        "delete": run([*tool, *src, "--new_repo_id", "src_deleted", "--new_root",
                       str(work / "deleted"), "--operation.type", "delete_episodes",
                       "--operation.episode_indices", json.dumps(deleted)], env=env),
        "split": run([*tool, *src, "--new_root", str(work / "split"), "--operation.type",
                      "split", "--operation.splits", '{"train": 0.8, "val": 0.2}'], env=env),
    }  # fmt: skip
    train, val = work / "split/train", work / "split/val"
    seconds["merge"] = run(
        [*tool, "--new_repo_id", "src_merged", "--new_root", str(work / "merged"),
         "--operation.type", "merge", "--operation.repo_ids", "['src_train', 'src_val']",
         "--operation.roots", json.dumps([str(train), str(val)])], env=env,
    )  # fmt: skip
    seconds["recompute"] = run(
        [*tool, *src, "--new_repo_id", "src_recomputed", "--new_root", str(work / "recomputed"),
         "--operation.type", "recompute_stats"], env=env,
    )  # fmt: skip
    outputs = {"delete": work / "deleted", "train": train, "val": val, "merge": work / "merged",
               "recompute": work / "recomputed"}  # fmt: skip
    return {"seconds": seconds, "outputs": outputs}


def rows(root: Path) -> pa.Table:
    files = sorted((root / "data").rglob("*.parquet"))
    return pa.concat_tables(pq.read_table(f) for f in files).sort_by("index")


def episode_packets(root: Path) -> dict[str, list[list[tuple]]]:
    """Per camera, per episode: (payload, pts from the episode's start, keyframe) of each
    of its packets."""
    meta = read_meta(str(root))
    result = {}
    for key in meta.video_keys:
        result[key] = []
        tracks = {}
        for episode in range(meta.num_episodes):
            rel = meta.video_file(key, episode)
            if rel not in tracks:
                tracks = {rel: (read_track(root / rel), (root / rel).read_bytes())}
            track, data = tracks[rel]
            lo = round(meta.episodes[f"videos/{key}/from_timestamp"][episode] * track.timescale)
            hi = round(meta.episodes[f"videos/{key}/to_timestamp"][episode] * track.timescale)
            inside = np.flatnonzero((track.pts >= lo) & (track.pts < hi))
            result[key].append(
                [(bytes(data[track.offsets[i] : track.offsets[i] + track.sizes[i]]),
                  int(track.pts[i] - lo), bool(track.keyframes[i])) for i in inside]
            )  # fmt: skip
    return result


def stats_close(a: Path, b: Path) -> str | None:
    """None where every stat of ``a`` is within 1e-5 relative of ``b``'s; else the first."""
    x = json.loads((a / "meta/stats.json").read_text())
    y = json.loads((b / "meta/stats.json").read_text())
    for feature in sorted(set(x) | set(y)):
        if feature not in x or feature not in y:
            return f"{feature}: only in one"
        for stat in sorted(set(x[feature]) | set(y[feature])):
            if stat not in x[feature] or stat not in y[feature]:
                return f"{feature}/{stat}: only in one"
            u, v = np.asarray(x[feature][stat], float), np.asarray(y[feature][stat], float)
            if u.shape != v.shape or not np.allclose(u, v, rtol=1e-5, atol=1e-8):
                return f"{feature}/{stat}"
    return None


def compare(a: Path, b: Path) -> dict:
    """What of ``a`` equals ``b``'s (see the module docstring)."""
    info = [json.loads((r / "meta/info.json").read_text()) for r in (a, b)]
    totals = ("total_episodes", "total_frames", "total_tasks")
    tasks = [pq.read_table(r / "meta/tasks.parquet").to_pandas() for r in (a, b)]
    return {
        "rows": rows(a).equals(rows(b).select(rows(a).column_names).cast(rows(a).schema)),
        "episodes": read_episodes_table(read_meta(str(a)), EPISODE_COLUMNS).equals(
            read_episodes_table(read_meta(str(b)), EPISODE_COLUMNS)
        ),
        "tasks": tasks[0].equals(tasks[1]),
        "totals": all(info[0][k] == info[1][k] for k in totals),
        "stats_mismatch": stats_close(a, b),
    }


def frames_kept(output: Path, source: Path, kept: list[int]) -> int:
    """How many kept episodes have the same packets (so frames) as in ``source``."""
    got, want = episode_packets(output), episode_packets(source)
    return min(sum(got[key][i] == want[key][k] for i, k in enumerate(kept)) for key in want)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=REPO / "results/cr5/v3.0")
    parser.add_argument("--delete", type=int, nargs="+", default=[10, 40, 70])
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--work", type=Path, default=REPO / "results/edits_vs_lerobot")
    parser.add_argument("--lerobot-python", default=str(REPO / ".venv-lerobot/bin/python"))
    args = parser.parse_args()
    source = args.source.resolve()
    total = read_meta(str(source)).num_episodes
    kept = {"delete": [i for i in range(total) if i not in args.delete]}
    kept["train"] = list(range(int(total * 0.8)))
    kept["val"] = list(range(int(total * 0.8), total))
    kept["merge"] = kept["recompute"] = list(range(total))
    ours = robopipe_edits(source, args.delete, args.work / "robopipe", args.cores)
    theirs = lerobot_edits(args.lerobot_python, source, args.delete, args.work / "lerobot")
    result = {
        "source": str(source),
        "episodes": total,
        "deleted": args.delete,
        "load_average": os.getloadavg(),
        "robopipe_s": ours["seconds"],
        "lerobot_s": theirs["seconds"],
        "robopipe_vs_lerobot": {
            step: compare(ours["outputs"][step], theirs["outputs"][step]) for step in kept
        },
        "merge_vs_source": {"robopipe": compare(ours["outputs"]["merge"], source),
                            "lerobot": compare(theirs["outputs"]["merge"], source)},
        "episodes_with_source_frames": {
            tool: {step: frames_kept(out["outputs"][step], source, kept[step]) for step in kept}
            for tool, out in (("robopipe", ours), ("lerobot", theirs))
        },
    }  # fmt: skip
    text = json.dumps(result, indent=1)
    (args.work / "result.json").write_text(text)
    print(text)
    ok = all(
        c["rows"] and c["episodes"] and c["tasks"] and c["totals"] and not c["stats_mismatch"]
        for c in [*result["robopipe_vs_lerobot"].values(), *result["merge_vs_source"].values()]
    )
    ok = ok and all(
        n == len(kept[step])
        for step, n in result["episodes_with_source_frames"]["robopipe"].items()
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

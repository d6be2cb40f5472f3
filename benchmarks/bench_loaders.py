"""Dataloading figures on the real cr5 dataset (../shared/datasets/cr5_banana_plate_v21).

    python benchmarks/bench_loaders.py [--steady-s 20] [--workers 2] [--batch-size 32]
        [--repeats 3] [--copy jpeg90 ...] [--no-stream] [--work results/bench_loaders]
        [--lerobot-python .venv-lerobot/bin/python]

Converts the dataset once (robopipe, restamped timestamps, cached in ``<work>/cr5/v3.0``), makes
each ``--copy`` once (``<work>/cr5/copies/<encoding>``, fidelity on every 5th frame), then
``--repeats`` times, alternating: measures the decode ceiling (one core, in this process) and
runs each map-style scenario in its own process with ``python -m robopipe.bench.runner`` (as the
``bench_scenario`` rule does), uint8 images: robopipe and lerobot 0.6.1's LeRobotDataset (when
``--lerobot-python`` exists) on the converted AV1 and on each copy. It prints every run, then
medians:

- the ceiling per core (random access and sequential), frames/s and CPU ms per frame;
- each loader's samples/s and CPU ms per sample (process tree, steady window), robopipe's as a
  share of (random-access ceiling x workers), in samples/s and in CPU time (the ceiling's CPU
  ms per frame over the loader's CPU ms per sample: what it would reach on idle cores);
- each copy against LeRobotDataset on AV1, and LeRobotDataset on the copy against itself on AV1;
- unless ``--no-stream``: streaming 2 workers vs 1 worker samples/s, and its peak RSS.

On a shared machine wall-clock rates depend on the other load; the CPU milliseconds per
sample depend much less on it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / ".." / "shared" / "datasets" / "cr5_banana_plate_v21"
LEROBOT_PYTHON = REPO / ".venv-lerobot" / "bin" / "python"


def converted(work: Path) -> Path:
    out = work / "cr5" / "v3.0"
    if not (out / "meta" / "info.json").exists():
        from robopipe.conversion.serial import convert_dataset

        convert_dataset(SOURCE, out, name="cr5", restamp_timestamps=True)
    return out


def copied(root: Path, encoding: str) -> Path:
    folder = root.parent / "copies" / encoding
    if not (folder / "v3.0" / "meta" / "info.json").exists():
        from robopipe.copies.make import make_copy

        make_copy(root, folder / "v3.0", folder / "copy.json", encoding, fidelity_stride=5)
    return folder / "v3.0"


def run(work: Path, root: Path, scenario: str, settings: dict, rep: int) -> dict:
    out = work / "results" / f"{scenario}_r{rep}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable, "-m", "robopipe.bench.runner", "--dataset", "cr5", "--root", str(root),
        "--scenario", scenario, "--settings", json.dumps(settings),
        "--json", str(out), "--csv", str(out.with_suffix(".csv")),
    ]  # fmt: skip
    subprocess.run(command, check=True)
    result = json.loads(out.read_text())
    print(f"  r{rep} {scenario}: {result['samples_per_s']:.1f} samples/s, "
          f"{1000 * result['cpu_s_per_sample']:.2f} CPU ms/sample, "
          f"peak RSS {result['peak_rss_mb']:.0f} MB", flush=True)  # fmt: skip
    return result


def median(results: list[dict], key: str, scale: float = 1.0) -> float:
    return statistics.median(scale * r[key] for r in results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steady-s", type=float, default=20.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--copy", action="append", default=[], help="an encoding, repeatable")
    parser.add_argument("--no-stream", action="store_true", help="skip the streaming loader")
    parser.add_argument("--work", type=Path, default=REPO / "results" / "bench_loaders")
    parser.add_argument("--lerobot-python", type=Path, default=LEROBOT_PYTHON)
    args = parser.parse_args()
    if not SOURCE.is_dir() and not (args.work / "cr5" / "v3.0").is_dir():
        sys.exit(f"skipped: {SOURCE} is missing")
    from robopipe.bench.ceiling import measure_ceiling

    root = converted(args.work)
    roots = {None: root, **{e: copied(root, e) for e in args.copy}}
    settings = {
        "batch_size": args.batch_size,
        "image_dtype": "uint8",
        "steady_s": args.steady_s,
        "warmup_batches": 5,
        "probe_samples": 100,
        "lerobot_python": str(args.lerobot_python),
    }
    w = args.workers
    loaders = ["robopipe_map"] + (["lerobot_map"] if args.lerobot_python.exists() else [])
    runs, ceilings = defaultdict(list), defaultdict(list)
    for rep in range(args.repeats):
        for encoding, path in roots.items():
            ceilings[encoding].append(measure_ceiling(str(path), "cr5", frames=300))
            copy = f"_e{encoding}" if encoding else ""
            for loader in loaders:
                scenario = f"{loader}_local_single{copy}_cpu_w{w}_n1"
                runs[loader, encoding].append(run(args.work, path, scenario, settings, rep))
    print(f"medians of {args.repeats} run(s), {w} workers, batch {args.batch_size}, uint8:")
    for encoding in roots:
        name = encoding or "converted AV1"
        c = ceilings[encoding]
        rand_fps = median(c, "random_frames_per_s_per_core")
        rand_ms = median(c, "random_cpu_ms_per_frame")
        print(f"{name}: ceiling per core: random {rand_fps:.0f} frames/s ({rand_ms:.2f} CPU ms), "
              f"sequential {median(c, 'sequential_frames_per_s_per_core'):.0f} frames/s "
              f"({median(c, 'sequential_cpu_ms_per_frame'):.2f} CPU ms)")  # fmt: skip
        for loader in loaders:
            r = runs[loader, encoding]
            sps, cpu = median(r, "samples_per_s"), median(r, "cpu_s_per_sample", 1000)
            line = f"  {loader}: {sps:.1f} samples/s, {cpu:.2f} CPU ms/sample"
            if loader == "robopipe_map":
                line += (f" = {sps / (rand_fps * w):.0%} of random ceiling x {w} "
                         f"({rand_ms / cpu:.0%} in CPU time)")  # fmt: skip
            if encoding and ("lerobot_map", None) in runs:
                base = runs["lerobot_map", None]
                line += (f"; vs lerobot_map on AV1: {sps / median(base, 'samples_per_s'):.2f}x "
                         f"samples/s, {median(base, 'cpu_s_per_sample', 1000) / cpu:.2f}x "
                         f"less CPU")  # fmt: skip
            print(f"{line}, peak RSS {max(x['peak_rss_mb'] for x in r):.0f} MB")
    if not args.no_stream:
        one = run(args.work, root, "robopipe_stream_local_single_cpu_w1_n1", settings, 0)
        two = run(args.work, root, f"robopipe_stream_local_single_cpu_w{w}_n1", settings, 0)
        print(f"robopipe_stream: w1 {one['samples_per_s']:.1f}, w{w} {two['samples_per_s']:.1f} "
              f"samples/s ({two['samples_per_s'] / one['samples_per_s']:.2f}x), peak RSS "
              f"{max(one['peak_rss_mb'], two['peak_rss_mb']):.0f} MB, "
              f"{1000 * two['cpu_s_per_sample']:.2f} CPU ms/sample (w{w})")  # fmt: skip


if __name__ == "__main__":
    main()

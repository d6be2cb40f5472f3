"""Dataloading figures on the real cr5 dataset (../shared/datasets/cr5_banana_plate_v21).

    python tools/bench_loaders.py [--steady-s 20] [--workers 2] [--batch-size 32]

Converts the dataset once (robopipe, restamped timestamps, cached in results/bench_loaders/),
measures its decode ceiling, then runs each scenario in its own process with
``python -m robopipe.bench.runner`` (as the ``bench_scenario`` rule does), uint8 images, and
prints:

- map-style: robopipe vs lerobot 0.6.1 LeRobotDataset samples/s (when .venv-lerobot exists;
  goal >= 2x), and vs 70% of the random-access ceiling x workers; and whether 2x lerobot is
  within that ceiling x workers at all (every sample decodes one random frame per camera);
- streaming: 2 workers vs 1 worker samples/s (goal >= 1.7x), and its peak RSS (goal < 2 GB).

On a shared machine wall-clock rates depend on the other load; the CPU milliseconds per
sample (process tree, steady window) printed next to them depend much less on it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / ".." / "shared" / "datasets" / "cr5_banana_plate_v21"
WORK = REPO / "results" / "bench_loaders"
LEROBOT_PYTHON = REPO / ".venv-lerobot" / "bin" / "python"


def converted() -> Path:
    out = WORK / "cr5" / "v3.0"
    if not (out / "meta" / "info.json").exists():
        from robopipe.conversion.serial import convert_dataset

        convert_dataset(SOURCE, out, name="cr5", restamp_timestamps=True)
    return out


def run(root: Path, scenario: str, settings: dict) -> dict:
    out = WORK / "results" / f"{scenario}.json"
    command = [
        sys.executable, "-m", "robopipe.bench.runner", "--dataset", "cr5", "--root", str(root),
        "--scenario", scenario, "--settings", json.dumps(settings),
        "--json", str(out), "--csv", str(out.with_suffix(".csv")),
    ]  # fmt: skip
    subprocess.run(command, check=True)
    return json.loads(out.read_text())


def cpu_ms(result: dict) -> str:
    """CPU milliseconds per sample (process tree): comparable on a shared machine."""
    value = result.get("cpu_s_per_sample")
    return "?" if value is None else f"{1000 * value:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steady-s", type=float, default=20.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()
    if not SOURCE.is_dir():
        sys.exit(f"skipped: {SOURCE} is missing")
    root = converted()
    from robopipe.bench.ceiling import measure_ceiling

    ceiling = measure_ceiling(str(root), "cr5", frames=300)
    settings = {
        "batch_size": args.batch_size,
        "image_dtype": "uint8",
        "steady_s": args.steady_s,
        "warmup_batches": 5,
        "probe_samples": 100,
        "lerobot_python": str(LEROBOT_PYTHON),
    }
    w = args.workers
    ours = run(root, f"robopipe_map_local_single_cpu_w{w}_n1", settings)
    random_ceiling = ceiling["random_frames_per_s_per_core"]
    seq_ceiling = ceiling["sequential_frames_per_s_per_core"]
    print(f"ceiling (frames/s per core): sequential {seq_ceiling:.0f}"
          f", random {random_ceiling:.0f}")  # fmt: skip
    print(f"robopipe_map w{w}: {ours['samples_per_s']:.1f} samples/s "
          f"({ours['samples_per_s'] / (0.7 * random_ceiling * w):.2f} x 70% of ceiling x {w})"
          f", p50/p99 {ours['latency_ms']['p50']:.1f}/{ours['latency_ms']['p99']:.1f} ms"
          f", {cpu_ms(ours)} CPU ms/sample, peak RSS {ours['peak_rss_mb']:.0f} MB")  # fmt: skip
    if LEROBOT_PYTHON.exists():
        theirs = run(root, f"lerobot_map_local_single_cpu_w{w}_n1", settings)
        print(f"lerobot_map w{w}: {theirs['samples_per_s']:.1f} samples/s; robopipe / lerobot = "
              f"{ours['samples_per_s'] / theirs['samples_per_s']:.2f}x"
              f"; lerobot {cpu_ms(theirs)} CPU ms/sample"
              f", peak RSS {theirs['peak_rss_mb']:.0f} MB")  # fmt: skip
        # Every sample decodes at least one random frame per camera, so on w cores no loader
        # goes much past the random-access ceiling x w: 2x is reachable only where lerobot
        # stays under half of that.
        per_sample = ours["frames_per_s"] / ours["samples_per_s"]
        bound = random_ceiling * w / per_sample
        verdict = "within" if 2 * theirs["samples_per_s"] <= bound else "above"
        print(f"2x lerobot = {2 * theirs['samples_per_s']:.0f} samples/s, {verdict} the "
              f"random-access ceiling x {w} / {per_sample:.0f} frame(s) per sample = "
              f"{bound:.0f} samples/s")  # fmt: skip
    else:
        print("lerobot_map: skipped (no .venv-lerobot; see tools/lerobot_env.sh)")
    one = run(root, "robopipe_stream_local_single_cpu_w1_n1", settings)
    two = run(root, f"robopipe_stream_local_single_cpu_w{w}_n1", settings)
    print(f"robopipe_stream: w1 {one['samples_per_s']:.1f}, w{w} {two['samples_per_s']:.1f} "
          f"samples/s ({two['samples_per_s'] / one['samples_per_s']:.2f}x), peak RSS "
          f"{max(one['peak_rss_mb'], two['peak_rss_mb']):.0f} MB, {cpu_ms(two)} CPU ms/sample"
          f" (w{w}), first batch "
          f"{two['first_batch_latency_s']:.2f} s")  # fmt: skip


if __name__ == "__main__":
    main()

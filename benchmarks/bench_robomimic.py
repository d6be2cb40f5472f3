"""robopipe's SequenceDataset vs robomimic 0.3.0's, side by side in one run.

    python benchmarks/bench_robomimic.py
        [--hdf5 ../shared/datasets/robomimic_lift_low_dim/low_dim.hdf5]
        [--batch-size 64] [--seq-length 10] [--workers 0 2] [--rounds 3] [--batches 40]
        [--ram-seq-length 50] [--no-ram]

Throughput: for each cache mode and worker count, both datasets are built once (robomimic's
arguments: every observation key, actions/rewards/dones, next_obs when the file has it), their
first batch checked equal, then rounds alternate between them (robomimic first, then robopipe,
``--rounds`` times); a round reads ``--batches`` batches from a DataLoader (shuffled epochs,
persistent workers) that has already given 3 warm-up batches. Prints median samples/s, the
ratio robopipe / robomimic, and the ratio of CPU seconds per sample (process tree: main
process and workers, ``robopipe.bench.measure.tree_cpu_s``) robomimic / robopipe, which other
load on the machine disturbs less than wall-clock rates (but idle waiting does not count).

RAM (the paper's cache-mode comparison): peak RSS (MiB, process tree,
``robopipe.bench.rss``) and samples/s of a process that builds a dataset at
``--ram-seq-length`` on a generated image file (20 demos, two 84x84 cameras, next_obs) and
reads 100 items (batch size 1), for robomimic's and robopipe's three cache modes and the
paper's LRU (256 MiB) and compressed caches and its robo archive (streamed, shuffle buffer of
1000 items), and of one that builds none (the baseline: this
process and an interpreter with torch).

On a shared machine wall-clock rates depend on the other load; alternating rounds spread it
over both loaders, and the ratio is steadier than either rate.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
LIFT = REPO / ".." / "shared" / "datasets" / "robomimic_lift_low_dim" / "low_dim.hdf5"
MODES = ("none", "low_dim", "all")
RAM_LOADERS = (
    "baseline",
    *(f"{kind}_seq_{mode}" for kind in ("robomimic", "robopipe") for mode in MODES),
    "robopipe_seq_lru",
    "robopipe_seq_compressed",
    "robopipe_seq_tar",
)


def endless(dataset, batch_size: int, workers: int):
    """Batches of one DataLoader (persistent workers) over shuffled epochs, without end."""
    from robopipe.bench.sequence_loaders import batches

    make_loader = batches(dataset, batch_size=batch_size, workers=workers, seed=0, image_keys=[])
    while True:
        yield from make_loader()


def samples_per_s(batches, count: int) -> tuple[float, float]:
    """(samples per second, CPU seconds of the process tree per sample) over the next
    ``count`` batches."""
    from robopipe.bench.measure import tree_cpu_s

    start, cpu, samples = time.perf_counter(), tree_cpu_s(), 0
    for _, batch in zip(range(count), batches, strict=False):
        samples += len(batch["index"])
    return samples / (time.perf_counter() - start), (tree_cpu_s() - cpu) / samples


def throughput(args) -> None:
    import torch

    from robopipe.bench.sequence_loaders import open_sequence_dataset

    print(f"file {args.hdf5}, batch {args.batch_size}, seq_length {args.seq_length}")
    print("mode      workers  robomimic samples/s  robopipe samples/s  ratio  CPU-time ratio")
    for mode in MODES:
        theirs = open_sequence_dataset(f"robomimic_seq_{mode}", args.hdf5, args.seq_length)
        ours = open_sequence_dataset(f"robopipe_seq_{mode}", args.hdf5, args.seq_length)
        first = [next(iter(torch.utils.data.DataLoader(d, batch_size=8))) for d in (theirs, ours)]
        assert len(theirs) == len(ours) and _equal(*first), f"{mode}: items differ"
        for workers in args.workers:
            loaders = {
                "robomimic": endless(theirs, args.batch_size, workers),
                "robopipe": endless(ours, args.batch_size, workers),
            }
            rates = {"robomimic": [], "robopipe": []}
            cpu = {"robomimic": [], "robopipe": []}
            for batches in loaders.values():
                samples_per_s(batches, 3)  # warm-up: workers started
            for _ in range(args.rounds):
                for name, batches in loaders.items():
                    rate, cpu_s = samples_per_s(batches, args.batches)
                    rates[name].append(rate)
                    cpu[name].append(cpu_s)
            del loaders
            a, b = (statistics.median(rates[k]) for k in ("robomimic", "robopipe"))
            theirs_cpu, ours_cpu = (statistics.median(cpu[k]) for k in ("robomimic", "robopipe"))
            c = theirs_cpu / ours_cpu if ours_cpu else float("nan")  # under one 10 ms tick
            print(f"{mode:<9} {workers:>7}  {a:>19.0f}  {b:>18.0f}  {b / a:5.2f}  {c:14.2f}",
                  flush=True)  # fmt: skip
        del theirs, ours


def _equal(a, b) -> bool:
    if isinstance(a, dict):
        return list(a) == list(b) and all(_equal(a[k], b[k]) for k in a)
    return a.dtype == b.dtype and bool((a == b).all())


def ram_child(loader: str, hdf5: str, robo: str, seq_length: int) -> None:
    """Build the loader's dataset (or nothing for ``baseline``), read 100 items through a
    DataLoader, batch size 1; print the items' samples/s as JSON."""
    import torch

    from robopipe.bench.sequence_loaders import open_sequence_dataset

    rate = None
    if loader != "baseline":
        dataset = open_sequence_dataset(loader, hdf5, seq_length, robo=robo)
        stream = isinstance(dataset, torch.utils.data.IterableDataset)  # shuffles itself
        batches = iter(torch.utils.data.DataLoader(dataset, batch_size=1, shuffle=not stream))
        next(batches)
        start = time.perf_counter()
        for _, _batch in zip(range(100), batches, strict=False):
            pass
        rate = 100 / (time.perf_counter() - start)
    print(json.dumps({"samples_per_s": rate}))


def ram(args) -> None:
    from robopipe.bench.rss import PeakRss
    from robopipe.robomimic.generate import generate_robomimic
    from robopipe.robomimic.robo import write_robo

    with tempfile.TemporaryDirectory() as tmp:
        hdf5 = generate_robomimic(Path(tmp) / "gen.hdf5", demos=20, next_obs=True)
        robo = write_robo(hdf5, Path(tmp) / "robo.tar")
        size = hdf5.stat().st_size / 2**20
        print(f"\nseq_length {args.ram_seq_length}, batch size 1, generated file {size:.0f} MiB")
        print("loader                   peak RSS MiB  over baseline  samples/s")
        for loader in RAM_LOADERS:
            command = [sys.executable, __file__, "--ram-child", loader, str(hdf5), str(robo),
                       str(args.ram_seq_length)]  # fmt: skip
            with PeakRss() as rss:
                out = subprocess.run(command, check=True, capture_output=True, text=True)
            rate = json.loads(out.stdout.strip().splitlines()[-1])["samples_per_s"]
            if loader == "baseline":
                baseline = rss.peak_mb
            extra = rss.peak_mb - baseline
            rate = "" if rate is None else f"{rate:9.0f}"
            print(f"{loader:<24} {rss.peak_mb:12.0f}  {extra:13.0f}  {rate}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hdf5", type=Path, default=LIFT)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seq-length", type=int, default=10)
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 2])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--ram-seq-length", type=int, default=50)
    parser.add_argument("--no-ram", action="store_true", help="throughput only")
    parser.add_argument("--ram-child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ram_child:
        loader, hdf5, robo, seq_length = args.ram_child
        ram_child(loader, hdf5, robo, int(seq_length))
        return
    if not args.hdf5.is_file():
        sys.exit(f"skipped: {args.hdf5} is missing")
    np.seterr(all="ignore")
    throughput(args)
    if not args.no_ram:
        ram(args)
    print(json.dumps({"note": "shared machine: rates are noisy; compare ratios"}))


if __name__ == "__main__":
    main()

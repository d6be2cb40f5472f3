"""Kill each loader at a random batch of an epoch and resume it: do the batches equal the
uninterrupted epoch's?

For each loader (``map``: ``MapDataset`` with an ``EpochSampler``; ``stream``:
``StreamingDataset`` with its own batches) and each source (``local``: the folder; ``remote``:
the folder served by nginx on 127.0.0.1, optionally behind the delaying proxy), runs one whole
epoch, then ``--kills`` times: a run SIGKILLed (its whole process group, DataLoader workers
included) after a random number of batches, and a new process that loads its saved
``state_dict()`` and finishes the epoch (``robopipe.harness.resume``). The two runs' batches
(each batch's frame indices and the SHA-256 of every value) must equal the whole epoch's.
Prints one line per kill and writes them as JSON to ``--out``; exits 1 if any differ.

Usage::

    python benchmarks/resume_check.py --root ../shared/datasets/cr5_20ep_v30_lerobot \\
        --out results/resume/cr5.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from robopipe.bench.latency import delaying_proxy
from robopipe.bench.servers import serve_http
from robopipe.harness.resume import RunSpec, kill_and_resume, uninterrupted


@contextlib.contextmanager
def _remote(root: Path, latency_ms: float):
    """The URL of ``root`` served by nginx (behind the delaying proxy if ``latency_ms``)."""
    with serve_http(root.parent) as base:
        if not latency_ms:
            yield f"{base}/{root.name}"
            return
        with delaying_proxy(base, latency_ms) as proxy:
            yield f"{proxy.url}/{root.name}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, required=True, help="a v3.0 dataset folder")
    parser.add_argument("--out", type=Path, required=True, help="JSON of the results")
    parser.add_argument("--loaders", nargs="+", default=["map", "stream"])
    parser.add_argument("--sources", nargs="+", default=["local", "remote"])
    parser.add_argument("--kills", type=int, default=3, help="kills per loader and source")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0, help="the loaders' seed")
    parser.add_argument("--epoch", type=int, default=1)
    parser.add_argument("--latency-ms", type=float, default=0.0, help="remote: one-way delay")
    parser.add_argument("--timeout-s", type=float, default=1800.0, help="per process")
    args = parser.parse_args()
    root = args.root.resolve()
    draw = random.Random()  # the kill points: random, printed
    rows, scratch = [], Path(tempfile.mkdtemp(prefix="robopipe-resume-"))
    try:
        for source in args.sources:
            with contextlib.ExitStack() as stack:
                url = str(root)
                if source == "remote":
                    url = stack.enter_context(_remote(root, args.latency_ms))
                for loader in args.loaders:
                    spec = RunSpec(
                        loader,
                        url,
                        workers=args.workers,
                        batch_size=args.batch_size,
                        seed=args.seed,
                        epoch=args.epoch,
                    )
                    start = time.perf_counter()
                    full = uninterrupted(spec, scratch / f"{source}-{loader}-full", args.timeout_s)
                    epoch_s = time.perf_counter() - start
                    for k in range(args.kills):
                        kill_after = draw.randrange(1, len(full))
                        folder = scratch / f"{source}-{loader}-kill{k}"
                        batches, killed_at = kill_and_resume(
                            spec, folder, kill_after, args.timeout_s
                        )
                        row = {
                            "loader": loader,
                            "source": source,
                            "batches": len(full),
                            "killed_after": killed_at,
                            "equal": batches == full,
                            "epoch_s": round(epoch_s, 1),
                        }
                        rows.append(row)
                        print(json.dumps(row), flush=True)
                        shutil.rmtree(folder)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    settings = {k: v for k, v in vars(args).items() if k not in ("out", "root")}
    args.out.write_text(json.dumps({"root": str(root), **settings, "results": rows}, indent=1))
    return 0 if rows and all(row["equal"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

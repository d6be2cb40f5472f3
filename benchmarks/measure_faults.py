"""robopipe's loaders through network faults: one full epoch of cr5 from nginx, with and
without faults, every item checked against the local item of the same index.

    python benchmarks/measure_faults.py [--dataset ../shared/datasets/cr5_20ep_v30_lerobot]
        [--latency-ms 20] [--fault-rate 0.02] [--pairs 3] [--workers 2] [--batch-size 32]
        [--read-timeout-s 30] [--out results/faults.json]

nginx serves the dataset's folder; a delaying proxy (robopipe.bench.latency) adds the round
trip and, in the faulted runs, faults ``--fault-rate`` of the requests, all five kinds mixed.
For each pair, alternating which goes first, each loader (robopipe_map: MapDataset in order,
robopipe_stream: StreamingDataset shuffled) reads one epoch fault-free and one faulted, in a
DataLoader of ``--workers`` workers and batches of ``--batch-size``, with robopipe's default
retry budget (``--read-timeout-s`` changes its read timeout; a stall lasts twice it, so with
the default 30 s it is abandoned by the first-byte timeout or a hedge). Samples/s is the epoch's
samples over its wall time (workers' start included). Each item (every tensor's bytes, dtype
and shape) is hashed and compared with the local MapDataset's item of the same ``index``. It
prints every run, then per loader the medians and the faulted/fault-free ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np
import torch
import xxhash
from torch.utils.data import DataLoader

from robopipe.bench.latency import Faults, delaying_proxy
from robopipe.bench.servers import serve_nginx
from robopipe.loading import MapDataset, StreamingDataset, collate
from robopipe.retry import DEFAULT_BUDGET, RetryBudget, retry_log

REPO = Path(__file__).resolve().parents[1]
DATASET = REPO / ".." / "shared" / "datasets" / "cr5_20ep_v30_lerobot"


def item_hashes(batch: dict) -> dict[int, str]:
    """index -> a hash of the item's tensors (keys, dtypes, shapes, bytes)."""
    keys = sorted(k for k, v in batch.items() if isinstance(v, torch.Tensor))
    out = {}
    for i, index in enumerate(batch["index"].tolist()):
        h = xxhash.xxh3_64()
        for key in keys:
            value = batch[key][i].contiguous()
            h.update(f"{key}{value.dtype}{tuple(value.shape)}".encode())
            h.update(value.numpy().tobytes() if value.dtype != torch.bfloat16 else b"")
        for key in sorted(k for k, v in batch.items() if isinstance(v, list)):
            h.update(f"{key}{batch[key][i]}".encode())
        out[int(index)] = h.hexdigest()
    return out


def epoch(loader_name: str, url: str, args, budget: RetryBudget) -> tuple[float, dict]:
    """(seconds, index -> hash) of one epoch of ``loader_name`` reading ``url``."""
    common = dict(storage_options=None, retry_budget=budget, batch_buffers=4)
    if loader_name == "robopipe_map":
        ds = MapDataset(url, **common)
        loader = DataLoader(
            ds, batch_size=args.batch_size, num_workers=args.workers, collate_fn=collate
        )
    else:
        ds = StreamingDataset(url, batch_size=args.batch_size, seed=0, **common)
        loader = DataLoader(ds, batch_size=None, num_workers=args.workers, collate_fn=collate)
    hashes: dict[int, str] = {}
    start = time.perf_counter()
    for batch in loader:
        hashes.update(item_hashes(batch))
    return time.perf_counter() - start, hashes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--fault-rate", type=float, default=0.02)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--read-timeout-s", type=float, default=DEFAULT_BUDGET.read_timeout_s)
    parser.add_argument("--loaders", nargs="+", default=["robopipe_map", "robopipe_stream"])
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    root = args.dataset.resolve()
    budget = RetryBudget(read_timeout_s=args.read_timeout_s)
    local_s, local = epoch("robopipe_map", str(root), args, budget)
    print(f"local reference: {len(local)} items in {local_s:.1f} s", flush=True)
    runs = []
    with serve_nginx(root.parent) as server:
        for pair in range(args.pairs):
            for loader_name in args.loaders:
                rates = (0.0, args.fault_rate) if pair % 2 == 0 else (args.fault_rate, 0.0)
                for rate in rates:
                    faults = Faults(rate, stall_s=2 * args.read_timeout_s, seed=pair)
                    with (
                        delaying_proxy(server.url, args.latency_ms, faults) as proxy,
                        retry_log() as retries,
                    ):
                        url = f"{proxy.url}/{root.name}"
                        seconds, hashes = epoch(loader_name, url, args, budget)
                        totals, retried = proxy.totals(), retries.count()
                    run = {
                        "pair": pair,
                        "loader": loader_name,
                        "fault_rate": rate,
                        "seconds": seconds,
                        "samples": len(hashes),
                        "samples_per_s": len(hashes) / seconds,
                        "equal_to_local": hashes == local,
                        "requests": totals["requests"],
                        "faults": {k[7:]: v for k, v in totals.items() if k.startswith("faults_")},
                        "retries": retried,
                        "load_1min": os.getloadavg()[0],
                    }
                    runs.append(run)
                    print(json.dumps(run), flush=True)
    summary = {}
    for loader_name in args.loaders:
        mine = [r for r in runs if r["loader"] == loader_name]
        clean = statistics.median(r["samples_per_s"] for r in mine if not r["fault_rate"])
        faulted = statistics.median(r["samples_per_s"] for r in mine if r["fault_rate"])
        summary[loader_name] = {
            "fault_free_samples_per_s": clean,
            "faulted_samples_per_s": faulted,
            "ratio": faulted / clean,
            "all_equal_to_local": all(r["equal_to_local"] for r in mine),
            "faults_injected": int(np.sum([sum(r["faults"].values()) for r in mine])),
            "retries": sum(r["retries"] for r in mine),
        }
    print(json.dumps(summary, indent=1))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"runs": runs, "summary": summary}, indent=1))


if __name__ == "__main__":
    main()

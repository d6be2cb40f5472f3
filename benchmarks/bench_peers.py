"""robopipe against its peers on the real cr5 dataset, locally and at an injected round trip.

    python benchmarks/bench_peers.py [--steady-s 20] [--workers 2] [--batch-size 32]
        [--latency-ms 20] [--work results/bench_peers] [--only SUBSTRING ...]

Converts cr5 once (``<work>/cr5/v3.0``, restamped), makes its ``lance`` copy once (in the peer
environment, ``.venv-lerobot``), then runs each scenario in this process through
:func:`robopipe.bench.runner.run_scenario`, single frames, uint8, shuffled, one after another:

- local: robopipe_map, robopipe_stream, lerobot_map (LeRobotDataset), lerobot_stream
  (StreamingLeRobotDataset), lancedb_map (LanceDBDataset on the lance copy);
- at ``--latency-ms`` through the delaying proxy: robopipe_map and robopipe_stream over http
  (nginx) and s3 (moto), lancedb_map over s3 (moto), and robopipe_stream and lerobot_stream
  over hf (the Hub stand-in of robopipe.harness.hub_standin, run as a child process whose CPU the
  loaders' CPU ms per sample leave out, as nginx's and moto's).

Each result JSON goes to ``<work>/results``; it prints one row per scenario (samples/s, CPU ms
per sample, whether the peer's items equalled robopipe's) and the markdown table of
docs/benchmarks.md. Needs the test extras (moto) and the peer environment.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / ".." / "shared" / "datasets" / "cr5_banana_plate_v21"
PEER_PYTHON = REPO / ".venv-lerobot" / "bin" / "python"
LOCAL = [
    "robopipe_map_local",
    "robopipe_stream_local",
    "lerobot_map_local",
    "lerobot_stream_local",
    "lancedb_map_local",
]
REMOTE = [
    "robopipe_map_http",
    "robopipe_stream_http",
    "robopipe_map_s3",
    "robopipe_stream_s3",
    "lancedb_map_s3",
    "robopipe_map_hf",
    "robopipe_stream_hf",
    "lerobot_stream_hf",
]


def prepared(work: Path, lance_needed: bool = True) -> tuple[Path, Path]:
    """(the converted cr5, its lance copy), made once; the copy only if ``lance_needed``."""
    from robopipe.conversion.serial import convert_dataset
    from robopipe.copies.lance import make_lance_copy

    root = work / "cr5" / "v3.0"
    if not (root / "meta" / "info.json").exists():
        convert_dataset(SOURCE, root, name="cr5", restamp_timestamps=True)
    lance = root.parent / "copies" / "lance"
    if lance_needed and not (lance / "copy.json").exists():
        make_lance_copy(root, lance / "v3.0", lance / "copy.json", str(PEER_PYTHON))
    return root, lance / "v3.0"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steady-s", type=float, default=20.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--work", type=Path, default=REPO / "results" / "bench_peers")
    parser.add_argument("--only", nargs="*", default=[], help="run scenarios containing these")
    args = parser.parse_args()
    from robopipe.bench.runner import Settings, run_scenario
    from robopipe.harness.hub_standin import serve_hub_process

    chosen = [p for p in LOCAL + REMOTE if not args.only or any(s in p for s in args.only)]
    root, lance = prepared(args.work, any(p.startswith("lancedb") for p in chosen))
    out = args.work / "results"
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    with contextlib.ExitStack() as stack:
        hub = stack.enter_context(serve_hub_process({"local/cr5": {"v3.0": root, "main": root}}))
        for prefix in chosen:
            remote = prefix in REMOTE
            encoding = "_elance" if prefix.startswith("lancedb") else ""
            scenario = f"{prefix}_single{encoding}_cpu_w{args.workers}_n1"
            settings = Settings(
                batch_size=args.batch_size,
                steady_s=args.steady_s,
                lerobot_python=str(PEER_PYTHON),
                latency_ms=args.latency_ms if remote else 0.0,
                sources={"hf": hub.url("local/cr5", "v3.0")},
                storage_options={"hf": {"endpoint": hub.endpoint}},
            )
            result = run_scenario("cr5", lance if encoding else root, scenario, settings)
            (out / f"{scenario}.json").write_text(json.dumps(result, indent=2))
            check = result.get("peer_check") or {}
            rows.append((scenario, result, check.get("equal")))
            cpu = result["cpu_s_per_sample"]
            print(
                f"{scenario}: {result['samples_per_s']:,.1f} samples/s, "
                f"{cpu * 1000 if cpu else float('nan'):,.2f} CPU ms/sample, "
                f"{result.get('peer_version') or 'robopipe'}, items equal: {check.get('equal')}",
                flush=True,
            )
    print("\n| scenario | loader | samples/s | CPU ms/sample | items equal to robopipe's |")
    print("|---|---|---:|---:|---|")
    for scenario, result, equal in rows:
        cpu = result["cpu_s_per_sample"]
        print(
            f"| `{scenario}` | {result.get('peer_version') or 'robopipe'} | "
            f"{result['samples_per_s']:,.0f} | {cpu * 1000 if cpu else float('nan'):,.1f} | "
            f"{'-' if equal is None else ('yes' if equal else 'NO')} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

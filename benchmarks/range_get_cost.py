"""Wall and CPU milliseconds of one ranged GET from the benchmark's servers: moto (s3) and nginx.

Serves a converted dataset from moto's S3 server and from nginx (``robopipe.bench.servers``,
both child processes on 127.0.0.1, no delaying proxy) and reads ``--count`` random ranges of
``--bytes`` bytes (about a GOP of cr5) from its first video file, one after another and then
in one concurrent ``fs.cat_ranges`` call. Prints per request: wall ms, the CPU ms of this
process (the client: s3fs/botocore or fsspec's HTTP) and of the server's process tree.

Usage::

    python benchmarks/range_get_cost.py --root results/cr5/v3.0
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

import fsspec
import numpy as np

from robopipe.bench.measure import SERVER_PIDS, tree_cpu_s
from robopipe.bench.servers import serve_nginx, serve_s3


def _cost(fs, path: str, size: int, count: int, nbytes: int, label: str) -> None:
    starts = np.random.default_rng(0).integers(0, max(1, size - nbytes), count).tolist()
    server = next(iter(SERVER_PIDS))
    fs.cat_file(path, start=0, end=100)  # connection and credentials
    for mode in ("one after another", "cat_ranges"):
        client, served, wall = tree_cpu_s(), tree_cpu_s(server), time.perf_counter()
        if mode == "cat_ranges":
            fs.cat_ranges([path] * count, starts, [s + nbytes for s in starts])
        else:
            for s in starts:
                fs.cat_file(path, start=s, end=s + nbytes)
        wall = (time.perf_counter() - wall) / count * 1e3
        client = (tree_cpu_s() - client) / count * 1e3
        served = (tree_cpu_s(server) - served) / count * 1e3
        print(
            f"{label:6} {mode:17}: {wall:6.1f} ms wall, {client:5.1f} client CPU ms, "
            f"{served:5.1f} server CPU ms per request"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, required=True, help="a converted v3.0 dataset")
    parser.add_argument("--count", type=int, default=32, help="ranges read in each mode")
    parser.add_argument("--bytes", type=int, default=18_000, help="bytes per range")
    args = parser.parse_args()
    logging.disable(logging.INFO)
    video = min(p for p in args.root.rglob("*.mp4"))
    relative = video.relative_to(args.root).as_posix()
    size = video.stat().st_size
    print(f"{relative}: {size / 1e6:.0f} MB, {args.count} ranges of {args.bytes} bytes")
    with serve_s3(args.root) as (url, options):
        fs = fsspec.filesystem("s3", **options, skip_instance_cache=True)
        _cost(fs, f"{url[len('s3://') :]}/{relative}", size, args.count, args.bytes, "moto")
    with serve_nginx(args.root.parent) as server:
        fs = fsspec.filesystem("http", skip_instance_cache=True)
        url = f"{server.url}/{args.root.name}/{relative}"
        _cost(fs, url, size, args.count, args.bytes, "nginx")


if __name__ == "__main__":
    main()

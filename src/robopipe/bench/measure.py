"""Throughput and latency measurement of a data loader (standard library only).

This module imports nothing outside the standard library so that the lerobot driver
(``lerobot_driver.py``), run by another Python interpreter, measures lerobot's loaders with
exactly the same code as robopipe's.

Throughput is wall-clock over a steady window that starts after ``warmup_batches`` batches
(summing inter-batch gaps would overstate throughput under prefetch), as upstream's streaming
benchmark does (see ../shared/reference/anchors.md, "Dataloading").
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable, Iterable, Iterator

import numpy as np

# how long a rank waits at the start barrier for the others (a rank that fails before it
# ends the others anyway: srun --kill-on-bad-exit, or robopipe.ranks.run_ranks)
BARRIER_TIMEOUT_S = 600.0
BARRIER_POLL_S = 0.01

# pids of the servers a benchmark runs as its children (``robopipe.bench.servers`` adds
# them): left out of the loader's CPU seconds (tree_cpu_s)
SERVER_PIDS: set[int] = set()


class ZeroSamplesError(RuntimeError):
    """The loader yielded no sample at all: a benchmark of it is meaningless."""


def batch_frames(batch: dict, video_keys: list[str]) -> int:
    """Decoded frames in a batch: for each camera, the product of the dims before (C, H, W)."""
    return sum(math.prod(batch[key].shape[:-3]) for key in video_keys if key in batch)


def tree_cpu_s(pid: int | None = None) -> float | None:
    """User + system CPU seconds of a process and all its descendants (Linux ``/proc``),
    except the benchmark's own servers (:data:`SERVER_PIDS`: nginx, moto) and their
    descendants, whose work a remote server would do.

    On a shared machine, CPU seconds per sample compare loaders better than wall-clock
    rates. None where ``/proc`` is unavailable.
    """
    pid = os.getpid() if pid is None else pid
    tick = os.sysconf("SC_CLK_TCK")
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            tasks = os.listdir(f"/proc/{p}/task")
        except (OSError, ValueError):
            if p == pid:
                return None
            continue  # a descendant that exited meanwhile
        total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
        for task in tasks:
            try:
                with open(f"/proc/{p}/task/{task}/children") as f:
                    children = [int(c) for c in f.read().split()]
            except OSError:
                continue  # a thread that exited meanwhile
            todo += [c for c in children if c not in SERVER_PIDS]
    return total


def wait_for_ranks(
    folder: str | os.PathLike,
    rank: int,
    world_size: int,
    timeout_s: float = BARRIER_TIMEOUT_S,
) -> float:
    """A barrier of ``world_size`` ranks on a folder they all see (on several nodes: a shared
    filesystem): write ``ready-<rank>`` there, then wait until every rank's file is listed.

    A rank passes as soon as its listing shows the last file, so ranks pass within the
    polling interval (10 ms) plus the time the filesystem takes to show one node's new file
    to another; the result's ``start_skew_s`` measures what that came to.

    Returns:
        seconds waited.

    Raises:
        RuntimeError: a rank's file did not appear within ``timeout_s``.
    """
    start = time.perf_counter()
    with open(os.path.join(folder, f"ready-{rank}"), "w"):
        pass
    expected = {f"ready-{r}" for r in range(world_size)}
    while True:
        missing = expected.difference(os.listdir(folder))
        if not missing:
            return time.perf_counter() - start
        if time.perf_counter() - start > timeout_s:
            ranks = sorted(int(name.split("-")[1]) for name in missing)
            raise RuntimeError(
                f"rank {rank}: ranks {ranks} of {world_size} did not reach the start barrier "
                f"in {folder} within {timeout_s:.0f} s"
            )
        time.sleep(BARRIER_POLL_S)


def measure_throughput(
    make_loader: Callable[[], Iterable[dict]],
    *,
    video_keys: list[str],
    warmup_batches: int,
    steady_s: float,
    snapshot: Callable[[], dict] | None = None,
    start_barrier: Callable[[], object] | None = None,
) -> dict:
    """Iterate batches: first-batch latency, then samples and frames over a steady window.

    ``make_loader()`` is called again when an epoch ends before the window does.
    ``snapshot()``, if given, is called when the window starts and ends (for example to read
    loader counters); its results are returned as ``counters_start`` and ``counters_end``.
    ``start_barrier()``, if given, is called before anything is measured (a multi-node
    scenario's ranks wait there for each other, :func:`wait_for_ranks`).

    Returns:
        dict with ``measure_start_unix`` (wall-clock ``time.time()`` when the first batch was
        asked for: the start of ``first_batch_latency_s``), ``barrier_wait_s`` (seconds in
        ``start_barrier``; None without one), ``first_batch_latency_s``, ``samples``,
        ``frames``, ``batches``, ``steady_wall_s``, ``samples_per_s``, ``frames_per_s``,
        ``shuffle_randomness`` (mean over batches of distinct episodes / batch size),
        ``cpu_s_per_sample`` (CPU seconds of the process tree in the window per sample),
        ``window_start`` and ``window_end`` (``time.perf_counter()`` values), and the
        snapshots.

    Raises:
        ZeroSamplesError: no batch at all, or none inside the steady window.
    """
    barrier_wait_s = None
    if start_barrier is not None:
        waited = time.perf_counter()
        start_barrier()
        barrier_wait_s = time.perf_counter() - waited
    measure_start_unix = time.time()
    start = time.perf_counter()
    batches = _endless(make_loader)
    if next(batches, None) is None:  # not kept: a batch can be hundreds of MB
        raise ZeroSamplesError("the loader yielded no batch")
    first_batch_latency_s = time.perf_counter() - start
    for _ in range(max(0, warmup_batches - 1)):
        if next(batches, None) is None:
            break
    counters_start = snapshot() if snapshot else None
    cpu_start = tree_cpu_s()
    window_start = time.perf_counter()
    samples = frames = count = 0
    randomness = []
    while time.perf_counter() - window_start < steady_s:
        batch = next(batches, None)
        if batch is None:
            break
        size = len(batch["index"])
        samples += size
        frames += batch_frames(batch, video_keys)
        count += 1
        randomness.append(len(set(batch["episode_index"].tolist())) / size)
    window_end = time.perf_counter()
    cpu_end = tree_cpu_s()
    counters_end = snapshot() if snapshot else None
    if samples == 0:
        raise ZeroSamplesError(
            f"0 samples in the steady window ({steady_s} s after {warmup_batches} warm-up "
            "batches): the loader stopped or is too slow"
        )
    wall = window_end - window_start
    return {
        "measure_start_unix": measure_start_unix,
        "barrier_wait_s": barrier_wait_s,
        "first_batch_latency_s": first_batch_latency_s,
        "samples": samples,
        "frames": frames,
        "batches": count,
        "steady_wall_s": wall,
        "samples_per_s": samples / wall,
        "frames_per_s": frames / wall,
        "shuffle_randomness": statistics.fmean(randomness),
        "cpu_s_per_sample": None if cpu_start is None else (cpu_end - cpu_start) / samples,
        "window_start": window_start,
        "window_end": window_end,
        "counters_start": counters_start,
        "counters_end": counters_end,
    }


def _endless(make_loader: Callable[[], Iterable[dict]]) -> Iterator[dict]:
    """Batches of successive epochs; stops only if an epoch yields nothing."""
    while True:
        empty = True
        for batch in make_loader():
            empty = False
            yield batch
        if empty:
            return


def random_items(dataset, seed: int) -> Iterator:
    """Items of a map-style ``dataset`` at seeded random indices (drawn with replacement),
    the probe that :func:`measure_latency` times for a shuffled loader."""
    indices = np.random.default_rng(seed).integers(0, len(dataset), len(dataset))
    return (dataset[int(i)] for i in indices)


def measure_latency(items: Iterator[dict], count: int) -> dict:
    """Per-sample latency of ``count`` items fetched one by one in this process.

    Returns:
        dict with ``single_process_samples_per_s`` and ``latency_ms`` {p50, p95, p99}
        (None values when no item came).
    """
    latencies = []
    start = time.perf_counter()
    for _ in range(count):
        t = time.perf_counter()
        if next(items, None) is None:
            break
        latencies.append((time.perf_counter() - t) * 1000)
    wall = time.perf_counter() - start
    if len(latencies) < 2:
        return {"single_process_samples_per_s": None, "latency_ms": None}
    cuts = statistics.quantiles(latencies, n=100, method="inclusive")
    return {
        "single_process_samples_per_s": len(latencies) / wall,
        "latency_ms": {"p50": cuts[49], "p95": cuts[94], "p99": cuts[98]},
    }

"""The process tree's peak memory: RSS counts shared pages once per process, PSS once."""

import os
import subprocess
import sys

import numpy as np

from robopipe.bench.measure import SERVER_PIDS
from robopipe.bench.rss import PeakRss

MIB = 2**20


def test_pss_counts_memory_shared_with_a_child_once():
    shared = np.frombuffer(_mapped(256 * MIB), dtype=np.uint8)
    shared[::4096] = 1  # resident in this process
    rss = PeakRss()
    before_rss, before_pss = rss.sample()
    ready_r, ready_w = os.pipe()
    done_r, done_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child touches every page, then waits until the parent has sampled
        int(shared[::4096].sum())
        os.write(ready_w, b"x")
        os.read(done_r, 1)
        os._exit(0)
    try:
        os.read(ready_r, 1)
        with_child_rss, with_child_pss = rss.sample()
    finally:
        os.write(done_w, b"x")
        os.waitpid(pid, 0)
    assert with_child_rss - before_rss > 256  # the child's RSS counts the 256 MiB again
    assert with_child_pss - before_pss < 128  # PSS: the child's own pages only
    assert rss.peak_pss_mb >= with_child_pss >= 256


def test_pss_counts_shared_memory_held_open_but_not_mapped():
    rss = PeakRss()
    before_rss, before_pss = rss.sample()
    fd = os.memfd_create("test-rss-unmapped")
    try:
        chunk = b"\1" * MIB
        for _ in range(64):
            os.write(fd, chunk)  # 64 MiB in shared memory that no process maps
        after_rss, after_pss = rss.sample()
    finally:
        os.close(fd)
    assert after_rss - before_rss < 32
    assert 60 < after_pss - before_pss < 96


def test_rss_only_samples_leave_pss_alone():
    rss = PeakRss(interval_s=0.01, pss_interval_s=0.05)
    assert rss.pss_every == 5
    mb, pss = rss.sample(pss=False)
    assert mb > 0 and pss is None and rss.peak_pss_mb == 0
    with rss:
        pass
    assert rss.peak_pss_mb > 0  # entering and leaving take full samples


def _mapped(size: int):
    import mmap

    return mmap.mmap(-1, size, flags=mmap.MAP_SHARED)


def test_the_benchmark_servers_are_left_out():
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; x = bytearray(128 << 20); print(1, flush=True); "
         "sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip
    try:
        child.stdout.readline()  # its 128 MiB are resident
        rss = PeakRss()
        counted_rss, counted_pss = rss.sample()
        SERVER_PIDS.add(child.pid)
        try:
            left_out_rss, left_out_pss = rss.sample()
        finally:
            SERVER_PIDS.discard(child.pid)
    finally:
        child.communicate()
    assert counted_rss - left_out_rss > 120 and counted_pss - left_out_pss > 120

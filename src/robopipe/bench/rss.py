"""Peak memory of a process tree, sampled in a background thread: the sum of the processes'
RSS, and the tree's PSS with its shared memory counted once.

RSS counts every resident page a process maps, so a page mapped by several processes of the
tree (the libraries a forked DataLoader worker shares with its parent, a shared-memory batch
both a worker and the main process have touched) is counted once per process. PSS (proportional
set size, ``/proc/<pid>/smaps_rollup``) divides each page by the number of processes that map
it. PSS still misses shared memory that no process has mapped and touched at that moment: a
batch a DataLoader worker has sent and dropped and the main process has not read yet. PyTorch
keeps a descriptor open for every shared-memory tensor (its ``file_descriptor`` sharing
strategy, the default on Linux), so the tree's PSS here is the processes' PSS less their
shared-memory part (``Pss_Shmem``), plus the larger of that part and the shared-memory files
(``/dev/shm``, memfd) the tree holds open, each counted once at its allocated size. That is
exact when all the tree's shared memory is held open (PyTorch's) or none is (a shared
anonymous mapping), and a lower bound when both kinds are present.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time

import psutil

from robopipe.bench.measure import SERVER_PIDS


class PeakRss:
    """Context manager sampling the RSS and the PSS of this process plus all its descendants
    except the benchmark's servers (``robopipe.bench.measure.SERVER_PIDS``).

    ``peak_mb`` is the largest RSS sum seen, ``peak_pss_mb`` the largest PSS sum (MiB, 2**20
    bytes; the two peaks may come from different samples). DataLoader workers and subprocesses
    (the lerobot driver) are descendants, so they count. A process that is gone before it is
    read counts 0 in that sample. Reading a process's PSS makes the kernel walk its page
    tables (about 5 CPU ms for a DataLoader worker on cr5's sarm windows), so PSS is sampled
    less often than RSS (a ``/proc/<pid>/statm`` read); ``cpu_s`` is the CPU time the
    sampling thread took.

    Args:
        interval_s: seconds between RSS samples.
        pss_interval_s: seconds between PSS samples (rounded up to a multiple of
            ``interval_s``).
    """

    def __init__(self, interval_s: float = 0.1, pss_interval_s: float = 1.0) -> None:
        self.interval_s = interval_s
        self.pss_every = max(1, round(pss_interval_s / interval_s))
        self.peak_mb = 0.0
        self.peak_pss_mb = 0.0
        self.cpu_s = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PeakRss:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def sample(self, pss: bool = True) -> tuple[float, float | None]:
        """Take one sample now; return the tree's RSS and PSS in MiB (PSS None unless
        ``pss``)."""
        rss_sum = private = mapped_shm = 0
        shm: dict[tuple[int, int], int] = {}  # (device, inode) -> allocated bytes
        for proc in _loader_tree():
            try:
                rss_sum += proc.memory_info().rss
                if pss:
                    own, shared = _pss(proc.pid)
                    private, mapped_shm = private + own, mapped_shm + shared
                    shm.update(_open_shared_memory(proc.pid))
            except (psutil.Error, OSError):
                continue
        rss_mb = rss_sum / 2**20
        self.peak_mb = max(self.peak_mb, rss_mb)
        if not pss:
            return rss_mb, None
        pss_mb = (private + max(mapped_shm, sum(shm.values()))) / 2**20
        self.peak_pss_mb = max(self.peak_pss_mb, pss_mb)
        return rss_mb, pss_mb

    def _run(self) -> None:
        start, count = time.thread_time(), 0
        while not self._stop.wait(self.interval_s):
            count += 1
            self.sample(pss=count % self.pss_every == 0)
        self.cpu_s = time.thread_time() - start


def _loader_tree() -> list[psutil.Process]:
    """This process and its descendants, less the benchmark's servers (``SERVER_PIDS``:
    nginx, moto, the delaying proxy) and their descendants, whose memory a remote server
    would hold."""
    todo, tree = [psutil.Process(os.getpid())], []
    while todo:
        proc = todo.pop()
        tree.append(proc)
        with contextlib.suppress(psutil.Error):
            todo += [c for c in proc.children() if c.pid not in SERVER_PIDS]
    return tree


def _pss(pid: int) -> tuple[int, int]:
    """Bytes: the process's PSS less its shared-memory part, and that part (``Pss -
    Pss_Shmem`` and ``Pss_Shmem`` of ``/proc/<pid>/smaps_rollup``)."""
    fields = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            name, _, value = line.partition(":")
            if name in ("Pss", "Pss_Shmem"):
                fields[name] = int(value.split()[0]) * 1024
    shared = fields.get("Pss_Shmem", 0)
    return fields["Pss"] - shared, shared


def _open_shared_memory(pid: int) -> dict[tuple[int, int], int]:
    """(device, inode) -> allocated bytes of each shared-memory file (``/dev/shm``, memfd)
    the process holds open; files closed meanwhile are skipped."""
    found = {}
    folder = f"/proc/{pid}/fd"
    for fd in os.listdir(folder):
        path = f"{folder}/{fd}"
        try:
            target = os.readlink(path)
            if target.startswith(("/dev/shm/", "/memfd:")):
                st = os.stat(path)
                found[(st.st_dev, st.st_ino)] = st.st_blocks * 512
        except OSError:
            continue
    return found

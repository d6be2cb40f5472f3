"""Peak resident memory of a process tree, sampled in a background thread."""

from __future__ import annotations

import os
import threading

import psutil


class PeakRss:
    """Context manager sampling the RSS of this process plus all its descendants.

    ``peak_mb`` is the largest sum seen (MiB, 2**20 bytes). DataLoader workers and
    subprocesses (the lerobot driver) are descendants, so they count.

    Args:
        interval_s: seconds between samples.
    """

    def __init__(self, interval_s: float = 0.1) -> None:
        self.interval_s = interval_s
        self.peak_mb = 0.0
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

    def sample(self) -> float:
        """Take one sample now; return the tree's RSS in MiB."""
        root = psutil.Process(os.getpid())
        total = 0
        for proc in [root, *root.children(recursive=True)]:
            try:
                total += proc.memory_info().rss
            except psutil.Error:
                continue
        mb = total / 2**20
        self.peak_mb = max(self.peak_mb, mb)
        return mb

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

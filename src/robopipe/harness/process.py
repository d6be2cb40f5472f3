"""A whole command measured as a process: wall and CPU seconds, peak RSS (Linux ``/proc``).

What the conversion benchmarks (``benchmarks/convert_speed.py``, ``benchmarks/droid_bench.py``)
time: lerobot's converter and ``snakemake convert``, each as one command with everything it
starts. The process tree's figures come from ``os.wait4`` (CPU seconds of every waited-for
descendant, the largest peak RSS among them); the process's own from sampling
``/proc/<pid>/status`` (``VmHWM``) and ``/proc/<pid>/stat`` (``utime + stime``).
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

SAMPLE_S = 0.2  # how often ProcessWatch samples
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class ProcessWatch:
    """Samples one process's own peak RSS (``VmHWM``, MB) and CPU seconds (``utime + stime``,
    not its children's) every ``SAMPLE_S`` until it exits; the last sample stands."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak_rss_mb, self.cpu_s = pid, 0.0, 0.0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                status = Path(f"/proc/{self.pid}/status").read_text()
                stat = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
            except (FileNotFoundError, ProcessLookupError):
                return
            if stat[0] == "Z":  # exited, not reaped yet: the counters are gone
                return
            hwm = next(int(line.split()[1]) for line in status.splitlines() if "VmHWM" in line)
            self.peak_rss_mb = max(self.peak_rss_mb, hwm / 1024)
            self.cpu_s = (int(stat[11]) + int(stat[12])) / CLOCK_TICKS  # utime, stime
            time.sleep(SAMPLE_S)

    def join(self) -> None:
        """Wait for the sampling to end (it ends when the process has exited)."""
        self._thread.join()


def measured_process(cmd: list[str], log: Path, env=None, cwd=None) -> dict:
    """Run ``cmd`` after a ``sync``, its stdout and stderr into ``log``.

    Returns:
        ``wall_s``; ``cpu_s`` (user + system seconds of the process and every descendant it
        waited for); ``tree_peak_rss_mb`` (the largest peak RSS in that tree, MB);
        ``own_peak_rss_mb`` and ``own_cpu_s`` (the process's own).

    Raises:
        RuntimeError: the command failed (the message names its log).
    """
    os.sync()
    with open(log, "w") as f:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=cwd)
        watch = ProcessWatch(proc.pid)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
    watch.join()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{cmd[:3]} failed, see {log}")
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "tree_peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "own_peak_rss_mb": round(watch.peak_rss_mb, 1),
        "own_cpu_s": round(watch.cpu_s, 2),
    }

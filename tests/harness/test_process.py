"""robopipe.harness.process: a command's CPU seconds and peak RSS, its own and its tree's."""

from __future__ import annotations

import sys

import pytest

from robopipe.harness.process import measured_process


def test_a_process_tree_is_measured(tmp_path):
    # a parent that burns CPU and holds 40 MB, and a child that holds 120 MB
    child = "b = bytearray(120 << 20); b[::4096] = b'x' * len(b[::4096])"
    parent = (
        "import subprocess, sys, time\n"
        "b = bytearray(40 << 20); b[::4096] = b'x' * len(b[::4096])\n"
        "t = time.process_time()\n"
        "while time.process_time() - t < 0.5: pass\n"
        f"subprocess.run([sys.executable, '-c', {child!r}], check=True)\n"
        "time.sleep(0.5)\n"
    )
    measured = measured_process([sys.executable, "-c", parent], tmp_path / "log")
    assert measured["cpu_s"] >= 0.5 and measured["own_cpu_s"] >= 0.4
    assert 40 <= measured["own_peak_rss_mb"] < 120 <= measured["tree_peak_rss_mb"]


def test_a_failed_command_names_its_log(tmp_path):
    log = tmp_path / "failed.log"
    with pytest.raises(RuntimeError, match="failed.log"):
        measured_process([sys.executable, "-c", "print('why'); raise SystemExit(3)"], log)
    assert log.read_text() == "why\n"

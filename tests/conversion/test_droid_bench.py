"""tools/droid_bench.py's measurements: a process's CPU seconds and peak RSS, its own and its
tree's, and the jobs' figures read back from a Snakemake run's files."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def tools_importable(monkeypatch):
    """The tools import each other as top-level modules, as when run as scripts."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "tools"))


def test_a_process_tree_is_measured(tool, tmp_path):
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
    measured = tool("convert_speed").measured_process(
        [sys.executable, "-c", parent], tmp_path / "log"
    )
    assert measured["cpu_s"] >= 0.5 and measured["own_cpu_s"] >= 0.4
    assert 40 <= measured["own_peak_rss_mb"] < 120 <= measured["tree_peak_rss_mb"]


def test_jobs_figures_are_read_by_rule(tool, tmp_path):
    bench = tool("droid_bench")
    jobs, logs = tmp_path / "jobs", tmp_path / "logs"
    (jobs / "shard").mkdir(parents=True)
    header = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
    for name, row in (("shard-0", "2.0\t0\t200\t0\t0\t0\t0\t0\t0\t1.5"), ("shard-1", "1\t0\tNA")):
        (jobs / "shard" / f"{name}.tsv").write_text(header + row + "\t0" * 6 + "\t0.5\n")
    (logs / "shard").mkdir(parents=True)
    for name, mb in (("shard-0", 180.0), ("shard-1", 210.0)):
        record = {"rule": "shard", "own_mb": mb, "startup_s": 1.0}
        (logs / "shard" / f"{name}.log.rss.json").write_text(json.dumps(record))
    figures = bench.job_figures(jobs)
    assert [j["max_rss_mb"] for j in figures["shard"]] == [200.0, 0.0]  # NA: too short
    own = bench.job_own_figures(logs)
    assert own == {"shard": {"own_peak_rss_mb": 210.0, "startup_s": 1.0}}
    table = bench.rule_table(figures, own)
    assert table[1].split() == ["shard", "2", "3.0", "2.0", "200", "210", "1.00"]

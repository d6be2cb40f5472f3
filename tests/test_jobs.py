"""What a job records of itself (robopipe.jobs.logged): its peak RSS against /usr/bin/time's
for the same process, not its parent's; its start-up."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

JOB = """
import sys
from types import SimpleNamespace
import numpy as np
from robopipe.jobs import logged
with logged(SimpleNamespace(log=[sys.argv[1]], rule="demo_rule")):
    __import__("subprocess").run([sys.executable, "-c", "b = bytearray(400 * 2**20)"])
    block = np.ones(200 * 2**20, dtype=np.uint8)  # 200 MiB touched
"""


@pytest.mark.skipif(not shutil.which("time") and not shutil.os.path.exists("/usr/bin/time"),
                    reason="/usr/bin/time missing")  # fmt: skip
def test_job_peak_rss_matches_usr_bin_time(tmp_path):
    log = tmp_path / "job.log"
    done = subprocess.run(
        ["/usr/bin/time", "-f", "maxrss_kb=%M", sys.executable, "-c", JOB, str(log)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    time_mb = int(re.search(r"maxrss_kb=(\d+)", done.stderr).group(1)) / 1024
    record = json.loads((tmp_path / "job.log.rss.json").read_text())
    assert record["rule"] == "demo_rule"
    assert 200 < record["own_mb"] < 400 < record["children_mb"] == record["peak_mb"]
    assert abs(record["peak_mb"] - time_mb) <= 0.1 * time_mb


STARTED_LATE = """
import sys, time
from types import SimpleNamespace
time.sleep(0.3)  # stands for the interpreter and imports before the job's first work
from robopipe.jobs import logged
with logged(SimpleNamespace(log=[sys.argv[1]], rule="demo_rule")):
    pass
"""

LARGE_PARENT = """
import subprocess, sys
held = b"x" * (300 * 2**20)  # 300 MiB resident in the parent when it starts the job
subprocess.run([sys.executable, "-c", sys.argv[1], sys.argv[2]], check=True)
"""


def test_a_job_records_its_startup_and_its_own_peak_not_its_parents(tmp_path):
    log = tmp_path / "job.log"
    subprocess.run([sys.executable, "-c", LARGE_PARENT, STARTED_LATE, str(log)], check=True)
    record = json.loads((tmp_path / "job.log.rss.json").read_text())
    assert record["startup_s"] >= 0.3
    assert record["job_start_s"] is None  # not a SLURM job (no SLURM_JOB_ID)
    # ru_maxrss would count the parent's 300 MiB at the fork; the job itself holds far less
    assert record["own_mb"] < 150


FAILING_JOB = """
import sys
from types import SimpleNamespace
from robopipe.errors import DatasetError
from robopipe.jobs import logged
from robopipe.retry import RemoteReadError
job = SimpleNamespace(log=[sys.argv[1]], rule="validate", wildcards=SimpleNamespace(dataset="ds"))
with logged(job):
    if sys.argv[2] == "bad input":
        raise DatasetError("ds", "timestamps are off", episode=3, file="data/x.parquet")
    if sys.argv[2] == "network":
        raise RemoteReadError("http://h/f: gave up after 3 attempts in 1.0 s")
    {}["timestamp"]
"""


@pytest.mark.parametrize("failure", ["bad input", "network", "bug"])
def test_a_failing_job_says_one_line_and_no_traceback(tmp_path, failure):
    log = tmp_path / "job.log"
    done = subprocess.run(
        [sys.executable, "-c", FAILING_JOB, str(log), failure], capture_output=True, text=True
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    if failure == "bad input":
        assert lines[0].endswith(
            "robopipe: dataset 'ds': episode 3: file data/x.parquet: timestamps are off"
        )
    elif failure == "network":
        assert lines[0].endswith(
            "robopipe: dataset 'ds': job validate: http://h/f: gave up after 3 attempts in 1.0 s"
        )
    else:
        assert "robopipe: dataset 'ds': job validate failed: KeyError: 'timestamp'" in lines[0]
        assert str(log) in lines[0]
        assert "Traceback" in log.read_text()  # for whoever fixes it

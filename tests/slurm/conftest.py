"""A real SLURM cluster for the tests: ``tools/slurm_local.sh`` (two simulated nodes n1, n2).

``slurm_cluster`` (session) starts the cluster, or reuses one this script already runs, and
stops it at the end if it started it. Tests that use it are skipped with the script's reason
where it cannot run (not root, packages not installable, a foreign /etc/slurm/slurm.conf).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "tools" / "slurm_local.sh"
SNAKEFILE = REPO_ROOT / "Snakefile"
SLURM_PROFILE = REPO_ROOT / "profiles" / "slurm"
CANNOT_RUN_HERE = 3  # slurm_local.sh's exit status for "not root / no packages / foreign config"

# Fast status checks for a test cluster without accounting (squeue, not sacct).
SLURM_TEST_ARGS = (
    "--executor",
    "slurm",
    "--workflow-profile",
    str(SLURM_PROFILE),
    "--slurm-status-command",
    "squeue",
    "--slurm-init-seconds-before-status-checks",
    "2",
    "--slurm-keep-successful-logs",
)


def _script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True)


@pytest.fixture(scope="session")
def slurm_cluster():
    """Start (or reuse) the local two-node cluster; yields the node names ``["n1", "n2"]``."""
    if sys.platform != "linux" or os.geteuid() != 0:
        pytest.skip("the local SLURM cluster needs Linux and root (tools/slurm_local.sh)")
    already_running = _script("status").returncode == 0
    if not already_running:
        started = _script("start", "--nodes", "2")
        if started.returncode == CANNOT_RUN_HERE:
            pytest.skip(f"no local SLURM cluster: {started.stderr.strip()}")
        if started.returncode != 0:
            pytest.fail(f"tools/slurm_local.sh start failed:\n{started.stderr}")
    nodes = subprocess.run(
        ["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True, check=True
    ).stdout.split()
    if len(set(nodes)) < 2:
        pytest.skip(f"the running local cluster has nodes {nodes}; these tests need n1 and n2")
    yield sorted(set(nodes))
    if not already_running:
        _script("stop")


@pytest.fixture(scope="session")
def slurm_profile() -> Path:
    """The workflow's SLURM profile folder."""
    return SLURM_PROFILE


@pytest.fixture(scope="session")
def slurm_args() -> tuple[str, ...]:
    """snakemake options that run on the local cluster, with fast status checks."""
    return SLURM_TEST_ARGS

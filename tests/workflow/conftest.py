"""Run the real workflow (`snakemake -s Snakefile -d <tmp dir>`) in tests."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
SNAKEFILE = REPO_ROOT / "Snakefile"


def snakemake_command(workdir: Path, config: dict, *args: str) -> list[str]:
    """The snakemake command line for ``config`` (written to ``workdir/config.yaml``)."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    return [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(SNAKEFILE),
        "-d",
        str(workdir),
        "--configfile",
        str(workdir / "config.yaml"),
        *args,
    ]


@pytest.fixture
def snakemake_cmd():
    """``snakemake_cmd(workdir, config, *args) -> list[str]``: see :func:`snakemake_command`."""
    return snakemake_command


@pytest.fixture
def run_snakemake():
    """``run_snakemake(workdir, config, *args, check=True) -> CompletedProcess`` (text output)."""

    def run(workdir: Path, config: dict, *args: str, check: bool = True):
        result = subprocess.run(
            snakemake_command(workdir, config, *args), capture_output=True, text=True
        )
        if check and result.returncode != 0:
            raise AssertionError(f"snakemake failed:\n{result.stdout}\n{result.stderr}")
        return result

    return run

"""The house style, as CI sees it: ruff's lint and format over the Python files, snakefmt
over the rule files (the versions pinned in pyproject.toml's test extra)."""

import shutil
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
PYTHON = ["src", "tests", "scripts", "benchmarks"]


@pytest.mark.parametrize(
    "command",
    [
        ["ruff", "check", *PYTHON],
        ["ruff", "format", "--check", *PYTHON],
        ["snakefmt", "--check", "Snakefile", "workflow"],
    ],
    ids=["ruff check", "ruff format", "snakefmt"],
)
def test_the_code_is_in_the_house_style(command):
    if shutil.which(command[0]) is None:
        pytest.skip(f"{command[0]} is not installed (pip install -e '.[test]')")
    result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

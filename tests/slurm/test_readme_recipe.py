"""The README's local-cluster recipe, run verbatim on a copy of the checkout: start the
cluster, run the default target (demo, robomimic, the whole default benchmark matrix with its
n2 scenarios, the report) under SLURM, stop the cluster.

It takes 10-20 minutes on 2 cores, so it runs only with ``ROBOPIPE_SLURM_README=1``."""

import csv
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "tools" / "slurm_local.sh"
pytestmark = [
    pytest.mark.slurm,
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("ROBOPIPE_SLURM_README") != "1",
        reason="the README's SLURM recipe takes 10-20 minutes: set ROBOPIPE_SLURM_README=1",
    ),
]
RECIPE_S = 2400  # the recipe's time limit


def readme_recipe() -> str:
    """The README's bash block that starts the local cluster, runs snakemake and stops it."""
    readme = (REPO_ROOT / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", readme, re.S)
    return next(b for b in blocks if "tools/slurm_local.sh start" in b)


def copy_checkout(target: Path) -> Path:
    """The checkout's tracked and unignored files, without results."""
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=REPO_ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    for name in files:
        source = REPO_ROOT / name
        if source.is_file() and not name.startswith("results/"):
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name, follow_symlinks=False)
    return target


@pytest.mark.timeout(RECIPE_S + 120)
def test_the_readme_slurm_recipe_runs_the_default_target(slurm_cluster, tmp_path):
    recipe = readme_recipe()
    assert "bash tools/slurm_local.sh start" in recipe and "sudo" not in recipe
    repo = copy_checkout(tmp_path / "repo")
    env = {**os.environ, "PYTHONPATH": str(repo / "src")}
    start = time.monotonic()
    try:
        result = subprocess.run(
            ["bash", "-e", "-c", recipe], cwd=repo, env=env, capture_output=True, text=True,
            timeout=RECIPE_S,
        )  # fmt: skip
    finally:
        # the recipe ends by stopping the cluster; the session's other tests still use it
        subprocess.run(["bash", str(SCRIPT), "start", "--nodes", "2"], capture_output=True)
    wall_s = time.monotonic() - start
    print(f"README SLURM recipe: {wall_s:.0f} s")
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-5000:]
    with open(repo / "results/report/summary.csv", newline="") as f:
        scenarios = {(row["dataset"], row["scenario"]) for row in csv.DictReader(f)}
    for dataset in ("demo", "robomimic_demo"):
        assert (repo / f"results/{dataset}/v3.0/meta/info.json").is_file()
    assert ("demo", "robopipe_stream_local_single_cpu_w2_n2") in scenarios
    assert ("robomimic_demo", "robomimic_hdf5_all_local_single_cpu_w2_n1") in scenarios

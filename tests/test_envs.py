"""The jobs' conda environment (envs/robopipe.yaml, for `snakemake --sdm conda`) carries every
runtime dependency of pyproject.toml that the jobs import."""

import re
import tomllib
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
# Snakemake runs the jobs; it puts its own package on a script job's path.
NOT_IN_JOBS = {"snakemake", "snakemake-executor-plugin-slurm", "pygments"}


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[ ;]", requirement, maxsplit=1)[0].lower()


def test_conda_env_has_every_runtime_dependency_with_the_same_bounds():
    project = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))["project"]
    env = yaml.safe_load((REPO / "envs" / "robopipe.yaml").read_text("utf-8"))
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    in_env = {_name(r): r.replace(" ", "") for r in pip if not r.startswith("-")}
    wanted = [r for r in project["dependencies"] if _name(r) not in NOT_IN_JOBS]
    assert wanted
    for requirement in wanted:
        assert in_env.get(_name(requirement)) == requirement.replace(" ", ""), requirement

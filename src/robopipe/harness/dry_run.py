"""``snakemake -n`` of one dataset, timed: how long the workflow takes to plan it (parse and DAG,
interpreter start included), its jobs per rule, and the ``sbatch`` calls the SLURM profile
would make (``benchmarks/plan_dry_run.py``, ``benchmarks/droid_bench.py``).
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import yaml

SLURM_PROFILE = "profiles/slurm"


def time_dry_run(
    workflow: Path,
    source: Path,
    work: Path,
    *,
    episodes_per_shard: int | None,
    target: str,
    slurm: bool = False,
) -> dict:
    """Run and time ``snakemake -n TARGET`` of the workflow in the folder ``workflow`` (its
    ``Snakefile``, ``config/config.yaml`` and ``profiles/slurm``) on a config naming the v2.1
    folder ``source`` as dataset ``big``, in the working directory ``work/run``.

    ``episodes_per_shard`` None keeps the conversion's default (shards sized by work). With
    ``slurm`` the dry run uses the SLURM profile (``--executor slurm``).

    Returns:
        ``{"wall_s": seconds, "jobs": {rule: count}}``, and with ``slurm`` ``"sbatch"``: the
        calls the run would make (:func:`sbatch_calls`).

    Raises:
        RuntimeError: ``snakemake -n`` failed (its output is quoted).
    """
    config = work / "config.yaml"
    conversion = {} if episodes_per_shard is None else {"episodes_per_shard": episodes_per_shard}
    config.write_text(
        yaml.safe_dump({"datasets": {"big": {"path": str(source), "conversion": conversion}}})
    )
    command = [
        sys.executable, "-m", "snakemake", target, "-s", str(workflow / "Snakefile"),
        "-d", str(work / "run"), "-n",
        # -d makes the Snakefile's own `configfile:` path relative to the run folder: load it here
        "--configfile", str(workflow / "config" / "config.yaml"), str(config),
    ]  # fmt: skip
    if slurm:  # every job is printed: group jobs, and jobs outside groups at column 0
        command += ["--executor", "slurm", "--workflow-profile", str(workflow / SLURM_PROFILE)]
    else:
        command += ["--quiet", "rules"]
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True)
    wall_s = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(f"snakemake -n failed:\n{result.stdout}\n{result.stderr}")
    jobs = {rule: int(n) for rule, n in re.findall(r"^(\w+)\s+(\d+)$", result.stdout, re.M)}
    out = {"wall_s": wall_s, "jobs": jobs}
    if slurm:
        profile = yaml.safe_load((workflow / SLURM_PROFILE / "config.yaml").read_text())
        out["sbatch"] = sbatch_calls(result.stdout, profile)
    return out


# the workflow's target rules: they run no code, so Snakemake runs them where it runs (a dry
# run prints them as `rule`, like the rest); tests/harness/test_dry_run.py keeps this list true
TARGET_RULES = frozenset({"all", "convert", "check", "quality", "edit", "push", "bench"})


def sbatch_calls(dry_run: str, profile: dict) -> int:
    """The ``sbatch`` calls of a SLURM dry run's printed jobs under a profile: one per group
    job; for a rule of the profile's ``slurm-array-jobs``, one per ``slurm-array-limit``
    (default 1000) of its jobs outside groups (snakemake-executor-plugin-slurm submits them as
    one job array once they are all ready; a rule with one job is a plain job); one per other
    job outside a group."""
    arrays = {r.strip() for r in str(profile.get("slurm-array-jobs", "")).split(",") if r.strip()}
    limit = int(profile.get("slurm-array-limit", 1000))
    groups = len(re.findall(r"\] Group job \S+ \(", dry_run))
    rules = re.findall(r"^(?:rule|checkpoint) (\w+):$", dry_run, re.M)
    counts = {rule: rules.count(rule) for rule in set(rules) - TARGET_RULES}
    return groups + sum(
        -(-n // limit) if rule in arrays or "all" in arrays else n for rule, n in counts.items()
    )

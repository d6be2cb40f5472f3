"""robopipe.harness.dry_run: ``snakemake -n`` of one dataset, its jobs and sbatch calls counted."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from robopipe.harness.dry_run import TARGET_RULES, sbatch_calls, time_dry_run

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_a_dry_run_counts_the_jobs_and_the_sbatch_calls(make_v21, tmp_path):
    source = make_v21(episodes=2, min_length=10, max_length=12)
    local = time_dry_run(REPO_ROOT, source, tmp_path, episodes_per_shard=1, target="convert")
    assert local["wall_s"] > 0 and local["jobs"]["plan"] == 1 and "sbatch" not in local
    slurm = time_dry_run(
        REPO_ROOT, source, tmp_path, episodes_per_shard=1, target="convert", slurm=True
    )
    assert slurm["sbatch"] >= 1 and slurm["jobs"] == local["jobs"]


def test_a_failed_dry_run_says_why(make_v21, tmp_path):
    source = make_v21(episodes=2, min_length=10, max_length=12)
    with pytest.raises(RuntimeError, match="snakemake -n failed"):
        time_dry_run(REPO_ROOT, source, tmp_path, episodes_per_shard=None, target="no_such_rule")


def test_a_rule_s_array_jobs_are_one_sbatch_per_array_limit():
    printed = "\n".join(["rule shard:"] * 5 + ["rule meta:", "checkpoint plan:", "rule convert:"])
    printed += "\n[Sat] Group job convert_d (jobs in lexicogr. order):\n"
    assert sbatch_calls(printed, {}) == 1 + 5 + 1 + 1
    assert sbatch_calls(printed, {"slurm-array-jobs": "shard, meta"}) == 1 + 1 + 1 + 1
    assert sbatch_calls(printed, {"slurm-array-jobs": "all", "slurm-array-limit": 2}) == 1 + 3 + 2


def test_the_target_rules_are_the_rules_that_run_no_code():
    no_code = set()
    for path in [REPO_ROOT / "Snakefile", *(REPO_ROOT / "workflow/rules").glob("*.smk")]:
        text = path.read_text()
        for match in re.finditer(r"^(?:rule|checkpoint) (\w+):\n((?:[ \t]+.*\n|\n)*)", text, re.M):
            if not re.search(r"^\s+(script|shell|run|wrapper|notebook):", match.group(2), re.M):
                no_code.add(match.group(1))
    assert no_code == TARGET_RULES

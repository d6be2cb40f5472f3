"""The workflow on a real SLURM cluster: same output as a local run, a cancelled job retried,
resources in the dry run, and one 1-node and one 2-node benchmark scenario."""

import json
import re
import subprocess
import time
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

# 8 episodes in 2 shards of 4; 1 data file and 1 file per camera: 9 jobs besides `all`.
CONVERSION = {"episodes_per_shard": 4}


# Two quick scenarios: 1 node, and 2 nodes (one rank each); steady window of 2 s.
BENCH = {
    "matrix": {
        "loader": ["robopipe_map"],
        "source": ["local"],
        "mode": ["single"],
        "decode": ["cpu"],
        "workers": [0],
        "nodes": [1, 2],
        "exclude": [],
    },
    "batch_size": 4,
    "warmup_batches": 1,
    "steady_s": 2,
    "probe_samples": 4,
}


def _config(source):
    return {"datasets": {"ds": {"path": str(source), "conversion": CONVERSION}}, "bench": BENCH}


@pytest.fixture(scope="module")
def source(make_v21):
    return make_v21(episodes=8, cameras=2, min_length=20, max_length=40)


@pytest.fixture(scope="module")
def local_output(source, tmp_path_factory, run_snakemake, file_tree):
    """The published v3.0 files of a local run (``--cores 2``)."""
    work = tmp_path_factory.mktemp("local")
    run_snakemake(work, _config(source), "--cores", "2", "convert")
    return file_tree(work / "results/ds/v3.0")


def test_slurm_run_publishes_the_same_bytes_as_a_local_run(
    slurm_cluster, source, local_output, tmp_path, run_snakemake, slurm_args, file_tree
):
    run_snakemake(tmp_path, _config(source), *slurm_args, "convert")
    assert file_tree(tmp_path / "results/ds/v3.0") == local_output
    # each shard really ran as a SLURM job: its log is in the plugin's log folder
    logs = list((tmp_path / ".snakemake/slurm_logs/rule_shard").rglob("*.log"))
    assert len(logs) == 2


def test_a_cancelled_shard_job_is_retried_and_the_output_is_unchanged(
    slurm_cluster, source, local_output, tmp_path, snakemake_cmd, slurm_args, file_tree
):
    command = snakemake_cmd(tmp_path, _config(source), *slurm_args, "--retries", "1", "convert")
    log = tmp_path / "snakemake.log"
    with log.open("w") as out:
        run = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        try:
            cancelled = _cancel_a_running_shard_job(tmp_path, timeout_s=300)
            assert run.wait(timeout=600) == 0, log.read_text()
        finally:
            if run.poll() is None:
                run.terminate()
    assert file_tree(tmp_path / "results/ds/v3.0") == local_output
    output = log.read_text()
    assert f"SLURM-job '{cancelled}' failed, SLURM status is: 'CANCELLED'" in output
    # 2 shards, one of them submitted again
    assert len(re.findall(r"submitted with SLURM jobid \d+ \(log: \S+/rule_shard/", output)) == 3


def _cancel_a_running_shard_job(workdir: Path, timeout_s: float) -> str:
    """scancel the first shard job that runs (its SLURM log exists); returns its job id."""
    logs = workdir / ".snakemake/slurm_logs/rule_shard"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for job_log in logs.glob("*/*.log"):
            job_id = job_log.stem
            state = subprocess.run(
                ["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True
            ).stdout.strip()
            if state == "RUNNING":
                subprocess.run(["scancel", job_id], check=True)
                return job_id
        time.sleep(0.2)
    raise AssertionError(f"no shard job ran within {timeout_s} s")


def test_dry_run_with_the_slurm_profile_shows_each_jobs_resources(
    source, tmp_path, run_snakemake, slurm_profile
):
    result = run_snakemake(
        tmp_path,
        _config(source),
        "--executor",
        "slurm",
        "--workflow-profile",
        str(slurm_profile),
        "-n",
    )
    profile = yaml.safe_load((slurm_profile / "config.yaml").read_text())["set-resources"]
    jobs = [
        (rule, dict(re.findall(r"^    (\w+): (.*)$", body, re.M)))
        for rule, body in re.findall(
            r"^(?:rule|checkpoint) (\w+):\n((?:    .*\n)+)", result.stdout, re.M
        )
    ]
    seen = {rule for rule, _ in jobs}
    convert_rules = {
        "source_check",
        "plan",
        "shard",
        "aggregate_data",
        "aggregate_video",
        "meta",
        "validate",
    }
    assert convert_rules | {"publish", "bench_scenario"} <= seen
    assert sum(rule == "shard" for rule, _ in jobs) == 2
    for rule, fields in jobs:
        resources = dict(item.split("=", 1) for item in fields["resources"].split(", "))
        if rule in convert_rules:
            for key in ("cpus_per_task", "mem_mb", "runtime"):
                assert resources[key] == str(profile[rule][key]), (rule, key, resources)
        if rule == "bench_scenario":
            nodes = fields["wildcards"].rsplit("_n", 1)[1]
            assert (resources["nodes"], resources["tasks"]) == (nodes, nodes)
            assert resources["mpi"] == ("srun" if nodes == "2" else "")
            assert (resources["cpus_per_task"], resources["gres"]) == ("1", "")


def test_one_and_two_node_benchmark_scenarios_under_slurm(
    slurm_cluster, source, tmp_path, snakemake_cmd, run_snakemake, slurm_args
):
    config = _config(source)
    names = ("robopipe_map_local_single_cpu_w0_n1", "robopipe_map_local_single_cpu_w0_n2")
    targets = [f"results/bench/ds/{name}.json" for name in names]
    run_snakemake(tmp_path, config, *slurm_args, *targets)
    n1, n2 = (json.loads((tmp_path / t).read_text()) for t in targets)
    assert n1["frames_per_s"] > 0 and n2["frames_per_s"] > 0
    assert [r["rank"] for r in n2["ranks"]] == [0, 1]
    assert n2["frames"] == sum(r["frames"] for r in n2["ranks"])
    # one rank on each simulated node
    assert sorted(r["node"] for r in n2["ranks"]) == slurm_cluster

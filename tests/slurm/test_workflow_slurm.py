"""The workflow on a real SLURM cluster: same output as a local run, a cancelled job retried,
resources and groups in the dry run, and one 1-node and one 2-node benchmark scenario."""

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
# Convert as a large dataset: no groups (the profile's job arrays take the shards and files).
SPREAD = {"one_job_episodes": 0}


# Two quick scenarios: 1 node, and 2 nodes (one rank each); steady window of 2 s.
BENCH = {
    "matrix": {
        "loader": ["robopipe_map"],
        "source": ["local"],
        "mode": ["single"],
        "encoding": [None],  # no copies (the default config adds jpeg90)
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


def _config(source, **extra):
    return {
        "datasets": {"ds": {"path": str(source), "conversion": CONVERSION}},
        "bench": BENCH,
        **extra,
    }


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
    # a small dataset converts in one SLURM job (group convert_ds): one log in the plugin's folder
    logs = list((tmp_path / ".snakemake/slurm_logs").rglob("*.log"))
    assert [log.parent.name.startswith("group_convert_ds") for log in logs] == [True]


def test_a_cancelled_group_job_is_retried_and_the_output_is_unchanged(
    slurm_cluster, source, local_output, tmp_path, snakemake_cmd, slurm_args, file_tree
):
    command = snakemake_cmd(tmp_path, _config(source), *slurm_args, "--retries", "1", "convert")
    log = tmp_path / "snakemake.log"
    with log.open("w") as out:
        run = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        try:
            _cancel_the_running_group_job(tmp_path, timeout_s=300)
            assert run.wait(timeout=600) == 0, log.read_text()
        finally:
            if run.poll() is None:
                run.terminate()
    assert file_tree(tmp_path / "results/ds/v3.0") == local_output
    output = log.read_text()
    assert "Error in group convert_ds" in output
    # the conversion's one group job, submitted again once
    assert (
        len(re.findall(r"submitted with SLURM jobid \d+ \(log: \S+/group_convert_ds", output)) == 2
    )


def _cancel_the_running_group_job(workdir: Path, timeout_s: float) -> str:
    """scancel the conversion's group job once it runs (its SLURM log exists); returns its id."""
    logs = workdir / ".snakemake/slurm_logs"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for job_log in logs.glob("group_convert_ds*/*.log"):
            job_id = job_log.stem
            state = subprocess.run(
                ["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True
            ).stdout.strip()
            if state == "RUNNING":
                subprocess.run(["scancel", job_id], check=True)
                return job_id
        time.sleep(0.2)
    raise AssertionError(f"no group job ran within {timeout_s} s")


@pytest.mark.parametrize("slurm", [{}, SPREAD], ids=["one_job", "spread"])
def test_dry_run_with_the_slurm_profile_shows_each_jobs_resources_and_group(
    source, tmp_path, run_snakemake, slurm_profile, slurm
):
    result = run_snakemake(
        tmp_path,
        _config(source, slurm=slurm),
        "--executor",
        "slurm",
        "--workflow-profile",
        str(slurm_profile),
        "-n",
    )
    profile = yaml.safe_load((slurm_profile / "config.yaml").read_text())["set-resources"]
    # a job of a group job is printed indented under "Group job NAME"
    groups, group = {}, None
    jobs = []
    for line in result.stdout.splitlines():
        if match := re.search(r"\] Group job (\S+) \(", line):
            group = match.group(1)
        elif match := re.match(r"^( {4})?(?:rule|checkpoint) (\w+):$", line):
            rule = match.group(2)
            jobs.append((rule, {}))
            groups[rule] = group if match.group(1) else None
        elif (match := re.match(r"^\s+(\w+): (.*)$", line)) and jobs:
            jobs[-1][1].setdefault(match.group(1), match.group(2))
    seen = {rule for rule, _ in jobs}
    convert_rules = {
        "source_check", "plan", "shard", "aggregate_data", "aggregate_video", "meta", "validate",
    }  # fmt: skip
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
    if slurm:
        assert {groups[rule] for rule in convert_rules - {"validate"}} == {None}
        assert groups["validate"] == groups["publish"] == "publish_ds"
    else:
        assert {groups[rule] for rule in convert_rules | {"publish"}} == {"convert_ds"}
    assert groups["bench_scenario"] is None


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
    # dispatch (SLURM job start to measuring) apart from measuring; the script's process
    # started inside the job, so dispatch covers its start-up (squeue's start: 1 s resolution)
    for result in (n1, n2, *n2["ranks"]):
        assert result["dispatch_s"] >= result["startup_to_measure_s"] - 1
    assert n1["start_skew_s"] is None
    # the two ranks waited for each other: neither started measuring before the later one
    # reached the barrier (how close together they then start is a figure, not a test)
    assert all(r["barrier_wait_s"] is not None for r in n2["ranks"])
    starts = [r["measure_start_unix"] for r in n2["ranks"]]
    arrivals = [r["measure_start_unix"] - r["barrier_wait_s"] for r in n2["ranks"]]
    assert min(starts) >= max(arrivals) - 0.01
    assert n2["start_skew_s"] == pytest.approx(max(starts) - min(starts))

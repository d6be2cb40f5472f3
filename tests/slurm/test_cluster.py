"""robopipe.cluster on the real local cluster: an impossible request is refused before any
submission, a job stuck pending fails with its reason, an interrupt leaves no job behind; and
the plugin internals the module hooks are still there."""

import inspect
import re
import signal
import subprocess
import time
from importlib.metadata import version

import pytest

from robopipe import cluster

# 4 episodes in one shard: with the default `slurm.one_job_episodes`, one group job
CONVERSION = {"episodes_per_shard": 4}


@pytest.fixture(scope="module")
def source(make_v21):
    return make_v21(episodes=4, cameras=1, min_length=20, max_length=30)


def _config(source, **extra):
    return {"datasets": {"ds": {"path": str(source), "conversion": CONVERSION}}, **extra}


def _run_jobs(run_uuid: str) -> list[str]:
    """The job ids squeue still lists for this run's job name."""
    out = subprocess.run(
        ["squeue", "-h", "--name", run_uuid, "-o", "%i"], capture_output=True, text=True
    )
    return out.stdout.split()


def test_plugin_internals_are_what_robopipe_cluster_hooks():
    """Fails when snakemake or snakemake-executor-plugin-slurm change what the hooks use."""
    plugin = pytest.importorskip("snakemake_executor_plugin_slurm")
    from snakemake_interface_executor_plugins.executors.remote import RemoteExecutor

    assert version("snakemake").startswith("9.")
    assert version("snakemake-executor-plugin-slurm").startswith("2.")
    executor = plugin.Executor
    assert issubclass(executor, RemoteExecutor)
    assert inspect.isasyncgenfunction(executor.check_active_jobs)
    assert inspect.iscoroutinefunction(RemoteExecutor.sleep)
    for name in ("run_jobs", "cancel_jobs", "report_job_error"):
        assert callable(getattr(executor, name)), name
    assert isinstance(RemoteExecutor.next_seconds_between_status_checks, property)
    post_init = inspect.getsource(executor.__post_init__)
    for attribute in ("self.run_uuid", "self._fallback_account_arg", "_job_submission_executor"):
        assert attribute in post_init, attribute
    assert "self.wait = False" in inspect.getsource(RemoteExecutor.shutdown)
    assert "self._fallback_account_arg is None" in inspect.getsource(executor.get_account_arg)
    # the plugin names every job of a run after the run (scancel/squeue --name)
    assert "--job-name {safe_quote(params.run_uuid)}" in inspect.getsource(
        plugin.submit_string.get_submit_command
    )
    cluster.install()
    assert executor.run_jobs.__name__ == "run_jobs_checked"


def test_time_limits_and_fit():
    assert cluster.parse_minutes("infinite") is None
    assert cluster.parse_minutes("1-02:03:04") == 26 * 60 + 4
    assert cluster.parse_minutes("30:00") == 30
    partition = cluster.Partition("p", (cluster.Node("n1", 2, 8000),), 60)
    assert cluster.misfit(cluster.Request(1, 2, 8000, 60), partition) is None
    assert "have its CPUs" in cluster.misfit(cluster.Request(1, 3, 100, 10), partition)
    assert "have its CPUs" in cluster.misfit(cluster.Request(2, 1, 100, 10), partition)
    assert "time limit" in cluster.misfit(cluster.Request(1, 1, 100, 61), partition)


def test_status_checks_follow_the_youngest_job_within_bounds():
    check = cluster.next_status_check_s
    assert check(12.0, 2.0, [8.0, 100.0]) == 2.0  # a quarter of 8 s, the floor being 2 s
    assert check(12.0, 2.0, [20.0]) == 5.0
    assert check(22.0, 2.0, [100.0]) == cluster.MAX_STATUS_INTERVAL_S  # not 25 s
    assert check(4.0, 2.0, [100.0]) == 4.0  # never later than the plugin's own interval
    assert check(40.0, 40.0, [100.0]) == 40.0  # never more often than its initial interval
    assert check(32.0, 2.0, []) == 32.0  # no job running: the plugin's interval


def test_an_impossible_request_is_refused_before_any_submission(
    slurm_cluster, source, tmp_path, run_snakemake, slurm_args
):
    # 8 workers: 9 CPUs per node, more than the local cluster's nodes declare
    scenario = "robopipe_map_local_single_cpu_w8_n1"
    start = time.monotonic()
    result = run_snakemake(
        tmp_path, _config(source), *slurm_args, f"results/bench/ds/{scenario}.json",
        check=False, timeout=120,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert time.monotonic() - start < 60
    assert re.search(
        rf"robopipe: rule bench_scenario \(dataset=ds, scenario={scenario}\) asks for "
        r"1 node\(s\) x 9 CPUs and 10000 MB, 30 min, but partition 'debug' has 2 node\(s\) of "
        r"at most \d+ CPUs",
        output,
    ), output
    assert "submitted with SLURM jobid" not in output


def test_a_job_stuck_pending_fails_with_its_reason(
    slurm_cluster, source, tmp_path, run_snakemake, slurm_args
):
    # jobs bound to node n2 while n2 is drained: pending for 'ReqNodeNotAvail'
    subprocess.run(
        ["scontrol", "update", "NodeName=n2", "State=DRAIN", "Reason=robopipe_test"], check=True
    )
    try:
        start = time.monotonic()
        result = run_snakemake(
            tmp_path, _config(source, slurm={"stuck_pending_s": 3}), *slurm_args,
            "--retries", "0", "convert", "--default-resources", "slurm_extra='--nodelist=n2'",
            check=False, timeout=180,
        )  # fmt: skip
        elapsed = time.monotonic() - start
    finally:
        subprocess.run(["scontrol", "update", "NodeName=n2", "State=RESUME"], check=True)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert re.search(
        r"robopipe: SLURM job \d+ \(group convert_ds \(rules [a-z_, ]+\)\) pending for \d+ s "
        r"with reason 'ReqNodeNotAvail, "
        r"UnavailableNodes:n2', which does not clear by itself: cancelled",
        output,
    ), output
    assert elapsed < 120
    run_uuid = re.search(r"SLURM run ID: (\S+)", output).group(1)
    assert _run_jobs(run_uuid) == []


def test_sigterm_cancels_the_runs_jobs_and_a_rerun_finishes(
    slurm_cluster, source, tmp_path, snakemake_cmd, run_snakemake, slurm_args
):
    # jobs held until an hour from now: pending (BeginTime), a reason that clears by itself
    held = ("--default-resources", "slurm_extra='--begin=now+3600'")
    command = snakemake_cmd(tmp_path, _config(source), *slurm_args, "convert", *held)
    log = tmp_path / "snakemake.log"
    with log.open("w") as out:
        run = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 120
            while "submitted with SLURM jobid" not in log.read_text():
                assert run.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
            run_uuid = re.search(r"SLURM run ID: (\S+)", log.read_text()).group(1)
            assert _run_jobs(run_uuid), "the held job is queued"
            run.send_signal(signal.SIGTERM)
            stopped = time.monotonic()
            run.wait(timeout=60)
            assert time.monotonic() - stopped < 20, log.read_text()
        finally:
            if run.poll() is None:
                run.kill()
                run.wait()
    assert run.returncode != 0
    assert _run_jobs(run_uuid) == []
    # no lock or half-written output left: the same run without the hold finishes
    run_snakemake(tmp_path, _config(source), *slurm_args, "convert", timeout=300)
    assert (tmp_path / "results/ds/v3.0/meta/info.json").is_file()

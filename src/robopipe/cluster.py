"""SLURM runs that fail fast, clean up after themselves and notice finished jobs promptly.

``install()`` (called by the Snakefile) adds to snakemake-executor-plugin-slurm's ``Executor``:

- a fit check: before the first submission, every job of the DAG (and later each job, group
  jobs included, before it is submitted) is compared with the nodes of its partition (``sinfo``:
  CPUs and memory per node, node count, time limit); a request no node set can satisfy stops the
  run with a message naming the rule, the request and what the partition offers;
- a watchdog: a job pending for a reason that cannot clear by itself (``PartitionConfig``,
  ``BadConstraints``, ``ReqNodeNotAvail``, ...) for ``slurm.stuck_pending_s`` seconds (config)
  is cancelled and fails with that reason;
- interrupts: SIGTERM acts as Ctrl-C; both cancel every job of this run (``scancel`` by the run's
  job name, so jobs whose ``sbatch`` was still in flight go too) and the run exits within
  seconds (the status loop's sleep wakes on shutdown);
- status checks at a quarter of the youngest running job's age, at most
  :data:`MAX_STATUS_INTERVAL_S` apart (but never more often than the plugin's
  ``init_seconds_before_status_checks``, nor later than its own interval): a 10 s job is seen
  finished within a few seconds, a long one within 10 s, instead of after the plugin's growing
  interval (2, 12, 22 ... s up to 180 s);
- the account: left unset (``slurm_account``), the user's default account is read from
  ``sacctmgr`` once, or the jobs are submitted without one, with one line saying which (the
  plugin's own guess runs ``sacct`` with a broken argument and warns on every run).

Relies on snakemake 9.x and snakemake-executor-plugin-slurm 2.x (written against 9.27.1 and
2.8.0): ``Executor.run_jobs``, ``check_active_jobs``, ``cancel_jobs``, ``sleep``,
``run_uuid``, ``wait``, ``next_seconds_between_status_checks``, ``_fallback_account_arg``,
``_job_submission_executor``, ``report_job_error`` and ``workflow.dag.needrun_jobs()``.
``tests/slurm/test_cluster.py`` fails when one of them changes.
"""

from __future__ import annotations

import asyncio
import getpass
import math
import shlex
import signal
import subprocess
import threading
import time
from dataclasses import dataclass

from snakemake_interface_common.exceptions import WorkflowError

# Pending reasons that no amount of waiting resolves (squeue %r); prefixes, as SLURM may append
# details (``ReqNodeNotAvail, UnavailableNodes:n3``).
STUCK_REASONS = (
    "PartitionConfig",
    "BadConstraints",
    "ReqNodeNotAvail",
    "PartitionNodeLimit",
    "PartitionTimeLimit",
    "InvalidAccount",
    "InvalidQOS",
    "DependencyNeverSatisfied",
    "AssocMax",
    "QOSMax",
)
STUCK_PENDING_S = 60  # default of config slurm.stuck_pending_s
# Longest wait between two status checks once a job has run a while: one squeue call for the
# whole run, and a stage whose last job ended waits at most this long for the next stage
# (the quarter-of-age rule alone waited 25 s after 100 s shards: docs/cluster.md).
MAX_STATUS_INTERVAL_S = 10.0
COMMAND_TIMEOUT_S = 30  # any sinfo/squeue/scancel/sacctmgr call


@dataclass(frozen=True)
class Node:
    """A node of a partition: its name, CPUs and memory (MB), as ``sinfo`` reports them."""

    name: str
    cpus: int
    mem_mb: int


@dataclass(frozen=True)
class Partition:
    """A partition's nodes and time limit (minutes; ``None``: no limit)."""

    name: str
    nodes: tuple[Node, ...]
    max_minutes: int | None

    def describe(self) -> str:
        """What the partition offers, in words."""
        cpus = max((n.cpus for n in self.nodes), default=0)
        mem = max((n.mem_mb for n in self.nodes), default=0)
        limit = "no time limit" if self.max_minutes is None else f"{self.max_minutes} min"
        return (
            f"partition '{self.name}' has {len(self.nodes)} node(s) of at most {cpus} CPUs "
            f"and {mem} MB, {limit}"
        )


@dataclass(frozen=True)
class Request:
    """What one SLURM job asks for: nodes, CPUs and memory (MB) per node, minutes."""

    nodes: int
    cpus_per_node: int
    mem_mb_per_node: int
    minutes: int | None

    def describe(self) -> str:
        """The request, in words."""
        limit = "" if self.minutes is None else f", {self.minutes} min"
        return (
            f"{self.nodes} node(s) x {self.cpus_per_node} CPUs and {self.mem_mb_per_node} MB{limit}"
        )


def _run(*command: str) -> str:
    """stdout of a SLURM command; ``WorkflowError`` naming it if it fails or hangs."""
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise WorkflowError(f"robopipe: `{' '.join(command)}` failed: {e}") from e
    if result.returncode != 0:
        raise WorkflowError(f"robopipe: `{' '.join(command)}` failed: {result.stderr.strip()}")
    return result.stdout


def parse_minutes(limit: str) -> int | None:
    """A SLURM time limit (``infinite``, ``[D-]HH:MM:SS``, ``MM:SS``, ``MM``) in whole minutes."""
    if limit in ("infinite", "UNLIMITED", "n/a", ""):
        return None
    days, _, clock = limit.rpartition("-")
    parts = [int(p) for p in clock.split(":")]
    if len(parts) == 1:
        hours, minutes, seconds = 0, parts[0], 0
    elif len(parts) == 2:
        hours, (minutes, seconds) = 0, parts
    else:
        hours, minutes, seconds = parts
    return (int(days or 0) * 24 + hours) * 60 + minutes + (seconds > 0)


def read_partition(name: str | None) -> Partition:
    """The nodes of partition ``name`` (the cluster's default partition if ``None``).

    Raises ``WorkflowError`` if ``sinfo`` fails or knows no such partition.
    """
    rows = [
        line.split("|")
        for line in _run("sinfo", "-h", "-N", "-o", "%P|%N|%c|%m|%l").splitlines()
        if line.strip()
    ]
    if name is None:
        defaults = {p for p, *_ in rows if p.endswith("*")}
        if not defaults:
            raise WorkflowError(
                "robopipe: the SLURM cluster has no default partition; "
                "set slurm_partition under default-resources in the profile"
            )
        name = defaults.pop()
    rows = [r for r in rows if r[0].rstrip("*") == name.rstrip("*")]
    if not rows:
        raise WorkflowError(f"robopipe: `sinfo` knows no SLURM partition '{name}'")
    nodes = {n: Node(n, int(c.rstrip("+")), int(m.rstrip("+"))) for _, n, c, m, _ in rows}
    return Partition(name.rstrip("*"), tuple(nodes.values()), parse_minutes(rows[0][4]))


def request_of(job) -> Request:
    """The request the plugin's ``sbatch`` call makes for a job (or group job)."""
    res = job.resources

    def number(key: str, default: int) -> int:
        value = res.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else default

    nodes = max(1, number("nodes", 1))
    tasks_per_node = math.ceil(max(1, number("tasks", 1)) / nodes)
    cpus = number("cpus_per_task", 0) or job.threads
    cpus_per_node = max(1, cpus) * tasks_per_node
    mem = number("mem_mb", 0)
    if number("mem_mb_per_cpu", 0):
        mem = number("mem_mb_per_cpu", 0) * cpus_per_node
    runtime = number("runtime", 0)
    return Request(nodes, cpus_per_node, mem, runtime or None)


def misfit(request: Request, partition: Partition) -> str | None:
    """Why ``request`` cannot run on ``partition``, or ``None`` if it can."""
    fitting = [
        n
        for n in partition.nodes
        if n.cpus >= request.cpus_per_node and n.mem_mb >= request.mem_mb_per_node
    ]
    if len(fitting) < request.nodes:
        return f"{len(fitting)} node(s) of {partition.name} have its CPUs and memory"
    if (
        request.minutes is not None
        and partition.max_minutes is not None
        and request.minutes > partition.max_minutes
    ):
        return f"{request.minutes} min exceeds the time limit of {partition.name}"
    return None


def job_label(job) -> str:
    """``rule NAME (wildcards)``, or ``group NAME (rules ...)`` for a group job."""
    if job.is_group():
        rules = sorted({j.rule.name for j in job.jobs})
        return f"group {job.groupid} (rules {', '.join(rules)})"
    wildcards = ", ".join(f"{k}={v}" for k, v in job.wildcards_dict.items())
    return f"rule {job.rule.name}" + (f" ({wildcards})" if wildcards else "")


def check_fit(jobs, partitions: dict) -> None:
    """Raise ``WorkflowError`` for the first job whose request its partition cannot satisfy.

    ``partitions`` caches ``read_partition`` results by partition name (``None``: default).
    """
    for job in jobs:
        name = job.resources.get("slurm_partition") or None
        if name not in partitions:
            partitions[name] = read_partition(name)
        partition, request = partitions[name], request_of(job)
        why = misfit(request, partition)
        if why:
            raise WorkflowError(
                f"robopipe: {job_label(job)} asks for {request.describe()}, but "
                f"{partition.describe()} ({why}); lower the request (profiles/slurm, "
                "or the benchmark matrix's workers and nodes) or choose a partition with "
                "larger nodes (slurm_partition)"
            )


def is_stuck(reason: str) -> bool:
    """Whether a pending reason (squeue ``%r``) cannot clear by itself."""
    return reason.startswith(STUCK_REASONS)


def pending_reasons(run_uuid: str) -> dict[str, str]:
    """Pending jobs of this run (by job name): job id -> pending reason; a job array's
    elements one by one (``-r``: ``<jobid>_<index>``, the ids the plugin tracks them by)."""
    user = getpass.getuser()
    out = _run("squeue", "-h", "-r", "-u", user, "--name", run_uuid, "-t", "PD", "-o", "%i|%r")
    return dict(line.split("|", 1) for line in out.splitlines() if "|" in line)


def cancel_run(run_uuid: str, timeout_s: float = 10.0) -> None:
    """``scancel`` every job named ``run_uuid`` and wait (bounded) until squeue lists none."""
    user = getpass.getuser()
    _run("scancel", "-u", user, "--name", run_uuid)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _run("squeue", "-h", "-u", user, "--name", run_uuid, "-o", "%i").strip():
            return
        time.sleep(0.5)


def default_account() -> str | None:
    """The user's default SLURM account (``sacctmgr``), or ``None`` without accounting."""
    try:
        out = _run(
            "sacctmgr", "-n", "-P", "show", "user", getpass.getuser(), "format=DefaultAccount"
        )
    except WorkflowError:
        return None
    return out.strip() or None


def next_status_check_s(current_s: float, floor_s: float, ages_s: list[float]) -> float:
    """Seconds until the next status check: a quarter of the youngest running job's age
    (``ages_s``, seconds since each was first seen), at most :data:`MAX_STATUS_INTERVAL_S`,
    at least ``floor_s`` (the plugin's ``init_seconds_before_status_checks``) and at most
    ``current_s`` (the plugin's own interval); ``current_s`` where no job runs."""
    if not ages_s:
        return current_s
    return min(current_s, max(floor_s, min(min(ages_s) / 4, MAX_STATUS_INTERVAL_S)))


def _interrupt(signum, frame):
    raise KeyboardInterrupt


class _Hooks:
    """The state the hooks keep per executor (partition cache, first sightings of jobs)."""

    def __init__(self, executor):
        self.partitions: dict = {}
        self.first_seen: dict[str, float] = {}
        self.stuck_since: dict[str, float] = {}
        self.started = False
        config = executor.workflow.config.get("slurm", {})
        self.stuck_pending_s = float(config.get("stuck_pending_s", STUCK_PENDING_S))

    def start(self, executor) -> None:
        """Before the first submission (in the main thread, after the scheduler set its own
        SIGTERM handler): check the whole DAG, make SIGTERM a Ctrl-C, settle the account."""
        self.started = True
        dag = getattr(executor.workflow, "dag", None)
        if dag is not None:
            check_fit(dag.needrun_jobs(), self.partitions)
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, _interrupt)
        if executor._fallback_account_arg is None:
            account = default_account()
            executor._fallback_account_arg = f" -A {shlex.quote(account)}" if account else ""
            executor.logger.info(
                f"SLURM account: {account} (your default account in sacctmgr; set "
                "slurm_account in the profile to use another)"
                if account
                else "SLURM account: none (sacctmgr names no default account for you, or the "
                "cluster has no accounting); set slurm_account in the profile if needed"
            )


def install() -> None:
    """Add the hooks to snakemake-executor-plugin-slurm's Executor (once; no-op without it)."""
    try:
        from snakemake_executor_plugin_slurm import Executor
    except ImportError:
        return
    if getattr(Executor, "_robopipe_hooks", False):
        return
    run_jobs, check_active_jobs = Executor.run_jobs, Executor.check_active_jobs
    cancel_jobs = Executor.cancel_jobs

    def hooks(self) -> _Hooks:
        if not hasattr(self, "_robopipe"):
            self._robopipe = _Hooks(self)
        return self._robopipe

    def run_jobs_checked(self, jobs):
        state = hooks(self)
        if not state.started:
            state.start(self)
        check_fit(jobs, state.partitions)
        return run_jobs(self, jobs)

    async def check_active_jobs_watched(self, active_jobs):
        state = hooks(self)
        still = [j async for j in check_active_jobs(self, active_jobs)]
        now = time.monotonic()
        try:
            pending = pending_reasons(self.run_uuid) if still else {}
        except WorkflowError:  # squeue failing once is not fatal: ask again next time
            pending = {}
        for j in still:
            reason = pending.get(j.external_jobid, "")
            since = (
                state.stuck_since.setdefault(j.external_jobid, now) if is_stuck(reason) else None
            )
            if since is not None and now - since >= state.stuck_pending_s:
                _run("scancel", j.external_jobid)
                message = (
                    f"robopipe: SLURM job {j.external_jobid} ({job_label(j.job)}) pending for "
                    f"{now - since:.0f} s with reason '{reason}', which does not clear by "
                    "itself: cancelled. "
                )
                if j.job.is_group():  # snakemake 9 drops the message of a group job's error
                    self.logger.error(message)
                self.report_job_error(j, msg=message)
                continue
            yield j
        ages = [now - state.first_seen.setdefault(j.external_jobid, now) for j in still]
        self.next_seconds_between_status_checks = next_status_check_s(
            self.next_seconds_between_status_checks,
            self.workflow.executor_settings.init_seconds_before_status_checks,
            ages,
        )

    async def sleep_until_shutdown(self):
        deadline = time.monotonic() + self.next_seconds_between_status_checks
        while self.wait and time.monotonic() < deadline:
            await asyncio.sleep(min(0.5, max(0.0, deadline - time.monotonic())))

    def cancel_run_jobs(self, active_jobs):
        self._job_submission_executor.shutdown(wait=True, cancel_futures=True)
        cancel_jobs(self, active_jobs)
        cancel_run(self.run_uuid)

    Executor.run_jobs = run_jobs_checked
    Executor.check_active_jobs = check_active_jobs_watched
    Executor.sleep = sleep_until_shutdown
    Executor.cancel_jobs = cancel_run_jobs
    Executor._robopipe_hooks = True

"""Ranks of a multi-node benchmark scenario: discover them, launch them, combine their results.

An ``n{nodes}`` scenario runs one process (rank) per node. Under SLURM the job holds ``nodes``
nodes and :func:`run_ranks` starts the ranks with ``srun -N nodes -n nodes`` (the rule's job
must be submitted without the executor's own ``srun`` step: the slurm profile gives the
benchmark rule the ``mpi`` resource for that). Without SLURM the same call starts ``nodes``
local processes, so an n2 scenario is testable on one machine.

Every rank runs through this module's command line, ``python -m robopipe.ranks ARGV...``,
which sets ``RANK`` / ``WORLD_SIZE`` from :func:`current_rank` (the variables the loaders read)
and replaces ``{rank}`` in ARGV by the rank, so each rank writes its own result file. The
benchmark's ranks wait for each other before they measure (a barrier of files in the folder of
their result files, ``robopipe.bench.measure.wait_for_ranks``), and
:func:`combine_rank_results` says how far apart they started (``start_skew_s``).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

RANK_PLACEHOLDER = "{rank}"


def current_rank(env: Mapping[str, str] | None = None) -> tuple[int, int]:
    """This process's ``(rank, world_size)``.

    Read from ``SLURM_PROCID`` / ``SLURM_NTASKS`` (set per task by ``srun``), else from
    ``RANK`` / ``WORLD_SIZE`` (torch.distributed's names), else ``(0, 1)``.

    Raises:
        ValueError: a variable is not an integer, or rank is outside ``[0, world_size)``.
    """
    env = os.environ if env is None else env
    for rank_var, size_var in (("SLURM_PROCID", "SLURM_NTASKS"), ("RANK", "WORLD_SIZE")):
        if rank_var in env:
            rank, world_size = int(env[rank_var]), int(env.get(size_var, "1"))
            break
    else:
        rank, world_size = 0, 1
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} outside world size {world_size}")
    return rank, world_size


def current_node(env: Mapping[str, str] | None = None) -> str:
    """This process's node name: ``SLURMD_NODENAME`` (set by SLURM per task), else the host name.

    Simulated nodes of one machine (tools/slurm_local.sh) share a host name but not this one.
    """
    env = os.environ if env is None else env
    return env.get("SLURMD_NODENAME") or socket.gethostname()


def under_slurm(env: Mapping[str, str] | None = None) -> bool:
    """True inside a SLURM allocation (``SLURM_JOB_ID`` set) with ``srun`` on PATH."""
    env = os.environ if env is None else env
    return "SLURM_JOB_ID" in env and shutil.which("srun", path=env.get("PATH")) is not None


def launch_commands(argv: Sequence[str], nodes: int, slurm: bool) -> list[list[str]]:
    """The command lines that start ``nodes`` ranks of ``argv``.

    Under SLURM with ``nodes > 1``: one ``srun -N nodes -n nodes`` command line that starts
    every rank. Otherwise: ``nodes`` command lines, one per rank, to run as local processes
    with ``RANK`` / ``WORLD_SIZE`` set (see :func:`run_ranks`).

    Raises:
        ValueError: ``nodes < 1`` or empty ``argv``.
    """
    if nodes < 1 or not argv:
        raise ValueError(f"need nodes >= 1 and a command, got nodes={nodes}, argv={argv!r}")
    rank_command = [sys.executable, "-m", "robopipe.ranks", *argv]
    if slurm and nodes > 1:
        n = str(nodes)
        return [["srun", "-N", n, "-n", n, "--kill-on-bad-exit=1", *rank_command]]
    return [list(rank_command) for _ in range(nodes)]


def run_ranks(argv: Sequence[str], nodes: int, env: Mapping[str, str] | None = None) -> None:
    """Run ``argv`` as ``nodes`` ranks and wait for all of them.

    Under SLURM (:func:`under_slurm`) with ``nodes > 1`` the ranks run on ``nodes`` nodes via
    ``srun``; otherwise as local processes. ``{rank}`` in ``argv`` becomes each rank's number.

    Raises:
        RuntimeError: a rank (or ``srun``) exited with a non-zero status; the other local
            ranks are then terminated.
    """
    env = dict(os.environ if env is None else env)
    commands = launch_commands(argv, nodes, under_slurm(env))
    if len(commands) == 1 and nodes > 1:
        result = subprocess.run(commands[0], env=env)
        if result.returncode != 0:
            raise RuntimeError(f"srun of {nodes} ranks exited with {result.returncode}: {argv}")
        return
    processes = [
        subprocess.Popen(command, env=_rank_env(env, rank, nodes))
        for rank, command in enumerate(commands)
    ]
    failed = None
    for rank, process in enumerate(processes):
        if process.wait() != 0 and failed is None:
            failed = (rank, process.returncode)
            for other in processes:
                if other.poll() is None:
                    other.terminate()
    if failed is not None:
        raise RuntimeError(f"rank {failed[0]} of {nodes} exited with {failed[1]}: {argv}")


def _rank_env(env: Mapping[str, str], rank: int, world_size: int) -> dict[str, str]:
    """``env`` for a local rank: RANK / WORLD_SIZE set, SLURM's task variables removed."""
    child = {k: v for k, v in env.items() if k not in ("SLURM_PROCID", "SLURM_NTASKS")}
    child.update(RANK=str(rank), WORLD_SIZE=str(world_size))
    return child


def combine_rank_results(paths: Sequence[str | Path]) -> dict:
    """Combine the result files of the ranks of one scenario.

    Each file is a JSON object with ``samples``, ``frames`` (counts) and ``steady_wall_s``
    (seconds of the rank's measuring window), and optionally ``rank``, ``node`` and
    ``measure_start_unix`` (when the rank started measuring, by its node's clock). The ranks
    run at the same time, so the total rate divides the summed counts by the longest window.

    Returns:
        ``{"ranks", "samples", "frames", "wall_s", "samples_per_s", "frames_per_s",
        "start_skew_s", "per_node": [{"rank", "node", "samples", "frames", "wall_s",
        "samples_per_s", "frames_per_s", "measure_start_unix"}, ...]}`` with rates in
        samples/s and frames/s; ``start_skew_s`` is the latest rank's measuring start less the
        earliest's, seconds (None where a file lacks ``measure_start_unix``).

    Raises:
        ValueError: no paths, or a file lacks a key or has a non-positive ``steady_wall_s``.
    """
    if not paths:
        raise ValueError("no rank result files to combine")
    per_node = []
    for index, path in enumerate(paths):
        result = json.loads(Path(path).read_text())
        missing = [k for k in ("samples", "frames", "steady_wall_s") if k not in result]
        if missing or result.get("steady_wall_s", 0) <= 0:
            raise ValueError(f"rank result {path}: missing {missing} or steady_wall_s <= 0")
        wall = float(result["steady_wall_s"])
        rank = result.get("rank", index)
        per_node.append(
            {
                "rank": rank,
                "node": result.get("node", f"rank{rank}"),
                "samples": result["samples"],
                "frames": result["frames"],
                "wall_s": wall,
                "samples_per_s": result["samples"] / wall,
                "frames_per_s": result["frames"] / wall,
                "measure_start_unix": result.get("measure_start_unix"),
            }
        )
    samples = sum(r["samples"] for r in per_node)
    frames = sum(r["frames"] for r in per_node)
    wall = max(r["wall_s"] for r in per_node)
    starts = [r["measure_start_unix"] for r in per_node]
    skew = None if None in starts else max(starts) - min(starts)
    return {
        "ranks": len(per_node),
        "samples": samples,
        "frames": frames,
        "wall_s": wall,
        "samples_per_s": samples / wall,
        "frames_per_s": frames / wall,
        "start_skew_s": skew,
        "per_node": per_node,
    }


def main(argv: Sequence[str]) -> None:
    """Run ``argv`` as this rank: RANK / WORLD_SIZE set, ``{rank}`` replaced (never returns)."""
    if not argv:
        sys.exit("usage: python -m robopipe.ranks COMMAND [ARG...]  ({rank} becomes the rank)")
    rank, world_size = current_rank()
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world_size))
    command = [arg.replace(RANK_PLACEHOLDER, str(rank)) for arg in argv]
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])

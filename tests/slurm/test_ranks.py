"""Ranks of multi-node scenarios: discovery, local launch, SLURM launch, combined results."""

import json
import os
import shlex
import socket
import subprocess
import sys

import pytest

from robopipe.ranks import (
    combine_rank_results,
    current_node,
    current_rank,
    launch_commands,
    run_ranks,
)

# A rank that writes what it sees: RANK, WORLD_SIZE and its node, to out.{rank}.json.
REPORT_RANK = (
    "import json, os, sys; json.dump({k: os.environ.get(k) for k in "
    "('RANK', 'WORLD_SIZE', 'SLURMD_NODENAME')}, open(sys.argv[1], 'w'))"
)


def _report_argv(tmp_path):
    return [sys.executable, "-c", REPORT_RANK, str(tmp_path / "out.{rank}.json")]


def _read(tmp_path, world_size):
    return [json.loads((tmp_path / f"out.{r}.json").read_text()) for r in range(world_size)]


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "RANK": "0", "WORLD_SIZE": "1"}, (1, 2)),
        ({"RANK": "3", "WORLD_SIZE": "4"}, (3, 4)),
        ({}, (0, 1)),
    ],
)
def test_current_rank_prefers_slurm_then_torch_variables(env, expected):
    assert current_rank(env) == expected


def test_current_node_is_slurms_node_name_else_the_host_name():
    assert current_node({"SLURMD_NODENAME": "n2"}) == "n2"
    assert current_node({}) == socket.gethostname()


def test_current_rank_rejects_a_rank_outside_the_world():
    with pytest.raises(ValueError, match="rank 2 outside world size 2"):
        current_rank({"RANK": "2", "WORLD_SIZE": "2"})


def test_launch_commands_use_one_srun_under_slurm_and_one_process_per_rank_otherwise():
    (srun,) = launch_commands(["bench", "x"], 2, slurm=True)
    assert srun[:5] == ["srun", "-N", "2", "-n", "2"]
    assert srun[-4:] == ["-m", "robopipe.ranks", "bench", "x"]
    local = launch_commands(["bench", "x"], 2, slurm=False)
    assert len(local) == 2 and all(c[-2:] == ["bench", "x"] for c in local)
    assert len(launch_commands(["bench"], 1, slurm=True)) == 1
    assert launch_commands(["bench"], 1, slurm=True)[0][0] == sys.executable
    with pytest.raises(ValueError):
        launch_commands([], 2, slurm=False)


def test_local_ranks_each_see_their_rank_and_write_their_own_file(tmp_path):
    env = {**os.environ, "SLURM_PROCID": "0", "SLURM_NTASKS": "1"}  # e.g. inside a 1-task step
    env.pop("SLURM_JOB_ID", None)
    run_ranks(_report_argv(tmp_path), 2, env)
    seen = _read(tmp_path, 2)
    assert [(s["RANK"], s["WORLD_SIZE"]) for s in seen] == [("0", "2"), ("1", "2")]


def test_a_failing_rank_fails_the_run(tmp_path):
    argv = [sys.executable, "-c", "import os, sys; sys.exit(int(os.environ['RANK']) * 3)"]
    env = {k: v for k, v in os.environ.items() if k != "SLURM_JOB_ID"}
    with pytest.raises(RuntimeError, match="rank 1 of 2 exited with 3"):
        run_ranks(argv, 2, env)


def test_combined_results_sum_counts_and_rate_over_the_longest_window(tmp_path):
    paths = []
    for rank, (samples, frames, wall) in enumerate([(100, 300, 2.0), (60, 180, 3.0)]):
        path = tmp_path / f"r{rank}.json"
        path.write_text(
            json.dumps(
                {
                    "rank": rank,
                    "node": f"n{rank + 1}",
                    "samples": samples,
                    "frames": frames,
                    "steady_wall_s": wall,
                }
            )
        )
        paths.append(path)
    combined = combine_rank_results(paths)
    assert (combined["ranks"], combined["samples"], combined["frames"]) == (2, 160, 480)
    assert combined["frames_per_s"] == pytest.approx(480 / 3.0)
    assert [n["frames_per_s"] for n in combined["per_node"]] == [150.0, 60.0]
    assert [n["node"] for n in combined["per_node"]] == ["n1", "n2"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"samples": 1, "frames": 1, "steady_wall_s": 0}))
    with pytest.raises(ValueError, match="bad.json"):
        combine_rank_results([bad])


@pytest.mark.slurm
def test_under_slurm_two_ranks_run_on_two_nodes(slurm_cluster, tmp_path):
    launcher = tmp_path / "launch.py"
    launcher.write_text(
        f"from robopipe.ranks import run_ranks\nrun_ranks({_report_argv(tmp_path)!r}, 2)\n"
    )
    subprocess.run(
        [
            "sbatch",
            "--wait",
            "-N",
            "2",
            "-n",
            "2",
            "-t",
            "5",
            "-o",
            str(tmp_path / "job.log"),
            "--wrap",
            shlex.join([sys.executable, str(launcher)]),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    seen = _read(tmp_path, 2)
    assert [(s["RANK"], s["WORLD_SIZE"]) for s in seen] == [("0", "2"), ("1", "2")]
    assert sorted(s["SLURMD_NODENAME"] for s in seen) == ["n1", "n2"]

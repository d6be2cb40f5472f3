"""A remote v3.0 dataset as a pipeline input, from config alone: served by the Hub stand-in,
named by `url:` or `repo_id` + `revision`, checked where it is by range reads, benchmarked
at its URL, reported; copied locally only for a `local` scenario; a fault in the served
files stops every loader; `episodes:` leaves the other episodes out; the check job retries
within the dataset's retry budget."""

import contextlib
import json
import re
import shutil

import pyarrow.parquet as pq
import pytest

from robopipe.bench import servers
from robopipe.bench.latency import Faults, delaying_proxy
from robopipe.harness.hub_standin import serve_hub

pytestmark = pytest.mark.slow

REMOTE = "robopipe_map_hf_single_cpu_w0_n1"
LOCAL = "robopipe_map_local_single_cpu_w0_n1"


@pytest.fixture
def hub(tmp_path):
    """``hub(folder) -> (standin, env)``: ``folder`` as repo ``local/ds`` (branch main) of a
    Hub stand-in, and a subprocess environment whose huggingface_hub talks to it."""
    with contextlib.ExitStack() as stack:

        def serve(folder):
            standin = stack.enter_context(serve_hub({"local/ds": {"main": folder}}))
            return standin, standin.client_env(tmp_path / "hf_home")

        yield serve


def _config(entry, quick_bench, sources):
    bench = {
        **quick_bench,
        "matrix": {
            "loader": ["robopipe_map"],
            "source": sources,
            "mode": ["single"],
            "encoding": [None],
            "decode": ["cpu"],
            "workers": [0],
            "nodes": [1],
            "exclude": [],
        },
    }
    return {"datasets": {"ds": entry}, "bench": bench}


def test_a_hub_v30_dataset_runs_check_bench_report_where_it_is(
    v30, hub, tmp_path, run_snakemake, quick_bench, file_tree
):
    standin, env = hub(v30)
    config = _config({"repo_id": "local/ds", "revision": "main"}, quick_bench, ["hf"])
    work = tmp_path / "work"
    dry = run_snakemake(work, config, "check", "bench", "report", "-n", "--quiet", "rules", env=env)
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", dry.stdout, re.M))
    assert counts["source_check"] == "1" and counts["bench_scenario"] == "1", dry.stdout
    assert "local_copy" not in counts and "fetch" not in counts and "plan" not in counts
    info = [r for r in standin.requests if r.path.endswith("meta/info.json")]
    assert info and all(r.method in ("GET", "HEAD") for r in standin.requests)  # version read

    run_snakemake(work, config, "--cores", "2", "check", "bench", "report", env=env)
    check = json.loads((work / "results/ds/check.json").read_text())
    assert check["ok"] and check["episodes"] == 4
    scenario = json.loads((work / f"results/bench/ds/{REMOTE}.json").read_text())
    assert scenario["samples_per_s"] > 0 and scenario["source"] == "hf"
    assert (work / "results/report/ds/summary.csv").is_file()
    assert not (work / "results/ds/local_copy").exists()  # never copied locally
    assert not (work / "results/ds/v3.0").exists()  # nor converted


def test_a_local_scenario_makes_a_checked_local_copy_once(
    v30, hub, tmp_path, run_snakemake, quick_bench, file_tree
):
    standin, env = hub(v30)
    entry = {
        "url": standin.url("local/ds", "main"),
        "storage_options": {"endpoint": standin.endpoint},
    }
    config = _config(entry, quick_bench, ["local", "hf"])
    work = tmp_path / "work"
    run_snakemake(work, config, "--cores", "2", "bench", env=env)
    assert file_tree(work / "results/ds/local_copy") == file_tree(v30)
    for name in (LOCAL, REMOTE):
        assert json.loads((work / f"results/bench/ds/{name}.json").read_text())["samples"] > 0
    again = run_snakemake(work, config, "--cores", "2", "bench", "-n", env=env)
    assert "local_copy" not in again.stdout  # made once


def test_a_fault_in_the_served_dataset_stops_every_loader(
    v30, hub, tmp_path, run_snakemake, quick_bench
):
    broken = tmp_path / "broken"
    shutil.copytree(v30, broken)
    victim = sorted(broken.glob("videos/*/chunk-000/file-000.mp4"))[0]
    with open(victim, "r+b") as f:
        f.truncate(victim.stat().st_size // 2)
    standin, env = hub(broken)
    config = _config({"repo_id": "local/ds", "revision": "main"}, quick_bench, ["hf"])
    work = tmp_path / "work"
    result = run_snakemake(work, config, "--cores", "2", "bench", env=env, check=False)
    assert result.returncode != 0
    rel = victim.relative_to(broken).as_posix()
    assert re.search(rf"robopipe: dataset 'ds': episode \d+: file {rel}", result.stderr)
    assert not (work / f"results/bench/ds/{REMOTE}.json").exists()
    report = json.loads((work / "results/logs/ds/check.json").read_text())
    assert {p["file"] for p in report["problems"]} == {rel}


def test_episodes_leave_a_faulty_episode_out(v30, hub, tmp_path, run_snakemake, quick_bench):
    broken = tmp_path / "broken"
    shutil.copytree(v30, broken)
    path = broken / "meta/episodes/chunk-000/file-000.parquet"
    table = pq.read_table(path)
    column = next(c for c in table.column_names if c.endswith("/to_timestamp"))
    last = table.num_rows - 1
    values = table.column(column).to_pylist()
    values[last] += 100.0  # the last episode ends past its video
    pq.write_table(table.set_column(table.column_names.index(column), column, [values]), path)
    standin, env = hub(broken)
    entry = {"repo_id": "local/ds", "revision": "main", "episodes": list(range(last))}
    config = _config(entry, quick_bench, ["hf"])
    work = tmp_path / "work"
    run_snakemake(work, config, "--cores", "2", "bench", env=env)
    check = json.loads((work / "results/ds/check.json").read_text())
    assert check["ok"]
    assert {n["episode"] for n in check["notes"] if n.get("episode") is not None} == {last}
    scenario = json.loads((work / f"results/bench/ds/{REMOTE}.json").read_text())
    assert scenario["samples"] > 0

    entry["episodes"] = list(range(last + 1))
    result = run_snakemake(tmp_path / "all", config, "--cores", "2", "bench", env=env, check=False)
    assert result.returncode != 0 and f"episode {last}" in result.stdout + result.stderr


@pytest.mark.skipif(servers.nginx_binary() is None, reason="nginx is not installed")
def test_the_check_job_retries_within_the_datasets_budget(v30, tmp_path, run_snakemake, file_tree):
    # half the requests faulted (each kind that ends at once); the DAG's one read of
    # info.json retries within the default budget, the check and local_copy jobs within the
    # dataset's
    faults = Faults(0.5, ("429", "503", "reset", "truncate"), retry_after_s=0, seed=1)
    with (
        servers.serve_nginx(v30.parent) as server,
        delaying_proxy(server.url, 0, faults) as proxy,
    ):
        entry = {"url": f"{proxy.url}/ds", "conversion": {"retry_attempts": 1}}
        config = {"datasets": {"ds": entry}}
        one = run_snakemake(tmp_path / "one", config, "--cores", "1", "check", check=False)
        entry["conversion"] = {"retry_attempts": 30, "retry_seconds": 60}
        copy = "results/ds/local_copy"
        run_snakemake(tmp_path / "many", config, "--cores", "1", f"{copy}/meta/info.json")
        injected = {k: v for k, v in proxy.totals().items() if k.startswith("faults_") and v}
    assert one.returncode != 0
    gave_up = [line for line in one.stderr.splitlines() if "gave up after" in line]
    assert gave_up, one.stderr
    line = gave_up[0]  # one line: a file of the dataset, its one attempt, the last error
    assert f"robopipe: dataset 'ds': job source_check: {proxy.url}/ds" in line
    assert "gave up after 1 attempts" in line and "(budget 1 attempts, 120 s)" in line
    assert "bug" not in line
    assert json.loads((tmp_path / "many/results/ds/check.json").read_text())["ok"]
    assert file_tree(tmp_path / "many" / copy) == file_tree(v30)
    assert len(injected) == 4, injected


def test_an_edit_of_a_remote_v30_dataset_reads_its_local_copy(
    v30, hub, tmp_path, run_snakemake, file_tree
):
    """A remote v3.0 input of an edit is a dataset of the config (`url:` here): the edit
    reads its checked local copy (rule local_copy), and its output equals the same edit of
    the folder the stand-in serves. A URL as `source:` itself is refused, naming the way."""
    from robopipe.edits.serial import edit_dataset

    standin, env = hub(v30)
    url = standin.url("local/ds", "main")
    operation = {"type": "delete_episodes", "episode_indices": [1]}
    config = {
        "datasets": {"ds": {"url": url, "storage_options": {"endpoint": standin.endpoint}}},
        "edits": {"ds_clean": {"source": "ds", "operation": operation}},
    }
    work = tmp_path / "work"
    run_snakemake(work, config, "--cores", "2", "edit", env=env)
    edit_dataset(operation, [v30], tmp_path / "expected")
    assert file_tree(work / "results/ds_clean/v3.0") == file_tree(tmp_path / "expected")
    assert file_tree(work / "results/ds/local_copy") == file_tree(v30)

    config["edits"]["ds_clean"]["source"] = url
    refused = run_snakemake(tmp_path / "bare", config, "-n", "edit", env=env, check=False)
    assert refused.returncode != 0
    assert "a remote v3.0 input is a dataset of the config" in refused.stderr

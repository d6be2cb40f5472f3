"""`snakemake edit`: an edit of a v3.0 folder as jobs, its outputs in results/<name>/v3.0;
a bad edit refused before any job runs; an interrupted edit resumes."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from robopipe.conversion.serial import convert_dataset
from robopipe.harness import faults

pytestmark = pytest.mark.slow

# 8 episodes of 3-4 s at 10 fps, one camera: long enough for the quality checks' faults
FAULTY = dict(episodes=8, cameras=1, height=32, width=48, fps=10, min_length=30, max_length=40)


@pytest.fixture(scope="module")
def source(make_v21, tmp_path_factory):
    out = tmp_path_factory.mktemp("src") / "v3.0"
    convert_dataset(
        make_v21(episodes=8, cameras=1), out, name="x",
        data_file_size_in_mb=0.004, video_file_size_in_mb=0.02,
    )  # fmt: skip
    return out


def _config(source, **operations):
    edits = {
        "x_clean": {"source": str(source), "operation": {"type": "delete_episodes",
                                                         "episode_indices": [0, 5]}},
        "x_split": {"source": str(source), "operation": {"type": "split",
                                                         "splits": {"train": 0.75, "val": 0.25}}},
        "x_merged": {"operation": {"type": "merge", "sources": ["x_split_train", "x_split_val"]}},
        "x_restated": {"source": "x_clean", "operation": {"type": "recompute_stats"}},
    }  # fmt: skip
    for name, operation in operations.items():
        edits[name]["operation"] = operation
    return {"datasets": {}, "edits": edits}


def _rows(root):
    return pa.concat_tables(pq.read_table(f) for f in sorted((root / "data").rglob("*.parquet")))


def test_a_killed_edit_resumes(source, tmp_path, snakemake_cmd, run_snakemake, file_tree):
    before = file_tree(source)
    config = _config(source)
    plan = tmp_path / "results/x_clean/edit/plan.json"
    run = subprocess.Popen(
        snakemake_cmd(tmp_path, config, "--cores", "1", "edit"),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        # x_clean's own reports: the edits' plans run in any order, so another edit's report
        # (the glob was results/*/...) can come before x_clean is planned at all, and the
        # plan.stat() below then failed with FileNotFoundError; a report of x_clean's
        # (written under a .partial name, then renamed) means that its plan is complete
        while not list(tmp_path.glob("results/x_clean/edit/reports/data/*/*.json")):
            assert run.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait(timeout=60)
    planned = plan.stat().st_mtime_ns
    run_snakemake(tmp_path, config, "--unlock")  # the lock a killed Snakemake leaves
    result = run_snakemake(tmp_path, config, "--cores", "2", "edit")
    assert "rule edit_publish:" in result.stdout + result.stderr
    assert plan.stat().st_mtime_ns == planned  # what was done is not done again
    results = tmp_path / "results"
    assert _rows(results / "x_merged/v3.0").equals(_rows(source))
    clean = json.loads((results / "x_clean/v3.0/meta/info.json").read_text())
    assert clean["total_episodes"] == 6
    validation = json.loads((results / "x_clean/edit/validation.json").read_text())
    assert validation["reencoded"] == 0 and validation["cut"] >= 1
    # an edit of an edit: x_clean's files linked, its numeric features' stats recomputed
    restated = results / "x_restated/v3.0"
    assert _rows(restated).equals(_rows(results / "x_clean/v3.0"))
    stats = json.loads((restated / "meta/stats.json").read_text())
    assert "q99" in stats["action"] and "q99" not in stats["observation.images.front"]
    # each job's benchmark TSV lies in a folder named by its rule (report/tables.py reads
    # the rule from it)
    rules = {p.parent.name for p in (results / "jobs").rglob("*.tsv")}
    assert rules == {f"edit_{r}" for r in ("plan", "data", "video", "meta", "validate",
                                           "publish")}  # fmt: skip
    assert file_tree(source) == before


@pytest.mark.parametrize(
    ("operation", "message"),
    [
        ({"x_clean": {"type": "delete_episodes", "episode_indices": [3, 8]}},
         "edit 'x_clean': dataset '{source}': episode 8: delete_episodes: no episode 8"),
        ({"x_split": {"type": "split", "splits": {"train": 0.5, "val": 0.25}}},
         "split fractions add up to 0.75, not 1"),
        ({"x_clean": {"type": "remove_feature", "feature_names": ["observation.stat"]}},
         "remove_feature: no feature 'observation.stat'"),
        ({"x_merged": {"type": "merge", "sources": ["x_split_train", "nowhere"]}},
         "source 'nowhere' is no dataset, no edit and no v3.0 folder"),
        ({"x_clean": {"type": "modify_tasks", "episode_tasks": {"9": "wave"}}},
         "edit 'x_clean': dataset '{source}': episode 9: modify_tasks: episode_tasks: no "
         "episode 9"),
    ],
)  # fmt: skip
def test_a_bad_edit_is_refused_before_any_job(source, tmp_path, run_snakemake, operation, message):
    result = run_snakemake(tmp_path, _config(source, **operation), "--cores", "1", "edit",
                           check=False)  # fmt: skip
    assert result.returncode != 0
    assert message.format(source=source.resolve()) in result.stderr
    assert not (tmp_path / "results").exists()


def test_a_typo_gets_the_nearest_key(source, tmp_path, run_snakemake):
    config = _config(source)
    config["edits"]["x_clean"]["operation"]["episode_indice"] = [1]
    result = run_snakemake(tmp_path, config, "-n", "edit", check=False)
    assert result.returncode != 0
    assert "did you mean 'episode_indices'?" in result.stderr


def test_flagged_by_deletes_what_quality_flagged(make_v21, tmp_path, run_snakemake):
    """The quality stage's own quality.json, of a v2.1 source converted with skip_episodes:
    its findings name source episodes, which the edit maps to the v3.0's through plan.json."""
    source = Path(shutil.copytree(make_v21(**FAULTY), tmp_path / "src"))
    faults.inject_nan(source, 3)  # an error; the v3.0's episode 2 (episode 1 is skipped)
    faults.inject_frozen_signal(source, 5)  # a warning; the v3.0's episode 4
    flagged_by = ["nan_inf", "frozen_signal"]
    config = {
        "datasets": {"x": {"path": str(source), "conversion": {"skip_episodes": [1]}}},
        "edits": {
            "x_flagged": {
                "source": "x",
                "operation": {"type": "delete_episodes", "flagged_by": flagged_by},
            },
            "x_warned": {
                "source": "x",
                "operation": {
                    "type": "delete_episodes",
                    "flagged_by": flagged_by,
                    "severity": ["error", "warning"],
                },
            },
        },
    }
    run_snakemake(tmp_path, config, "--cores", "2", "edit")
    results = tmp_path / "results"
    report = json.loads((results / "x/quality/quality.json").read_text())
    flagged = {
        (f["check"], f["severity"], f["episode_index"])
        for f in report["findings"]
        if f["check"] in flagged_by
    }
    assert flagged == {("nan_inf", "error", 3), ("frozen_signal", "warning", 5)}
    converted = _episodes(results / "x/v3.0")
    assert len(converted) == 7
    for name, deleted in (("x_flagged", {2}), ("x_warned", {2, 4})):
        edited = _episodes(results / f"{name}/v3.0")
        assert edited == [e for i, e in enumerate(converted) if i not in deleted]


def _episodes(root):
    """Each episode's observation.state rows (bytes, so that NaN compares), in order."""
    rows = _rows(root)
    states = rows["observation.state"].to_pylist()
    episodes = {}
    for episode, state in zip(rows["episode_index"].to_pylist(), states, strict=True):
        episodes.setdefault(episode, []).append(np.asarray(state, np.float32).tobytes())
    return [episodes[e] for e in sorted(episodes)]


def test_only_the_edit_rules_make_an_edit(source, tmp_path, run_snakemake):
    """The conversion's publish rule is no candidate for an edit's output (its wildcard
    constraint leaves the edits' names out), so the DAG is built without a failed input
    function."""
    result = run_snakemake(tmp_path, _config(source), "-n", "edit")
    output = result.stdout + result.stderr
    assert "InputFunctionException" not in output
    assert "edit_publish" in output and "rule publish" not in output


def test_an_edits_output_is_a_dataset_checked_pushed_and_benchmarked(
    make_v21, tmp_path, run_snakemake, file_tree, quick_bench
):
    """An edit's output takes the quality, push and benchmark rules like a configured
    dataset: its own quality.json (with its own episode indices), a later edit's
    ``flagged_by`` of it, a push of it, a scenario on it; and a second run has nothing to do
    (its check is not rerun by a folder digest taken before it was made)."""
    source = Path(shutil.copytree(make_v21(**FAULTY), tmp_path / "src"))
    faults.inject_nan(source, 3)  # x_clean's episode 2 (episode 0 is deleted)
    pushed = tmp_path / "pushed"
    scenario = "robopipe_map_local_single_cpu_w0_n1"
    config = {
        "datasets": {"x": {"path": str(source)}},
        "edits": {
            "x_clean": {
                "source": "x",
                "operation": {"type": "delete_episodes", "episode_indices": [0]},
                "push": {"url": str(pushed)},
            },
            "x_fixed": {
                "source": "x_clean",
                "operation": {"type": "delete_episodes", "flagged_by": ["nan_inf"]},
            },
        },
        "bench": {
            "matrix": {"loader": ["robopipe_map"], "source": ["local"], "mode": ["single"],
                       "encoding": [None], "decode": ["cpu"], "workers": [0], "nodes": [1]},
            **quick_bench,
        },
    }  # fmt: skip
    dry = run_snakemake(tmp_path / "dry", config, "convert", "-n", "--quiet", "rules")
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", dry.stdout, re.M))
    assert counts.get("publish") == "1", dry.stdout
    assert not [rule for rule in counts if rule.startswith("edit_")]  # datasets: only
    copy = "results/x_clean/copies/original"  # its files listed from the edit's plan
    targets = ["edit", "push", f"results/bench/x_clean/{scenario}.json", f"{copy}/copy.json"]
    run_snakemake(tmp_path, config, "--cores", "2", *targets)
    results = tmp_path / "results"
    report = json.loads((results / "x_clean/quality/quality.json").read_text())
    assert report["dataset"] == "x_clean" and report["episodes"] == 7
    assert {f["episode_index"] for f in report["findings"] if f["check"] == "nan_inf"} == {2}
    clean = _episodes(results / "x_clean/v3.0")
    assert _episodes(results / "x_fixed/v3.0") == clean[:2] + clean[3:]
    assert file_tree(pushed) == file_tree(results / "x_clean/v3.0")
    assert json.loads((results / f"bench/x_clean/{scenario}.json").read_text())["samples"] > 0
    copied, clean = file_tree(tmp_path / copy / "v3.0"), file_tree(results / "x_clean/v3.0")
    files = {p: h for p, h in clean.items() if not p.startswith("meta/")}
    assert files and {p: copied.get(p) for p in files} == files
    again = run_snakemake(tmp_path, config, "-n", *targets)
    assert "Nothing to be done" in again.stdout + again.stderr

"""A v3.0 folder as a pipeline input: checked, then benchmarked and copied where it is, never
converted nor copied into results/; a v3.0 folder that fails the check runs no loader."""

import json
import shutil

import pytest

pytestmark = pytest.mark.slow

SCENARIO = "robopipe_map_local_single_cpu_w0_n1"


def _config(root, quick_bench):
    bench = {
        **quick_bench,
        "matrix": {
            "loader": ["robopipe_map"],
            "source": ["local"],
            "mode": ["single"],
            "encoding": [None, "jpeg90"],
            "decode": ["cpu"],
            "workers": [0],
            "nodes": [1],
            "exclude": [],
        },
    }
    return {"datasets": {"ds": {"path": str(root)}}, "bench": bench}


def test_a_v30_folder_is_checked_then_benchmarked_where_it_is(
    v30, tmp_path, run_snakemake, quick_bench, file_tree
):
    before = file_tree(v30)
    result = run_snakemake(tmp_path, _config(v30, quick_bench), "--cores", "2", "check", "bench")
    out = result.stdout + result.stderr
    for rule in ("plan", "shard", "aggregate_data", "publish"):
        assert f"rule {rule}:" not in out
    check = json.loads((tmp_path / "results/ds/check.json").read_text())
    assert check["ok"] and check["problems"] == []
    scenario = json.loads((tmp_path / f"results/bench/ds/{SCENARIO}.json").read_text())
    assert scenario["samples_per_s"] > 0
    copy = json.loads((tmp_path / "results/ds/copies/jpeg90/copy.json").read_text())
    assert copy["frames"] > 0
    assert not (tmp_path / "results/ds/v3.0").exists()  # read where it is
    assert file_tree(v30) == before  # and left unchanged


def test_a_v30_folder_that_fails_the_check_runs_no_loader(
    v30, tmp_path, run_snakemake, quick_bench
):
    broken = tmp_path / "broken"
    shutil.copytree(v30, broken)
    next(broken.glob("videos/*/chunk-000/file-000.mp4")).unlink()
    run = tmp_path / "run"
    result = run_snakemake(run, _config(broken, quick_bench), "--cores", "2", "bench", check=False)
    assert result.returncode != 0
    assert "robopipe: dataset 'ds'" in result.stdout + result.stderr
    assert not (run / f"results/bench/ds/{SCENARIO}.json").exists()


def test_a_v30_folder_is_pushed_as_it_is(v30, tmp_path, run_snakemake, quick_bench, file_tree):
    target = tmp_path / "published"
    config = _config(v30, quick_bench)
    config["datasets"]["ds"]["push"] = {"url": str(target)}
    run_snakemake(tmp_path / "run", config, "--cores", "2", "push")
    record = json.loads((tmp_path / "run/results/ds/push.json").read_text())
    assert record["uploaded_files"] == record["files"] > 0
    assert file_tree(target) == file_tree(v30)

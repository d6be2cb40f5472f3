"""The robomimic rules as Snakemake runs them, and the HDF5 loader's benchmark scenarios."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from robopipe.bench.runner import Settings, run_scenario
from robopipe.conversion.serial import convert_dataset
from robopipe.robomimic.generate import generate_robomimic
from robopipe.robomimic.robo import write_robo
from robopipe.robomimic.to_v21 import RobomimicOptions, convert_robomimic
from robopipe.scenario_result import check_scenario_result

GENERATE = {"demos": 7, "height": 32, "width": 48, "min_length": 10, "max_length": 20}
OPTIONS = {"codec": "h264_lossless", "demos_per_batch": 3}
CONVERSION = {"episodes_per_shard": 4}
WORKFLOW_CONFIG = {
    "datasets": {"rm": {"robomimic": {"generate": GENERATE, **OPTIONS}, "conversion": CONVERSION}}
}


@pytest.fixture(scope="module")
def workflow_run(tmp_path_factory, run_snakemake) -> Path:
    """A ``snakemake convert`` run of a generated robomimic dataset ``rm``; its workdir."""
    workdir = tmp_path_factory.mktemp("workflow")
    run_snakemake(workdir, WORKFLOW_CONFIG, "--cores", "2", "convert")
    return workdir


def test_workflow_output_equals_the_in_process_conversion(workflow_run, tmp_path, file_tree):
    results = workflow_run / "results/rm"
    hdf5 = generate_robomimic(tmp_path / "rm.hdf5", **GENERATE)
    v21 = convert_robomimic(hdf5, tmp_path / "v21", name="rm", options=RobomimicOptions(**OPTIONS))
    convert_dataset(v21, tmp_path / "v3.0", name="rm", **CONVERSION)
    assert file_tree(results / "robomimic_v21") == file_tree(v21)
    assert file_tree(results / "v3.0") == file_tree(tmp_path / "v3.0")
    plan = json.loads((results / "robomimic/plan.json").read_text())
    assert [b["id"] for b in plan["batches"]] == ["batch-000", "batch-001", "batch-002"]
    for batch in plan["batches"]:
        assert (workflow_run / f"results/jobs/rm/robomimic_batch/{batch['id']}.tsv").is_file()
    episodes = pq.read_table(results / "v3.0/meta/episodes/chunk-000/file-000.parquet")
    assert episodes.column("robomimic/demo").to_pylist() == [f"demo_{i}" for i in range(7)]


def test_tar_scenario_pulls_in_the_robo_rule(workflow_run, run_snakemake, quick_bench):
    """Run before the robo_run fixture: the bench job's robo archive is made by its rule."""
    target = "results/bench/rm/robopipe_seq_tar_local_seq4b3_cpu_w0_n1.json"
    config = {**WORKFLOW_CONFIG, "bench": quick_bench}
    out = run_snakemake(workflow_run, config, "--cores", "1", target)
    assert "robomimic_robo" in out.stdout + out.stderr
    result = json.loads((workflow_run / target).read_text())
    assert (result["loader"], result["batch_size"]) == ("robopipe_seq_tar", 3)
    assert result["samples"] > 0


@pytest.fixture(scope="module")
def robo_run(workflow_run, run_snakemake) -> Path:
    """``workflow_run`` after ``snakemake results/rm/robomimic/robo.tar`` (rule robomimic_robo)."""
    run_snakemake(workflow_run, WORKFLOW_CONFIG, "--cores", "1", "results/rm/robomimic/robo.tar")
    return workflow_run


def test_robo_rule_writes_the_archive(robo_run, tmp_path):
    written = robo_run / "results/rm/robomimic/robo.tar"
    expected = write_robo(robo_run / "results/rm/robomimic/generated.hdf5", tmp_path / "r.tar")
    with tarfile.open(written) as got, tarfile.open(expected) as want:
        assert (
            got.getnames()
            == want.getnames()
            == ["metadata.json", "masks.json", *(f"demo_{i}.npz" for i in range(7))]
        )
        for name in want.getnames():
            assert got.extractfile(name).read() == want.extractfile(name).read(), name
    assert (robo_run / "results/jobs/rm/robomimic_robo/robomimic_robo.tsv").is_file()


SETTINGS = dict(batch_size=4, warmup_batches=1, steady_s=0.3, probe_samples=4)
SEQ4 = {"seq4": {key: [0, 0.05, 0.1, 0.15] for key in ("cameras", "observation.state", "action")}}


@pytest.mark.parametrize(
    ("loader", "mode", "frames_per_sample"),
    [("robomimic_hdf5_none", "single", 2), ("robomimic_hdf5_low_dim", "seq4", 8),
     ("robomimic_hdf5_all", "sarm", 16), ("robopipe_map", "seq4", 8),
     ("robopipe_seq_all", "seq4", 8), ("robopipe_seq_none", "single", 2),
     ("robopipe_seq_lru", "seq4", 8), ("robopipe_seq_compressed", "single", 2),
     ("robomimic_seq_low_dim", "seq4", 8), ("robopipe_seq_tar", "seq4b3", 8),
     ("robopipe_seq_all", "seq2b5r8", 4), ("robopipe_seq_tar", "singler16", 2)],
)  # fmt: skip
def test_bench_scenarios(robo_run, monkeypatch, loader, mode, frames_per_sample):
    if loader.startswith("robomimic_seq_"):
        pytest.importorskip("robomimic", reason="robomimic 0.3.0 is not installed")
    monkeypatch.chdir(robo_run)  # the plan names the HDF5 file relative to the workdir
    settings = Settings(**SETTINGS, windows=SEQ4)
    result = run_scenario("rm", "results/rm/v3.0", f"{loader}_local_{mode}_cpu_w0_n1", settings)
    assert (result["loader"], result["mode"], result["workers"]) == (loader, mode, 0)
    assert result["batch_size"] == {"seq4b3": 3, "seq2b5r8": 5}.get(mode, SETTINGS["batch_size"])
    assert result["samples"] > 0 and result["samples_per_s"] > 0
    assert result["frames"] == frames_per_sample * result["samples"]  # 2 cameras x window
    assert result["latency_ms"]["p50"] > 0
    check_scenario_result(result, "result.json")  # the result schema knows every loader


def test_hdf5_scenario_needs_a_robomimic_dataset(workflow_run):
    with pytest.raises(ValueError, match="no robomimic plan"):
        run_scenario(
            "rm",
            workflow_run / "results/rm/elsewhere/v3.0",
            "robomimic_hdf5_all_local_single_cpu_w0_n1",
            Settings(**SETTINGS),
        )

"""The loader registry: names, the schemas' enums, when a loader runs, what it can run."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from robopipe.bench.registry import LOADERS, LoaderSpec, get_loader
from robopipe.bench.scenarios import LOADERS as SCENARIO_LOADERS
from robopipe.bench.scenarios import parse_scenario

REPO = Path(__file__).resolve().parents[2]


def test_schemas_enumerate_the_registry_in_its_order():
    config = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    matrix = config["properties"]["bench"]["properties"]["matrix"]["properties"]
    assert matrix["loader"]["items"]["enum"] == list(LOADERS)
    result = yaml.safe_load((REPO / "src/robopipe/scenario_result.schema.yaml").read_text())
    assert result["properties"]["loader"]["enum"] == list(LOADERS)
    assert tuple(LOADERS) == SCENARIO_LOADERS


def test_every_spec_is_filed_under_its_name():
    assert all(name == spec.name for name, spec in LOADERS.items())


def test_get_loader_names_the_valid_loaders():
    assert get_loader("robopipe_map") is LOADERS["robopipe_map"]
    with pytest.raises(ValueError, match="unknown loader 'robopipe_mapp'.*robopipe_map, "):
        get_loader("robopipe_mapp")


PEERS = {"lerobot": "0.6.1", "lerobot-lancedb": "0.3.1"}


def _applies(name: str) -> list[bool]:
    """(neither, peer packages only, robomimic source only, both)."""
    spec = get_loader(name)
    return [
        spec.applies(robomimic_source=robomimic, peers=PEERS if lerobot else {})
        for robomimic, lerobot in ((False, False), (False, True), (True, False), (True, True))
    ]


@pytest.mark.parametrize("name", list(LOADERS))
def test_applies_as_the_workflow_chose_before_the_registry(name):
    # the rule that workflow/rules/common.smk's bench_scenarios applied to loader names
    expected = [
        not (name.startswith(("lerobot_", "lancedb_")) and not lerobot)
        and not ((name.startswith("robomimic_hdf5_") or "_seq_" in name) and not robomimic)
        for robomimic, lerobot in ((False, False), (False, True), (True, False), (True, True))
    ]
    assert _applies(name) == expected


def test_applies_examples():
    assert _applies("robopipe_map") == [True, True, True, True]
    assert _applies("lerobot_stream") == [False, True, False, True]
    assert _applies("robomimic_hdf5_all") == [False, False, True, True]
    assert _applies("robopipe_seq_tar") == [False, False, True, True]
    assert _applies("lancedb_map") == [False, True, False, True]


def test_a_peer_runs_only_where_its_package_is():
    lance = get_loader("lancedb_map")
    assert not lance.applies(robomimic_source=False, peers={"lerobot": "0.6.1"})
    assert get_loader("lerobot_map").applies(robomimic_source=False, peers={"lerobot": "0.6.1"})


def test_the_lance_copy_is_read_by_its_loader_only():
    lance, ours = get_loader("lancedb_map"), get_loader("robopipe_map")
    assert lance.reads("lance") and not lance.reads(None) and not lance.reads("jpeg90")
    assert ours.reads(None) and ours.reads("jpeg90") and not ours.reads("lance")


def test_peers_are_lerobot_lancedb_and_robomimic():
    peers = {name: spec.peer_package for name, spec in LOADERS.items() if spec.peer}
    assert peers == {
        "lerobot_map": "lerobot",
        "lerobot_stream": "lerobot",
        "lancedb_map": "lerobot-lancedb",
        "robomimic_seq_none": "robomimic",
        "robomimic_seq_low_dim": "robomimic",
        "robomimic_seq_all": "robomimic",
    }
    assert not any(spec.peer_package for spec in LOADERS.values() if not spec.peer)


def test_flags():
    assert {n for n, s in LOADERS.items() if s.sequence} == {n for n in LOADERS if "_seq_" in n}
    assert {n for n, s in LOADERS.items() if s.stream} == {
        "robopipe_stream",
        "lerobot_stream",
        "robopipe_seq_tar",
    }
    assert [n for n, s in LOADERS.items() if s.robo_archive] == ["robopipe_seq_tar"]
    assert [n for n, s in LOADERS.items() if s.sized_cache] == ["robopipe_seq_lru"]
    assert get_loader("robomimic_hdf5_low_dim").cache_mode == "low_dim"
    assert get_loader("robomimic_seq_none").cache_mode == "none"
    assert get_loader("robopipe_seq_tar").cache_mode is None


@pytest.mark.parametrize(
    ("scenario", "problem"),
    [
        ("robopipe_stream_s3_sarm_cuda_w3_n2", None),
        ("robopipe_map_hf_single_cuda_w0_n1", None),
        ("lerobot_map_local_single_cpu_w2_n2", None),
        ("robomimic_hdf5_all_local_single_cpu_w2_n2", None),
        ("lerobot_map_http_single_cpu_w2_n1", "lerobot_map reads local files only"),
        ("lerobot_stream_hf_single_cpu_w2_n1", None),
        ("lerobot_stream_s3_single_cpu_w2_n1", "lerobot_stream reads local files and hf only"),
        ("lancedb_map_s3_single_elance_cpu_w2_n1", None),
        ("lancedb_map_local_single_cpu_w2_n1", "lancedb_map reads the lance copy only"),
        ("robopipe_map_local_single_elance_cpu_w2_n1", "robopipe_map reads no lance copy"),
        ("robomimic_hdf5_none_local_single_cuda_w0_n1", "robomimic_hdf5_none runs on cpu only"),
        ("robopipe_seq_all_local_seq10_cpu_w0_n2", "robopipe_seq_all runs on one node only"),
    ],
)
def test_check(scenario, problem):
    spec = get_loader(parse_scenario(scenario).loader)
    if problem is None:
        spec.check(parse_scenario(scenario))
    else:
        with pytest.raises(ValueError, match=f"^{scenario}: {problem}$"):
            spec.check(parse_scenario(scenario))


def test_dataset_class_imports_on_demand():
    from robopipe.loading import MapDataset
    from robopipe.robomimic.robo import RoboTarDataset

    assert get_loader("robopipe_map").dataset_class() is MapDataset
    assert get_loader("robopipe_seq_tar").dataset_class() is RoboTarDataset
    missing = LoaderSpec("x", "robopipe_no_such_module:Thing", peer=False)
    with pytest.raises(ImportError):
        missing.dataset_class()


def test_every_robopipe_dataset_class_exists():
    for spec in LOADERS.values():
        if spec.dataset.startswith("robopipe."):
            assert isinstance(spec.dataset_class(), type), spec.name


def test_registry_imports_nothing_heavy():
    # Snakemake imports it at parse time, through robopipe.bench.scenarios
    code = (
        "import sys, robopipe.bench.registry, robopipe.bench.scenarios; "
        "print(sorted(m for m in ('torch', 'numpy', 'h5py', 'pandas', 'av') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"

"""Peers in the same run: the peer interpreter, the equality check against robopipe's items,
and (with the peer environment, tools/install.sh --peers) LeRobotDataset,
StreamingLeRobotDataset from the Hub stand-in and LanceDBDataset on the lance copy, locally and
from moto's S3, each through the runner."""

from pathlib import Path

import jsonschema
import pytest
import torch

from robopipe import peer_env
from robopipe.bench import peers
from robopipe.bench.runner import Settings, run_scenario
from robopipe.conversion.serial import convert_dataset
from robopipe.copies.lance import make_lance_copy
from robopipe.errors import DatasetError
from robopipe.loading import MapDataset, mode_delta_timestamps, read_meta
from robopipe.scenario_result import scenario_schema
from robopipe.workflow.bench import skipped_peers

REPO = Path(__file__).resolve().parents[2]
PEER_PYTHON = str(REPO / peer_env.DEFAULT_PEER_PYTHON)
HAS_PEERS = "lerobot-lancedb" in peer_env.peer_packages(PEER_PYTHON)
needs_peers = pytest.mark.skipif(
    not HAS_PEERS, reason="no peer environment with lerobot-lancedb (tools/install.sh --peers)"
)
QUICK = Settings(batch_size=4, warmup_batches=1, steady_s=0.5, probe_samples=8)


def test_peer_python_defaults_to_the_venv_in_the_workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert peer_env.peer_python({}) is None
    assert peer_env.peer_python({"lerobot_python": "/x/python"}) == "/x/python"
    venv = tmp_path / peer_env.DEFAULT_PEER_PYTHON
    venv.parent.mkdir(parents=True)
    venv.touch()
    assert peer_env.peer_python({}) == peer_env.DEFAULT_PEER_PYTHON
    assert peer_env.peer_python({"lerobot_python": None}) is None  # turned off


def test_without_peers_the_run_says_what_it_skips(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    matrix = {"loader": ["robopipe_map", "lerobot_map", "lancedb_map"]}
    assert skipped_peers({"matrix": matrix}) == {
        "lerobot_map": peer_env.NO_PEERS,
        "lancedb_map": peer_env.NO_PEERS,
    }
    assert peer_env.peer_packages(None) == {}
    assert peer_env.peer_packages(str(tmp_path / "no-python")) == {}


def test_lance_reads_moto_with_s3fs_options():
    options = {
        "key": "k",
        "secret": "s",
        "client_kwargs": {"endpoint_url": "http://127.0.0.1:9", "region_name": "eu-west-1"},
    }
    assert peers._lance_options(options) == {
        "aws_endpoint": "http://127.0.0.1:9",
        "aws_access_key_id": "k",
        "aws_secret_access_key": "s",
        "aws_region": "eu-west-1",
        "allow_http": "true",
    }


def _items(root, mode, indices):
    meta = read_meta(root)
    delta = mode_delta_timestamps(mode, meta.camera_keys, meta.fps, {})
    ds = MapDataset(root, delta_timestamps=delta)
    return [ds[i] for i in indices], delta


def test_check_items_finds_equal_and_different_items(v30):
    items, delta = _items(v30, "sarm", [0, 17, 40])
    same = peers.check_items(items, v30, delta, "uint8")
    assert same["equal"] and same["indices"] == [0, 17, 40] and not same["mismatches"]
    assert same["dtypes"]["observation.images.front"] == "uint8"
    assert "observation.state_is_pad" in same["keys_compared"]
    items[1]["observation.images.front"][0, 0, 0, 0] ^= 1
    items[2]["observation.state"] = items[2]["observation.state"].double()
    items[2]["extra"] = torch.zeros(1)
    differ = peers.check_items(items, v30, delta, "uint8")
    assert not differ["equal"] and differ["only_peer_keys"] == ["extra"]
    found = {(m["index"], m["key"]): m["difference"] for m in differ["mismatches"]}
    assert found[(17, "observation.images.front")].startswith("values differ, max abs diff")
    assert found[(40, "observation.state")] == "dtype torch.float64 != torch.float32"


@pytest.fixture(scope="module")
def single_file(make_v21, tmp_path_factory) -> Path:
    """6 episodes whose videos are one file per camera (StreamingLeRobotDataset of lerobot
    0.6.1 reads a frame at ``index / fps`` in the episode's file, right only then)."""
    source = make_v21(episodes=6, cameras=2, fps=10, min_length=12, max_length=30)
    out = tmp_path_factory.mktemp("peers") / "one" / "v3.0"
    convert_dataset(source, out, name="one")
    return out


@pytest.fixture(scope="module")
def lance_copy(single_file) -> Path:
    copy = single_file.parents[1] / "copies" / "lance"
    measured = make_lance_copy(single_file, copy / "v3.0", copy / "copy.json", PEER_PYTHON)
    assert measured["fidelity"]["lossless"] and measured["fidelity"]["files_compared"] == 2
    assert measured["source"] == str(single_file.resolve()) and measured["encode_s"] > 0
    assert measured["converter"] == "lerobot-lancedb 0.3.1" and measured["kind"] == "lance"
    assert 0 < measured["frame_bytes"] < measured["bytes"] < measured["raw_bytes"]
    return copy / "v3.0"


def _peer_result(root, scenario, **settings):
    chosen = Settings(**{**QUICK.__dict__, "lerobot_python": PEER_PYTHON, **settings})
    result = run_scenario("one", root, scenario, chosen)
    jsonschema.validate(result, scenario_schema())
    check = result["peer_check"]
    assert check["equal"], check["mismatches"]
    assert len(check["indices"]) == peers.CHECK_ITEMS and check["image_dtype"] == "uint8"
    assert check["dtypes"]["observation.images.front"] == "uint8"
    assert not check["only_peer_keys"] and not check["only_robopipe_keys"]
    return result


@needs_peers
@pytest.mark.parametrize(
    "scenario", ["lerobot_map_local_sarm_cpu_w0_n1", "lerobot_stream_local_single_cpu_w0_n1"]
)
def test_lerobot_loaders_give_robopipes_items(single_file, scenario):
    result = _peer_result(single_file, scenario)
    assert result["peer_version"] == "lerobot 0.6.1" and result["samples"] > 0


@needs_peers
def test_streaming_lerobot_dataset_from_the_hub_stand_in(single_file, monkeypatch, tmp_path):
    from huggingface_hub import constants

    from robopipe.harness.hub_standin import serve_hub

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    with serve_hub({"local/one": {"v3.0": single_file, "main": single_file}}) as hub:
        result = _peer_result(
            single_file,
            "lerobot_stream_hf_single_cpu_w0_n1",
            sources={"hf": hub.url("local/one", "v3.0")},
            storage_options={"hf": {"endpoint": hub.endpoint}},
            latency_ms=10,
        )
    assert result["network_latency_ms"] == 10


@needs_peers
@pytest.mark.parametrize(
    "scenario",
    ["lancedb_map_local_sarm_elance_cpu_w0_n1", "lancedb_map_s3_single_elance_cpu_w0_n1"],
)
def test_lancedb_dataset_on_the_lance_copy(lance_copy, scenario):
    result = _peer_result(lance_copy, scenario)
    assert result["peer_version"] == "lerobot-lancedb 0.3.1" and result["encoding"] == "lance"


@needs_peers
def test_the_lance_copy_needs_the_peer_environment(single_file, tmp_path):
    with pytest.raises(DatasetError, match="lerobot-lance-convert"):
        make_lance_copy(single_file, tmp_path / "v3.0", tmp_path / "copy.json", None)
    assert not (tmp_path / "v3.0").exists()


def test_the_workflow_pairs_the_lance_copy_with_its_loader_only(monkeypatch):
    from robopipe.workflow import bench

    monkeypatch.setattr(bench, "peer_packages", lambda python: {"lerobot-lancedb": "0.3.1"})
    matrix = {
        "loader": ["robopipe_map", "lancedb_map"],
        "source": ["local"],
        "mode": ["single"],
        "encoding": [None, "lance"],
        "decode": ["cpu"],
        "workers": [2],
        "nodes": [1],
    }
    names = bench.scenarios({"matrix": matrix, "lerobot_python": "python3"}, False)
    assert names == [
        "lancedb_map_local_single_elance_cpu_w2_n1",
        "robopipe_map_local_single_cpu_w2_n1",
    ]
    # no decode ceiling of the lance copy: its mp4s are the dataset's own
    assert bench.ceilings("d", names) == ["results/bench/d/ceiling.json"]
    assert bench.scenario_dataset("d", names[0], "x") == (
        "results/d/copies/lance/v3.0/meta/info.json"
    )


def test_check_items_compares_with_the_same_episode_selection(v30):
    meta = read_meta(v30)
    delta = mode_delta_timestamps("sarm", meta.camera_keys, meta.fps, {})
    chosen = MapDataset(v30, delta_timestamps=delta, episodes=[1, 3])
    items = [chosen[0], chosen[len(chosen) - 1]]
    assert int(items[0]["episode_index"]) == 1 and int(items[1]["episode_index"]) == 3
    same = peers.check_items(items, v30, delta, "uint8", episodes=[1, 3])
    assert same["equal"] and same["episodes"] == [1, 3]
    assert same["indices"] == [int(i["index"]) for i in items] and same["indices"][0] > 0
    # an item of an episode left out is a mismatch, not compared with another frame
    outside = MapDataset(v30, delta_timestamps=delta, episodes=[0])[0]
    differ = peers.check_items([*items, outside], v30, delta, "uint8", episodes=[1, 3])
    assert not differ["equal"]
    assert differ["mismatches"] == [
        {"index": 0, "key": "index", "difference": "frame 0 is not in the selected episodes [1, 3]"}
    ]


def test_a_peer_that_cannot_select_episodes_is_skipped(tmp_path, monkeypatch):
    from robopipe.workflow import bench

    monkeypatch.setattr(bench, "peer_packages", lambda python: {"lerobot": "0.6.1"})
    matrix = {
        "loader": ["robopipe_stream", "lerobot_map", "lerobot_stream"],
        "source": ["local"],
        "mode": ["single"],
        "decode": ["cpu"],
        "workers": [0],
        "nodes": [1],
    }
    config = {"matrix": matrix, "lerobot_python": "python3"}
    every = bench.scenarios(config, False)
    assert "lerobot_stream_local_single_cpu_w0_n1" in every and len(every) == 3
    assert sorted(bench.scenarios(config, False, episodes_selected=True)) == [
        "lerobot_map_local_single_cpu_w0_n1",
        "robopipe_stream_local_single_cpu_w0_n1",
    ]
    assert bench.skipped_peers(config) == {}
    assert bench.skipped_peers(config, episodes_selected=True) == {
        "lerobot_stream": f"episodes are selected and lerobot_stream {peers.CANNOT_SELECT}"
    }
    # the runner refuses it too, before the peer reads anything
    monkeypatch.setattr(peers, "peer_version", lambda python, package: "lerobot 0.6.1")
    chosen = Settings(**{**QUICK.__dict__, "lerobot_python": "python3", "episodes": [1]})
    with pytest.raises(ValueError, match="cannot select episodes"):
        run_scenario("one", tmp_path, "lerobot_stream_local_single_cpu_w0_n1", chosen)


@needs_peers
@pytest.mark.parametrize(
    ("fixture", "scenario"),
    [
        ("single_file", "lerobot_map_local_sarm_cpu_w0_n1"),
        ("lance_copy", "lancedb_map_local_single_elance_cpu_w0_n1"),
    ],
)
def test_peers_read_the_selected_episodes_only(request, fixture, scenario):
    root = request.getfixturevalue(fixture)
    result = _peer_result(root, scenario, episodes=[1, 4])
    check = result["peer_check"]
    assert check["episodes"] == [1, 4]
    source = request.getfixturevalue("single_file")
    frames = MapDataset(source, episodes=[1, 4]).frames
    assert set(check["indices"]) <= set(frames.tolist())

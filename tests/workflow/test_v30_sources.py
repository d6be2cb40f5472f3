"""v3.0 sources named by `url:` or `repo_id` + `revision`: the version (from the revision's
name, else one read of meta/info.json), the URL, the bench source that reads it, `episodes:`."""

import json

import pytest

from robopipe.errors import DatasetError
from robopipe.workflow import bench
from robopipe.workflow.sources import Datasets


def _datasets(**entries) -> Datasets:
    return Datasets({"datasets": entries})


def _v30(tmp_path, total_episodes=5):
    (tmp_path / "meta").mkdir()
    info = {"codebase_version": "v3.0", "total_episodes": total_episodes}
    (tmp_path / "meta/info.json").write_text(json.dumps(info))
    return tmp_path


def test_a_hub_revision_named_v30_is_v30_without_a_read():
    datasets = _datasets(pusht={"repo_id": "lerobot/pusht", "revision": "v3.0"})
    assert datasets.is_remote_v30("pusht") and datasets.is_v30("pusht")
    assert datasets.url("pusht") == "hf://datasets/lerobot/pusht@v3.0"
    assert datasets.remote_source("pusht") == "hf"
    assert datasets.read_location("pusht") == "hf://datasets/lerobot/pusht@v3.0"
    assert datasets.source_dir("pusht") == "results/pusht/local_copy"
    assert datasets.episodes("pusht") is None
    assert datasets.remote_info.cache_info().currsize == 0  # nothing was read


def test_a_url_source_has_its_version_read_once(tmp_path):
    root = _v30(tmp_path)
    datasets = _datasets(ds={"url": f"file://{root}", "episodes": [3, 1, 3]})
    assert datasets.version("ds") == "v3.0" and datasets.is_remote_v30("ds")
    assert datasets.remote_source("ds") is None  # no bench source reads file:// remotely
    assert datasets.episodes("ds") == [1, 3]
    assert datasets.configured_episodes("ds") == 2
    datasets.is_v30("ds")
    assert datasets.remote_info.cache_info().misses == 1


def test_skip_episodes_leave_episodes_out_of_a_v30_dataset(tmp_path):
    root = _v30(tmp_path, total_episodes=4)
    datasets = _datasets(ds={"path": str(root), "conversion": {"skip_episodes": [2]}})
    assert datasets.episodes("ds") == [0, 1, 3]


def test_an_unreadable_remote_info_is_a_dataset_error(tmp_path):
    datasets = _datasets(ds={"url": f"file://{tmp_path}/absent"})
    with pytest.raises(DatasetError, match="dataset 'ds': file file://.*meta/info.json"):
        datasets.is_v30("ds")


def test_the_datasets_own_source_reads_its_url():
    hf = "robopipe_map_hf_single_cpu_w0_n1"
    assert bench.reads_url(hf, "hf")
    assert not bench.reads_url("robopipe_map_local_single_cpu_w0_n1", "hf")
    assert not bench.reads_url("robopipe_map_hf_single_ejpeg90_cpu_w0_n1", "hf")  # a copy
    assert not bench.reads_url(hf, None)
    assert not bench.reads_url("lerobot_stream_hf_single_cpu_w0_n1", "hf")  # needs local files
    chosen = bench.dataset_settings(
        {"matrix": {}, "sources": {"hf": "hf://datasets/me/{dataset}"}, "batch_size": 8},
        "hf",
        "hf://datasets/lerobot/pusht@v3.0",
        {"endpoint": "http://127.0.0.1:1"},
        episodes=[0, 2],
    )
    assert chosen == {
        "sources": {"hf": "hf://datasets/lerobot/pusht@v3.0"},
        "storage_options": {"hf": {"endpoint": "http://127.0.0.1:1"}},
        "batch_size": 8,
        "episodes": [0, 2],
    }

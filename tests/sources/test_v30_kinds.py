"""v3.0 sources: a local folder, or one named by `url:` or `repo_id` + `revision` (the
version from the revision's name, else one read of meta/info.json), its URL, the bench source
that reads it, `episodes:`, and a local one's files (a remote one's, named by its metadata:
tests/checks/test_v30_faults.py)."""

import json

from robopipe.sources import LocalV30, RemoteV30, open_source
from robopipe.workflow import bench


def _v30(tmp_path, total_episodes=5):
    (tmp_path / "meta").mkdir(parents=True)
    info = {"codebase_version": "v3.0", "total_episodes": total_episodes}
    (tmp_path / "meta/info.json").write_text(json.dumps(info))
    return tmp_path


def test_a_hub_revision_named_v30_is_v30_without_a_read():
    source = open_source("pusht", {"repo_id": "lerobot/pusht", "revision": "v3.0"})
    assert type(source) is RemoteV30 and not source.converted
    assert source.url == source.remote_url() == "hf://datasets/lerobot/pusht@v3.0"
    assert source.bench_source() == "hf"
    assert source.check_location() == "hf://datasets/lerobot/pusht@v3.0"
    assert source.check_inputs() == []
    assert source.folder == "results/pusht/local_copy"
    assert source.dataset_info() == "results/pusht/local_copy/meta/info.json"
    assert source.read_episodes() is None
    assert source.known_episodes() is None
    assert source._info is None  # nothing was read


def test_a_url_source_has_its_version_read_once(tmp_path, monkeypatch):
    root = _v30(tmp_path)
    source = open_source("ds", {"url": f"file://{root}", "episodes": [3, 1, 3]})
    assert type(source) is RemoteV30
    assert source.bench_source() is None  # no bench source reads file:// remotely
    (root / "meta/info.json").unlink()  # read once, when its kind was chosen
    assert source.read_episodes() == [1, 3]
    assert source.known_episodes() == 2
    assert source.info["total_episodes"] == 5


def test_skip_episodes_leave_episodes_out_of_a_v30_dataset(tmp_path):
    root = _v30(tmp_path, total_episodes=4)
    source = open_source("ds", {"path": str(root), "conversion": {"skip_episodes": [2]}})
    assert source.read_episodes() == [0, 1, 3]
    assert source.known_episodes() == 3


def test_a_v30_folder_is_read_where_it_is(tmp_path):
    root = _v30(tmp_path / "v30", total_episodes=7)
    for rel in ("data/chunk-000/file-001.parquet", "data/chunk-000/file-000.parquet",
                "videos/cam/chunk-000/file-000.mp4", "videos/cam/chunk-000/notes.txt"):  # fmt: skip
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(b"x")
    source = open_source("new", {"path": str(root)})
    assert type(source) is LocalV30
    assert source.known_episodes() == 7 and source.read_episodes() is None
    assert source.files() == (
        ["data/chunk-000/file-000.parquet", "data/chunk-000/file-001.parquet"],
        ["videos/cam/chunk-000/file-000.mp4"],
    )


def test_the_datasets_own_source_reads_its_url():
    hf = "robopipe_map_hf_single_cpu_w0_n1"
    url = {"hf": "hf://datasets/lerobot/pusht@v3.0"}
    assert bench.reads_url(hf, url)
    assert not bench.reads_url("robopipe_map_local_single_cpu_w0_n1", url)
    assert not bench.reads_url("robopipe_map_hf_single_ejpeg90_cpu_w0_n1", url)  # a copy
    assert not bench.reads_url(hf, {})
    assert not bench.reads_url("lerobot_stream_hf_single_cpu_w0_n1", url)  # needs local files
    options = {"endpoint": "http://127.0.0.1:1"}
    entry = {"repo_id": "lerobot/pusht", "revision": "v3.0", "storage_options": options}
    source = open_source("pusht", {**entry, "episodes": [2, 0]})
    assert source.bench_urls() == url
    assert bench.scenario_input(source, hf) == "results/pusht/check.json"
    assert bench.scenario_input(source, "robopipe_map_local_single_cpu_w0_n1") == (
        "results/pusht/local_copy/meta/info.json"
    )
    assert bench.ceiling_input(source, "") == "results/pusht/check.json"
    assert bench.ceiling_root(source, "") == "hf://datasets/lerobot/pusht@v3.0"
    assert bench.ceiling_storage_options(source, "") == options
    assert bench.ceiling_input(source, "_eh264g2") == (
        "results/pusht/copies/h264g2/v3.0/meta/info.json"
    )
    assert bench.ceiling_root(source, "_eh264g2") == "results/pusht/copies/h264g2/v3.0"
    assert bench.ceiling_storage_options(source, "_eh264g2") == {}
    bench_section = {"matrix": {}, "sources": {"hf": "hf://datasets/me/{dataset}"}, "batch_size": 8}
    assert bench.dataset_settings(bench_section, source) == {
        "sources": url,
        "storage_options": {"hf": options},
        "batch_size": 8,
        "episodes": [0, 2],
    }
    demo = open_source("d", {"demo": {}})
    assert demo.bench_urls() == {}
    assert bench.dataset_settings(bench_section, demo) == {
        "sources": bench_section["sources"],
        "batch_size": 8,
    }
    assert bench.ceiling_input(demo, "") == "results/d/v3.0/meta/info.json"
    assert bench.ceiling_root(demo, "") == "results/d/v3.0"
    assert bench.ceiling_storage_options(demo, "") == {}


def test_a_remote_v30_dataset_no_bench_source_reads_is_still_read_where_it_is(tmp_path):
    """A file:// URL: no benchmark source reads it at its URL, but the decode ceiling does
    (as the check does), with its fsspec options."""
    root = _v30(tmp_path)
    source = open_source("ds", {"url": f"file://{root}", "storage_options": {"auto_mkdir": 1}})
    assert source.bench_urls() == {}
    assert bench.ceiling_input(source, "") == "results/ds/check.json"
    assert bench.ceiling_root(source, "") == f"file://{root}"
    assert bench.ceiling_storage_options(source, "") == {"auto_mkdir": 1}

"""LeRobot v2.0 sources (robopipe.sources.v20): a v2.1 dataset without episodes_stats.jsonl
(a meta/stats.json instead), checked and converted straight to v3.0, each episode's stats
computed in the shard jobs as lerobot 0.3's v2.0 -> v2.1 step computes them."""

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from robopipe.checks.v30 import check_v30
from robopipe.conversion.plan import load_planned_source, plan_remote
from robopipe.conversion.shard import build_shard
from robopipe.formats.v21_reader import load_source
from robopipe.layout import SHARD_STATS
from robopipe.source_cache import fetch_shard_files
from robopipe.sources import LocalV20, RemoteV20, open_source
from robopipe.sources.v20 import leading_data_files
from robopipe.stats import aggregate_stats, v20_episode_stats
from robopipe.workflow.sources import Datasets


@pytest.fixture(scope="module")
def v20(make_v21, tmp_path_factory):
    """A v2.0 dataset made from the demo generator's v2.1 one (4 episodes, 2 cameras): no
    meta/episodes_stats.jsonl, the dataset's stats in meta/stats.json, codebase_version v2.0."""
    root = tmp_path_factory.mktemp("v20") / "ds"
    shutil.copytree(make_v21(episodes=4), root)
    episodes_stats = root / "meta/episodes_stats.jsonl"
    lines = [json.loads(line) for line in episodes_stats.read_text().splitlines()]
    episodes_stats.unlink()
    stats = aggregate_stats([line["stats"] for line in lines])
    (root / "meta/stats.json").write_text(json.dumps(stats))
    info = json.loads((root / "meta/info.json").read_text())
    (root / "meta/info.json").write_text(json.dumps({**info, "codebase_version": "v2.0"}))
    return root


def test_a_v20_folder_or_url_is_a_v20_source_that_computes_its_stats(v20):
    local = open_source("ds", {"path": str(v20)})
    remote = open_source("ds", {"url": f"file://{v20}"})
    assert (type(local), type(remote)) == (LocalV20, RemoteV20)
    for source in (local, remote):
        assert source.version == "v2.0" and source.converted
        assert source.options.compute_missing_stats and source.computes_stats
        assert source.options.to_dict()["compute_missing_stats"] is True  # the jobs' params
    kept = open_source("x", {"path": str(v20), "conversion": {"episodes_per_shard": 1}}).options
    assert kept.episodes_per_shard == 1 and kept.compute_missing_stats
    datasets = Datasets({"datasets": {"ds": {"path": str(v20)}}})
    assert len(datasets.plan("ds").episodes) == 4  # planned while the DAG is built
    assert datasets.stats_shards("ds") == [
        f"results/ds/shards/{shard.id}" for shard in datasets.plan("ds").shards
    ]


def _wall_clock(root: Path, dest: Path) -> Path:
    """A copy of the dataset at ``root`` whose timestamps drift off ``frame_index / fps`` as
    wall-clock ones do (cr5's): 1% slow, from 0.25 s."""
    dest = Path(shutil.copytree(root, dest))
    for path in sorted(dest.glob("data/*/*.parquet")):
        table = pq.read_table(path)
        stamps = pa.array(table.column("timestamp").to_numpy() * 1.01 + 0.25, pa.float32())
        at = table.schema.get_field_index("timestamp")
        pq.write_table(table.set_column(at, table.schema.field(at), stamps), path)
    return dest


def test_a_v20_dataset_converts_with_lerobot_s_v20_stats(v20, tmp_path, run_snakemake, file_tree):
    """``far``, a remote copy with wall-clock timestamps and ``restamp_timestamps`` (issue 39,
    item 2: its shard jobs look the stats' frames up at the rewritten times, not at the files'
    own, where no frame sits), converts to the same bytes as the exact local dataset."""
    shards = {"episodes_per_shard": 2}
    wall = _wall_clock(v20, tmp_path / "wall")
    config = {
        "datasets": {
            "ds": {"path": str(v20), "conversion": shards},
            "far": {  # fetched as it is read
                "url": f"file://{wall}",
                "conversion": {**shards, "restamp_timestamps": True},
            },
        }
    }
    run_snakemake(tmp_path, config, "--cores", "2", "convert")
    published = tmp_path / "results/ds/v3.0"
    assert check_v30(published, "ds").ok
    assert json.loads((published / "meta/info.json").read_text())["codebase_version"] == "v3.0"
    assert file_tree(tmp_path / "results/far/v3.0") == file_tree(published)
    source = load_source(v20, "ds")
    rows = pq.read_table(published / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    assert [row["episode_index"] for row in rows] == [0, 1, 2, 3]
    for row in rows:
        i = row["episode_index"]
        expected = v20_episode_stats(
            source.root,
            source.info,
            i,
            source.episodes[i]["length"],
            pq.read_table(source.data_file(i)),
            {k: source.video_file(i, k) for k in source.video_keys},
        )
        assert {k.split("/")[1] for k in row if k.startswith("stats/")} == set(expected)
        for feature, stats in expected.items():
            for stat, value in stats.items():
                np.testing.assert_array_equal(
                    np.asarray(row[f"stats/{feature}/{stat}"]), np.asarray(value), err_msg=feature
                )


def test_a_remote_shard_fetches_the_rows_whose_times_lerobot_samples_at(v20):
    source = load_source(v20, "ds")
    lengths = [e["length"] for e in source.episodes]
    assert leading_data_files(source, 1) == [source.data_file(0)]
    assert leading_data_files(source, lengths[0]) == [source.data_file(0)]
    assert leading_data_files(source, lengths[0] + 1) == [source.data_file(0), source.data_file(1)]
    assert leading_data_files(source, sum(lengths)) == [source.data_file(i) for i in range(4)]


def test_a_remote_shard_job_alone_computes_lerobot_s_stats(v20, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the cache: results/ds/source_cache
    entry = {"url": f"file://{v20}", "conversion": {"episodes_per_shard": 2}}
    source = open_source("ds", entry)
    plan = plan_remote(tmp_path / "source.sqlite", "ds", source.options, **source.remote_listing())
    remote = load_planned_source(plan.source, "ds", plan)
    last = plan.shards[-1].id  # episodes 2 and 3: the cache holds nothing of episode 0 yet
    fetch_shard_files(remote, plan, last)
    build_shard(remote, plan, last, tmp_path / "shard")
    computed = json.loads((tmp_path / "shard" / SHARD_STATS).read_text())
    local = load_source(v20, "ds")
    assert set(computed) == {"2", "3"}
    for i in (2, 3):
        files = {k: local.video_file(i, k) for k in local.video_keys}
        expected = v20_episode_stats(
            v20,
            local.info,
            i,
            local.episodes[i]["length"],
            pq.read_table(local.data_file(i)),
            files,
        )
        assert computed[str(i)] == json.loads(json.dumps(expected))

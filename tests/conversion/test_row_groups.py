"""Data files have one parquet row group per episode, in episode order (lerobot 0.6.1's
recorder and ``aggregate`` layout, ``write_table_one_row_group_per_episode``), with the
source's values, schema and metadata; the streaming loader reads one episode's row group, and
the loaders give the same items whatever the layout."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from robopipe.conversion.aggregate import aggregate_data
from robopipe.conversion.serial import convert_dataset
from robopipe.copies import frames
from robopipe.copies.make import make_copy
from robopipe.formats.v30_reader import read_meta
from robopipe.layout import SHARD_DATA
from robopipe.loading import MapDataset, StreamingDataset
from robopipe.loading import streaming as streaming_module


@pytest.fixture(scope="module")
def converted(make_v21, tmp_path_factory) -> tuple[Path, Path]:
    """(v2.1 source, v3.0 output): 9 episodes in several data files and chunk folders, each
    data file aggregated from several shards."""
    source = make_v21(episodes=9, cameras=1, fps=10, min_length=12, max_length=30)
    out = tmp_path_factory.mktemp("row_groups") / "v3.0"
    convert_dataset(
        source, out, name="rg", data_file_size_in_mb=0.01, episodes_per_shard=2, chunks_size=2
    )
    return source, out


def _layout(path: Path) -> list[int]:
    meta = pq.ParquetFile(path).metadata
    return [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]


def assert_one_row_group_per_episode(root: Path) -> int:
    """Every data file of ``root``: row group g holds exactly the file's g-th episode."""
    meta = read_meta(root)
    files = sorted({meta.data_file(e) for e in range(meta.num_episodes)})
    for relative in files:
        episodes = [e for e in range(meta.num_episodes) if meta.data_file(e) == relative]
        parquet = pq.ParquetFile(root / relative)
        assert _layout(root / relative) == [int(meta.episodes["length"][e]) for e in episodes]
        for group, episode in enumerate(episodes):
            rows = parquet.read_row_group(group, columns=["episode_index", "index"])
            assert set(rows["episode_index"].to_pylist()) == {episode}
            assert rows["index"][0].as_py() == meta.episodes["dataset_from_index"][episode]
    return len(files)


def test_one_row_group_per_episode_in_episode_order(converted):
    files = assert_one_row_group_per_episode(converted[1])
    assert files >= 3  # several data files, each from several shards


def test_values_schema_and_metadata_are_the_sources(converted):
    source, out = converted
    meta = read_meta(out)
    for relative in sorted({meta.data_file(e) for e in range(meta.num_episodes)}):
        episodes = [e for e in range(meta.num_episodes) if meta.data_file(e) == relative]
        ref = pa.concat_tables(
            pq.read_table(source / f"data/chunk-000/episode_{e:06d}.parquet") for e in episodes
        )
        got = pq.read_table(out / relative)
        assert got.equals(ref)
        assert got.schema.equals(ref.schema, check_metadata=True)


def test_shards_of_any_layout_give_one_row_group_per_episode(tmp_path):
    """A shard written one row group for several episodes (as before) is split by episode."""
    table = pa.table(
        {"episode_index": pa.array([3, 3, 4, 4, 4, 5], pa.int64()), "x": pa.array(range(6))}
    )
    shards = [tmp_path / "a", tmp_path / "b"]
    for shard, part in zip(shards, (table.slice(0, 4), table.slice(4)), strict=True):
        shard.mkdir()
        pq.write_table(part, shard / SHARD_DATA)  # one row group of two episodes
    aggregate_data(shards, tmp_path / "out.parquet")
    assert _layout(tmp_path / "out.parquet") == [2, 2, 1, 1]
    assert pq.read_table(tmp_path / "out.parquet").equals(table)


def _one_row_group_per_file(root: Path, dest: Path) -> Path:
    """A copy of ``root`` whose data files are rewritten as lerobot's converter lays them out:
    one row group per file, the same values."""
    shutil.copytree(root, dest)
    for path in dest.glob("data/*/*.parquet"):
        table = pq.read_table(path)
        pq.write_table(table, path, row_group_size=max(table.num_rows, 1))
        assert len(_layout(path)) == 1 and pq.read_table(path).equals(table)
    return dest


def _items_equal(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        if isinstance(a[key], torch.Tensor):
            assert torch.equal(a[key], b[key]), key
        else:
            assert a[key] == b[key], key


def test_loader_items_equal_with_either_layout(converted, tmp_path, monkeypatch):
    out = converted[1]
    old = _one_row_group_per_file(out, tmp_path / "one_group_per_file")
    n = len(MapDataset(out))
    for i in (0, 1, n // 3, n // 2, n - 1):
        _items_equal(MapDataset(out)[i], MapDataset(old)[i])

    reads = []
    original = streaming_module.read_data_rows

    def recording(meta, relative, parquet, groups):
        reads.append((meta.url, relative, list(groups)))
        return original(meta, relative, parquet, groups)

    monkeypatch.setattr(streaming_module, "read_data_rows", recording)
    new_items = list(StreamingDataset(out, shuffle=True, shuffle_buffer=7, seed=3))
    old_items = list(StreamingDataset(old, shuffle=True, shuffle_buffer=7, seed=3))
    assert len(new_items) == len(old_items) == n
    for a, b in zip(new_items, old_items, strict=True):
        _items_equal(a, b)
    # the new layout: one episode's row group per read, each episode read once
    new_reads = [r for r in reads if r[0] == str(out)]
    assert all(len(groups) == 1 for _, _, groups in new_reads)
    assert len(new_reads) == len({(f, tuple(g)) for _, f, g in new_reads}) == 9
    # one row group per file: each file read whole, once
    old_reads = [r for r in reads if r[0] == str(old)]
    assert len(old_reads) == len({f for _, f, _ in old_reads}) == len(_files(old))


def _files(root: Path) -> list[Path]:
    return sorted(root.glob("data/*/*.parquet"))


@pytest.mark.parametrize("encoding", ["raw", "jpeg90"])
def test_copies_keep_one_row_group_per_episode(converted, tmp_path, encoding):
    make_copy(converted[1], tmp_path / "v3.0", tmp_path / "copy.json", encoding)
    assert_one_row_group_per_episode(tmp_path / "v3.0")


def test_copies_split_large_episodes_within_the_episode():
    """An episode whose frames are larger than ROW_GROUP_BYTES becomes a few row groups of
    equal rows, none spanning two episodes."""
    episode_index = np.repeat([0, 1, 2], [10, 3, 7])
    table = pa.table({"episode_index": episode_index, "x": np.arange(20)})
    groups = frames._episode_row_groups(table, row_bytes=frames.ROW_GROUP_BYTES / 4)
    assert [g.num_rows for g in groups] == [4, 4, 2, 3, 4, 3]
    assert all(len(set(g["episode_index"].to_pylist())) == 1 for g in groups)
    assert pa.concat_tables(groups).equals(table)
    small = frames._episode_row_groups(table, row_bytes=100)
    assert [g.num_rows for g in small] == [10, 3, 7]

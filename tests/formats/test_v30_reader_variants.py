"""The v3.0 reader on variants of a real dataset's metadata (issue 21).

Each variant copies ``meta/`` of ``cr5_20ep_v30_lerobot`` (written by lerobot 0.6.1) into
``tmp_path``, links its data and videos, and rewrites one metadata file: tasks.parquet stored
in each way lerobot's ``load_tasks`` accepts, extra info.json keys, episodes metadata split
into two files. The reader and ``MapDataset`` must give the same tasks and first item as on
the original.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from robopipe.errors import DatasetError
from robopipe.formats.v30_reader import DatasetMeta, read_meta, read_tasks
from robopipe.layout import INFO_PATH, TASKS_PATH, episodes_path

NAME = "cr5_20ep_v30_lerobot"


@pytest.fixture
def original(shared_datasets: Path) -> Path:
    return shared_datasets / NAME


def _variant(original: Path, tmp_path: Path) -> Path:
    """A copy of ``original``: ``meta/`` copied (writable), ``data/`` and ``videos/`` linked."""
    root = tmp_path / NAME
    root.mkdir()
    shutil.copytree(original / "meta", root / "meta")
    for folder in ("data", "videos"):
        (root / folder).symlink_to(original / folder, target_is_directory=True)
    return root


def _original_tasks(original: Path) -> list[str]:
    frame = pd.read_parquet(original / TASKS_PATH)  # as lerobot 0.6.1 load_tasks reads it
    return list(frame.sort_values("task_index").index)


def _first_item(root: Path) -> tuple[str, int]:
    from robopipe.loading.map_dataset import MapDataset

    item = MapDataset(str(root))[0]
    return item["task"], int(item["task_index"])


@pytest.fixture(scope="module")
def original_first_item() -> dict:
    return {}  # filled on first use: the original's (task, task_index) of item 0


def _check_same_as_original(root: Path, original: Path, cache: dict) -> None:
    meta = read_meta(str(root))
    assert meta.tasks == _original_tasks(original)
    assert meta.num_episodes == 20 and meta.num_frames == 4499
    if "item" not in cache:
        cache["item"] = _first_item(original)
    task, task_index = _first_item(root)
    assert (task, task_index) == cache["item"]
    assert task == meta.tasks[task_index]


def _write_tasks(root: Path, frame: pd.DataFrame, index: bool) -> None:
    frame.to_parquet(root / TASKS_PATH, index=index)


def test_original_tasks_are_read(original: Path) -> None:
    meta = read_meta(str(original))
    assert meta.tasks == _original_tasks(original)
    assert meta.tasks == ["put the banana on the plate"]
    assert pq.read_schema(original / TASKS_PATH).pandas_metadata["index_columns"] == ["task"]


def test_index_named_task(original, tmp_path, original_first_item) -> None:
    root = _variant(original, tmp_path)
    frame = pd.read_parquet(original / TASKS_PATH)
    _write_tasks(root, frame, index=True)  # rewritten as lerobot writes it
    assert "task" in pq.read_schema(root / TASKS_PATH).names
    _check_same_as_original(root, original, original_first_item)


def test_unnamed_index(original, tmp_path, original_first_item) -> None:
    root = _variant(original, tmp_path)
    frame = pd.read_parquet(original / TASKS_PATH)
    frame.index.name = None
    _write_tasks(root, frame, index=True)
    names = pq.read_schema(root / TASKS_PATH).names
    assert "__index_level_0__" in names and "task" not in names
    _check_same_as_original(root, original, original_first_item)


def test_unnamed_index_without_pandas_metadata(original, tmp_path, original_first_item) -> None:
    root = _variant(original, tmp_path)
    frame = pd.read_parquet(original / TASKS_PATH)
    frame.index.name = None
    table = pa.Table.from_pandas(frame).replace_schema_metadata(None)
    pq.write_table(table, root / TASKS_PATH)
    assert pq.read_schema(root / TASKS_PATH).pandas_metadata is None
    _check_same_as_original(root, original, original_first_item)


def test_index_named_by_pandas_metadata(original, tmp_path, original_first_item) -> None:
    root = _variant(original, tmp_path)
    frame = pd.read_parquet(original / TASKS_PATH)
    frame.index.name = "instruction"  # an index column of another name, known by metadata
    _write_tasks(root, frame, index=True)
    assert pq.read_schema(root / TASKS_PATH).pandas_metadata["index_columns"] == ["instruction"]
    _check_same_as_original(root, original, original_first_item)


def test_plain_task_column(original, tmp_path, original_first_item) -> None:
    root = _variant(original, tmp_path)
    frame = pd.read_parquet(original / TASKS_PATH).reset_index()
    _write_tasks(root, frame[["task", "task_index"]], index=False)
    assert pq.read_schema(root / TASKS_PATH).pandas_metadata["index_columns"] == []
    _check_same_as_original(root, original, original_first_item)


def test_no_task_strings_raises(original, tmp_path) -> None:
    root = _variant(original, tmp_path)
    frame = pd.read_parquet(original / TASKS_PATH).reset_index(drop=True)
    _write_tasks(root, frame, index=False)
    with pytest.raises(DatasetError) as err:
        read_meta(str(root))
    message = str(err.value)
    assert NAME in message and "meta/tasks.parquet" in message and "no task strings" in message
    assert "\n" not in message


def test_no_task_index_raises(original, tmp_path) -> None:
    root = _variant(original, tmp_path)
    frame = pd.read_parquet(original / TASKS_PATH).reset_index()[["task"]]
    _write_tasks(root, frame, index=False)
    with pytest.raises(DatasetError, match=r"meta/tasks\.parquet: no 'task_index' column"):
        read_meta(str(root))


def test_extra_info_keys(original, tmp_path, original_first_item) -> None:
    root = _variant(original, tmp_path)
    info = json.loads((root / INFO_PATH).read_text())
    info["some_future_key"] = {"nested": [1, 2, 3]}
    info["notes"] = "written by someone else"
    (root / INFO_PATH).write_text(json.dumps(info, indent=4))
    _check_same_as_original(root, original, original_first_item)
    assert read_meta(str(root)).info["notes"] == "written by someone else"


def test_episodes_split_over_two_files(original, tmp_path, original_first_item) -> None:
    root = _variant(original, tmp_path)
    table = pq.read_table(original / episodes_path(0, 0))
    first, second = table.slice(0, 7), table.slice(7)
    column = "meta/episodes/file_index"
    if column in second.column_names:
        i = second.column_names.index(column)
        second = second.set_column(i, column, pa.array([1] * len(second), pa.int64()))
    pq.write_table(first, root / episodes_path(0, 0))
    pq.write_table(second, root / episodes_path(0, 1))
    meta = read_meta(str(root))
    whole = read_meta(str(original))
    assert meta.num_episodes == 20
    for key, values in whole.episodes.items():
        np.testing.assert_array_equal(meta.episodes[key], values, err_msg=key)
    _check_same_as_original(root, original, original_first_item)


def test_episodes_files_out_of_order_raise(original, tmp_path) -> None:
    root = _variant(original, tmp_path)
    table = pq.read_table(original / episodes_path(0, 0))
    pq.write_table(table.slice(7), root / episodes_path(0, 0))
    pq.write_table(table.slice(0, 7), root / episodes_path(0, 1))
    with pytest.raises(DatasetError, match="not episodes 0..n-1 in order"):
        read_meta(str(root))


# Tests below need no real dataset.


def _meta(root: Path) -> DatasetMeta:
    return DatasetMeta(name="tiny", url=str(root), info={}, tasks=[], episodes={}, root=str(root))


@pytest.mark.parametrize("index_name", [None, "task"])
def test_tiny_tasks_parquet_pandas_index(tmp_path: Path, index_name) -> None:
    (tmp_path / "meta").mkdir()
    frame = pd.DataFrame(
        {"task_index": [1, 0, 2]}, index=pd.Index(["b", "a", "c"], name=index_name)
    )
    frame.to_parquet(tmp_path / TASKS_PATH)
    if index_name is None:
        assert "__index_level_0__" in pq.read_schema(tmp_path / TASKS_PATH).names
    assert read_tasks(_meta(tmp_path)) == ["a", "b", "c"]


def test_tiny_tasks_parquet_bad_task_index(tmp_path: Path) -> None:
    (tmp_path / "meta").mkdir()
    pd.DataFrame({"task_index": [0, 2]}, index=["a", "b"]).to_parquet(tmp_path / TASKS_PATH)
    with pytest.raises(DatasetError, match="task_index is not 0..n-1"):
        read_tasks(_meta(tmp_path))


def test_tiny_tasks_parquet_missing(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"tasks\.parquet: missing file"):
        read_tasks(_meta(tmp_path))

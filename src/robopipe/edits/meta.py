"""The ``meta/`` folder of an edit's output: info.json, tasks.parquet, the episodes metadata
and stats.json, from the inputs' ``meta/`` and the video jobs' reports.

As lerobot 0.6.1's edits (``dataset_tools._copy_and_reindex_episodes_metadata``): each kept
episode's row is the input's, with its indices, files and timestamps in the output; the
dataset's stats are the kept episodes' stats aggregated (``aggregate_stats``), here with
:class:`robopipe.stats.StatsAggregator` (the same numbers, memory flat in episodes).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from robopipe.atomic import write_json
from robopipe.conversion.meta import write_episodes, write_tasks
from robopipe.edits.plan import EditPlan
from robopipe.formats.v30_reader import episodes_files, open_url
from robopipe.layout import DEFAULT_CHUNK_SIZE, INFO_PATH, STATS_PATH, TASKS_PATH
from robopipe.stats import StatsAggregator

# the columns write_episodes adds: which episodes file holds the row
_EPISODES_FILE_COLUMNS = ("meta/episodes/chunk_index", "meta/episodes/file_index")


def write_edit_meta(plan: EditPlan, video_reports: list[Path], meta_dir: Path) -> None:
    """Write ``meta_dir``'s info.json, tasks.parquet, episodes files and stats.json.

    ``video_reports``: every video job's report (:func:`robopipe.edits.files.write_video_file`),
    where each episode landed in its output file. The inputs' episodes files are read one at
    a time, and rows are written as they come (:func:`robopipe.conversion.meta.write_episodes`).
    """
    meta_dir = Path(meta_dir)
    landed = _landed(plan, video_reports)
    aggregator = StatsAggregator()
    write_episodes(_episode_tables(plan, landed, aggregator), meta_dir, _chunks_size(plan))
    write_tasks(plan.tasks, meta_dir / Path(TASKS_PATH).relative_to("meta"))
    write_json(meta_dir / Path(STATS_PATH).relative_to("meta"), aggregator.result())
    write_json(meta_dir / Path(INFO_PATH).relative_to("meta"), plan.info)


def _chunks_size(plan: EditPlan) -> int:
    return int(plan.info.get("chunks_size") or DEFAULT_CHUNK_SIZE)


def _landed(plan: EditPlan, video_reports: list[Path]) -> dict[str, dict[str, np.ndarray]]:
    """Per camera: each output episode's from/to timestamp in its output file."""
    n = plan.num_episodes
    landed = {k: {"from": np.zeros(n), "to": np.zeros(n)} for k in plan.video_keys}
    for path in video_reports:
        report = json.loads(Path(path).read_text("utf-8"))
        columns = landed[report["video_key"]]
        for row in report["episodes"]:
            columns["from"][row["episode_index"]] = row["from_timestamp"]
            columns["to"][row["episode_index"]] = row["to_timestamp"]
    return landed


def _episode_tables(plan: EditPlan, landed, aggregator: StatsAggregator) -> Iterator[pa.Table]:
    """The output's episodes rows, one table per input episodes file read."""
    e = plan.episodes
    files = {"data": _file_of_episodes(plan.data_files, plan.num_episodes)}
    for key, video_files in plan.video_files.items():
        files[key] = _file_of_episodes(video_files, plan.num_episodes)
    schema = None
    for position, root in enumerate(plan.sources):
        mine = np.flatnonzero(e["source"] == position)  # output episodes, in input order
        if not len(mine):
            continue
        by_input = dict(zip(e["source_episode"][mine].tolist(), mine.tolist(), strict=True))
        fs, base = open_url(root)
        info = json.loads(Path(root, INFO_PATH).read_text("utf-8"))
        chunks_size = int(info.get("chunks_size") or DEFAULT_CHUNK_SIZE)
        for rel in episodes_files(fs, base, chunks_size):
            table = pq.read_table(Path(root) / rel)
            gone = [
                c
                for c in table.column_names
                if c in _EPISODES_FILE_COLUMNS or _removed(c, plan.removed)
            ]
            table = table.drop_columns(gone)
            inputs = table.column("episode_index").to_numpy()
            keep = [i for i, ep in enumerate(inputs.tolist()) if ep in by_input]
            if not keep:
                continue
            table = table.take(pa.array(keep, pa.int64()))
            out = np.asarray([by_input[int(ep)] for ep in inputs[keep]], np.int64)
            table = _reindexed(table, out, e, files, landed)
            if "task_index" in e:
                table = _retasked(table, e["task_index"][out], plan.tasks)
            for row in _stats_rows(table):
                aggregator.add(row)
            if schema is None:
                schema = table.schema
            yield table.select(schema.names).cast(schema)


def _removed(column: str, features: list[str]) -> bool:
    """Whether an episodes column belongs to a removed feature (its stats, its video file)."""
    return any(column.startswith((f"stats/{f}/", f"videos/{f}/")) for f in features)


def _file_of_episodes(files, n: int) -> np.ndarray:
    """(chunk, file) of each output episode's file of one kind, as an (n, 2) array."""
    ids = np.zeros((n, 2), np.int64)
    for f in files:
        ids[f.first : f.stop] = (f.chunk, f.file)
    return ids


def _reindexed(table: pa.Table, out: np.ndarray, e, files, landed) -> pa.Table:
    values = {
        "episode_index": out,
        "data/chunk_index": files["data"][out, 0],
        "data/file_index": files["data"][out, 1],
        "dataset_from_index": e["dataset_from_index"][out],
        "dataset_to_index": e["dataset_from_index"][out] + e["length"][out],
    }
    for key, columns in landed.items():
        values[f"videos/{key}/chunk_index"] = files[key][out, 0]
        values[f"videos/{key}/file_index"] = files[key][out, 1]
        values[f"videos/{key}/from_timestamp"] = columns["from"][out]
        values[f"videos/{key}/to_timestamp"] = columns["to"][out]
    for column, array in values.items():
        position = table.schema.get_field_index(column)
        field = table.schema.field(position)
        table = table.set_column(position, field, pa.array(array, field.type))
    return table


def _retasked(table: pa.Table, task_index: np.ndarray, tasks: list[str]) -> pa.Table:
    """``modify_tasks``: each episode's ``tasks`` (its one new task) and its ``task_index``
    stats (the one value of its frames: min, max, mean and quantiles, std 0, as the
    conversion computes them). lerobot 0.6.1 leaves the input's task_index stats there."""
    values = {"tasks": [[tasks[t]] for t in task_index.tolist()]}
    for column in table.column_names:
        if column.startswith("stats/task_index/") and not column.endswith("/count"):
            stat = column.rsplit("/", 1)[1]
            values[column] = [[0 if stat == "std" else t] for t in task_index.tolist()]
    for column, array in values.items():
        position = table.schema.get_field_index(column)
        if position < 0:
            continue
        field = table.schema.field(position)
        table = table.set_column(position, field, pa.array(array, field.type))
    return table


def _stats_rows(table: pa.Table) -> Iterator[dict[str, dict]]:
    """Each row's ``{feature: {stat: value}}`` from its ``stats/<feature>/<stat>`` columns."""
    columns = [c for c in table.column_names if c.startswith("stats/")]
    values = {c: table.column(c).to_pylist() for c in columns}
    for row in range(table.num_rows):
        stats: dict[str, dict] = {}
        for column in columns:
            feature, stat = column[len("stats/") :].rsplit("/", 1)
            stats.setdefault(feature, {})[stat] = values[column][row]
        yield stats

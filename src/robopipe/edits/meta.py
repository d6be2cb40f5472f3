"""The ``meta/`` folder of an edit's output: info.json, tasks.parquet, the episodes metadata
and stats.json, from the inputs' ``meta/`` and the jobs' reports.

As lerobot 0.6.1's edits (``dataset_tools._copy_and_reindex_episodes_metadata``): each kept
episode's row is the input's, with its indices, files and timestamps in the output; the
dataset's stats are the kept episodes' stats aggregated (``aggregate_stats``), here with
:class:`robopipe.stats.StatsAggregator` (the same numbers, memory flat in episodes).

``recompute_stats`` (lerobot 0.6.1 ``dataset_tools.recompute_stats``): stats.json is the
input's, with the recomputed features' stats replaced by the aggregate of each episode's
recomputed stats (quantiles included). lerobot leaves the episodes' ``stats/*`` columns as
they were; here each episode's columns of those features hold its recomputed values too (the
columns it had; none added), so that an episode's stats agree with its rows and with
stats.json, and a later edit aggregates the right numbers.
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
from robopipe.errors import DatasetError
from robopipe.formats.v30_reader import episodes_files, open_url
from robopipe.layout import DEFAULT_CHUNK_SIZE, INFO_PATH, STATS_PATH, TASKS_PATH
from robopipe.stats import StatsAggregator

# episodes rows whose stats are Python values at a time (_stats_rows)
STATS_ROWS = 256
# the columns write_episodes adds: which episodes file holds the row
_EPISODES_FILE_COLUMNS = ("meta/episodes/chunk_index", "meta/episodes/file_index")


def write_edit_meta(
    plan: EditPlan, video_reports: list[Path], meta_dir: Path, data_reports: list[Path] = ()
) -> None:
    """Write ``meta_dir``'s info.json, tasks.parquet, episodes files and stats.json.

    ``video_reports``: every video job's report (:func:`robopipe.edits.files.write_video_file`),
    where each episode landed in its output file. ``data_reports``: for ``recompute_stats``,
    every data job's report in file order (:func:`robopipe.edits.files.write_data_file`),
    with each episode's recomputed stats; read one at a time. The inputs' episodes files are
    read one at a time, and rows are written as they come
    (:func:`robopipe.conversion.meta.write_episodes`).

    Raises:
        DatasetError: ``recompute_stats`` and the data reports' episodes are not the
            output's, in order.
    """
    meta_dir = Path(meta_dir)
    landed = _landed(plan, video_reports)
    aggregator = StatsAggregator()
    recomputed = _recomputed_stats(data_reports) if plan.recomputed else None
    tables = _episode_tables(plan, landed, aggregator, recomputed)
    write_episodes(tables, meta_dir, _chunks_size(plan))
    if recomputed is not None and next(recomputed, None) is not None:
        raise DatasetError(plan.dataset, "recompute_stats: the data jobs have more episodes")
    stats = aggregator.result()
    if plan.recomputed:
        stats = {**_input_stats(plan), **stats}
    write_tasks(plan.tasks, meta_dir / Path(TASKS_PATH).relative_to("meta"))
    write_json(meta_dir / Path(STATS_PATH).relative_to("meta"), stats)
    write_json(meta_dir / Path(INFO_PATH).relative_to("meta"), plan.info)


def _recomputed_stats(data_reports: list[Path]) -> Iterator[tuple[int, dict]]:
    """(output episode, its recomputed stats) from the data reports, in their order."""
    for path in data_reports:
        for row in json.loads(Path(path).read_text("utf-8"))["episode_stats"]:
            yield row["episode_index"], row["stats"]


def _input_stats(plan: EditPlan) -> dict:
    """The input's meta/stats.json (``{}`` where it has none)."""
    fs, base = open_url(plan.sources[0])
    path = f"{base}/{STATS_PATH}"
    return json.loads(fs.cat_file(path)) if fs.exists(path) else {}


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


def _episode_tables(
    plan: EditPlan, landed, aggregator: StatsAggregator, recomputed: Iterator | None
) -> Iterator[pa.Table]:
    """The output's episodes rows, one table per input episodes file read; each row's stats
    go to ``aggregator`` (``recompute_stats``: the recomputed ones, from ``recomputed``)."""
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
            if recomputed is None:
                for row in _stats_rows(table):
                    aggregator.add(row)
            else:
                table = _restated(plan, table, recomputed, aggregator)
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


def _restated(plan: EditPlan, table: pa.Table, recomputed: Iterator, aggregator) -> pa.Table:
    """``recompute_stats``: ``table``'s ``stats/<feature>/<stat>`` columns of the recomputed
    features set to the next rows of ``recomputed``, whose stats go to ``aggregator``."""
    episodes = table.column("episode_index").to_pylist()
    rows = []
    for episode in episodes:
        found, stats = next(recomputed, (None, None))
        if found != episode:
            raise DatasetError(
                plan.dataset, f"recompute_stats: the data jobs' episode {found} is not the "
                f"output's next episode {episode}", episode=episode,
            )  # fmt: skip
        aggregator.add(stats)
        rows.append(stats)
    for feature in plan.recomputed:
        for column in [c for c in table.column_names if c.startswith(f"stats/{feature}/")]:
            stat = column.rsplit("/", 1)[1]
            if rows and stat not in rows[0][feature]:
                continue  # a stat recompute_stats does not give: left as it was
            position = table.schema.get_field_index(column)
            field = table.schema.field(position)
            values = pa.array([row[feature][stat] for row in rows], field.type)
            table = table.set_column(position, field, values)
    return table


def _stats_rows(table: pa.Table) -> Iterator[dict[str, dict]]:
    """Each row's ``{feature: {stat: value}}`` from its ``stats/<feature>/<stat>`` columns,
    made Python values ``STATS_ROWS`` rows at a time: edit_meta of the DROID-shaped 20k
    episodes x 3 cameras peaked at 536 MB with the episodes file's stats as Python lists
    whole, 270 MB so."""
    columns = [c for c in table.column_names if c.startswith("stats/")]
    names = [c[len("stats/") :].rsplit("/", 1) for c in columns]
    for start in range(0, table.num_rows, STATS_ROWS):
        part = table.slice(start, STATS_ROWS)
        values = [part.column(c).to_pylist() for c in columns]
        for row in range(part.num_rows):
            stats: dict[str, dict] = {}
            for (feature, stat), column in zip(names, values, strict=True):
                stats.setdefault(feature, {})[stat] = column[row]
            yield stats

"""The v3.0 ``meta/`` folder: info.json, tasks.parquet, episodes parquet files, stats.json.

Each writer follows what lerobot 0.6.1's converter writes
(``scripts/convert_dataset_v21_to_v30.py``; reference spec §2.2-2.5), with one deliberate
difference: episodes metadata larger than 100 MB rolls over into several
``meta/episodes/chunk-XXX/file-YYY`` files, where lerobot stops (``NotImplementedError``).
"""

from __future__ import annotations

import itertools
import json
import mmap
import re
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from robopipe.atomic import atomic_path, write_json
from robopipe.conversion.plan import Plan, PlannedEpisode
from robopipe.errors import DatasetError
from robopipe.formats.v21_reader import STATS_FIX, V21Source
from robopipe.formats.v21_repairs import (
    output_features,
    repairs_of,
    undeclared_columns_to,
    with_default_features,
)
from robopipe.formats.v30_reader import INFO_KEYS
from robopipe.layout import (
    DATA_PATH,
    DEFAULT_DATA_FILE_SIZE_IN_MB,
    INFO_PATH,
    SHARD_STATS,
    STATS_PATH,
    TASKS_PATH,
    V21_EPISODES_STATS_PATH,
    VIDEO_PATH,
    episodes_path,
    next_chunk_file,
)
from robopipe.stats import StatsAggregator, restamped_timestamp_stats

# lerobot 0.6.1 writes one episodes file, and refuses one whose table exceeds this
# (io_utils.py:190-208, DEFAULT_DATA_FILE_SIZE_IN_MB, not the converter's argument).
EPISODES_FILE_SIZE_IN_MB = DEFAULT_DATA_FILE_SIZE_IN_MB


def write_meta(
    source: V21Source,
    plan: Plan,
    video_episodes: list[Path],
    meta_dir: Path,
    *,
    restamp_timestamps: bool = False,
    shard_dirs: list[Path] = (),
) -> None:
    """Write the ``meta/`` folder of the v3.0 dataset into ``meta_dir``.

    Args:
        source: the v2.1 source (info, tasks, episodes.jsonl, episodes_stats.jsonl).
        plan: the conversion plan (file assignment, output episode indices).
        video_episodes: the ``episodes_json`` files of every video file's aggregate job
            (:func:`robopipe.conversion.aggregate.aggregate_video`): each episode's video durations.
        meta_dir: where ``info.json``, ``stats.json``, ``tasks.parquet`` and ``episodes/`` go.
        restamp_timestamps: the shards rewrote ``timestamp`` as ``frame_index / fps``, so its
            stats are computed from those values instead of copied from the source.
        shard_dirs: the shard jobs' folders, read for the stats they computed with the
            ``compute_missing_stats`` and ``undeclared_columns: declare`` repairs
            (``stats.json``, where present).

    ``info.json`` declares lerobot's default features (``timestamp``, ``frame_index``,
    ``episode_index``, ``index``, ``task_index``) even where the source's does not, and with
    ``undeclared_columns: declare`` the columns the source's does not declare
    (:func:`robopipe.formats.v21_repairs.output_features`, dtypes from the first episode's
    parquet): lerobot's loader reads only declared columns. An episode's stats are its
    ``episodes_stats.jsonl`` entry with those the shard computed added (or the computed
    ones alone where the entry is missing), less those of columns that
    ``undeclared_columns: drop`` left out.

    Raises:
        DatasetError: an episode has stats neither in the source nor in a shard, or no
            shard's stats of a column ``undeclared_columns: declare`` declares; the first
            episode's parquet is unreadable.
    """
    meta_dir = Path(meta_dir)
    repairs = repairs_of(plan.options)
    schema = _source_schema(source, plan)
    features = output_features(source.info["features"], schema, repairs)
    dropped = undeclared_columns_to("drop", schema.names, source.info["features"], repairs)
    declared = undeclared_columns_to("declare", schema.names, source.info["features"], repairs)
    durations, time_bases = _video_durations(plan, video_episodes)
    computed = _ShardStats(shard_dirs, plan)
    found = _SourceStats(source)
    aggregator = StatsAggregator()

    def stats_of(ep: PlannedEpisode) -> dict:
        entry = found.get(ep.source_episode_index)
        added = computed.get(ep)
        lacking = [name for name in declared if name not in (added or {})]
        if lacking:
            raise source.error(
                f"no stats computed for {lacking[0]!r}, which `undeclared_columns: declare` "
                "declares: the meta job reads them from the shard jobs' stats.json",
                episode=ep.source_episode_index,
            )
        if added is not None:
            entry = added if entry is None else {**entry, **added}
        if entry is not None and dropped:
            entry = {k: v for k, v in entry.items() if k not in dropped}
        stats = episode_stats(
            source,
            ep,
            restamp_timestamps=restamp_timestamps,
            timestamp_dtype=features["timestamp"]["dtype"],
            found=entry,
        )
        aggregator.add(stats)
        return stats

    try:
        tables = episode_tables(source, plan, durations, time_bases, stats_of)
        write_episodes(tables, meta_dir, plan.options.chunks_size)
    finally:
        found.close()
    write_tasks(source.tasks, meta_dir / _in_meta(TASKS_PATH))
    write_json(meta_dir / _in_meta(STATS_PATH), aggregator.result())
    info = {**source.info, "features": features}
    write_json(meta_dir / _in_meta(INFO_PATH), convert_info(info, plan))


class _ShardStats:
    """The stats the shard jobs computed (their ``stats.json``), one shard's at a time: an
    episode's are read from its own shard's file, and episodes are asked for in plan order,
    so that memory holds one shard's stats, not every episode's.

    ``shard_dirs``: every shard's folder, in the order of ``plan.shards``, or none (no stats
    computed)."""

    def __init__(self, shard_dirs, plan: Plan) -> None:
        self.dirs = list(shard_dirs)
        self.shards = plan.shards
        self.position = -1  # of the shard whose stats are held
        self.held: dict[str, dict] = {}

    def get(self, ep: PlannedEpisode) -> dict | None:
        """Episode ``ep``'s computed stats, or None where its shard computed none."""
        if not self.dirs:
            return None
        position = max(self.position, 0)
        while ep.episode_index >= self.shards[position].stop:
            position += 1
        if position != self.position:
            path = Path(self.dirs[position]) / SHARD_STATS
            self.held = json.loads(path.read_text("utf-8")) if path.is_file() else {}
            self.position = position
        return self.held.get(str(ep.source_episode_index))


class _SourceStats:
    """``episodes_stats.jsonl``'s entries read one at a time: the file is scanned once for
    where each episode's line starts (the last line of an episode listed twice, as
    :attr:`V21Source.available_stats` keeps it), then each line is read when asked for."""

    def __init__(self, source: V21Source) -> None:
        self.source = source
        self.path = source.root / V21_EPISODES_STATS_PATH
        # by episode index: where its line starts (-1: none), and the line's number
        self.offsets = np.full(len(source.episodes), -1, np.int64)
        self.numbers = np.zeros(len(source.episodes), np.int64)
        self.file = None
        if not self.path.is_file():
            return
        self.file = open(self.path, "rb")  # noqa: SIM115 (closed by close())
        offset = 0
        for number, line in enumerate(self.file, start=1):
            if line.strip():
                match = _EPISODE_INDEX.match(line)
                index = int(match[1]) if match else self._parse(line, number)["episode_index"]
                if isinstance(index, int) and 0 <= index < len(self.offsets):
                    self.offsets[index], self.numbers[index] = offset, number
            offset += len(line)

    def get(self, episode: int) -> dict | None:
        """The episode's ``stats`` entry, or None when the file has none."""
        if not 0 <= episode < len(self.offsets) or self.offsets[episode] < 0:
            return None
        self.file.seek(int(self.offsets[episode]))
        return self._parse(self.file.readline(), int(self.numbers[episode]))["stats"]

    def close(self) -> None:
        if self.file is not None:
            self.file.close()

    def _parse(self, line: bytes, number: int) -> dict:
        try:
            return json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise DatasetError(
                self.source.name,
                f"line {number} is not valid JSON: {exc}",
                file=V21_EPISODES_STATS_PATH,
            ) from None


# the usual start of an episodes_stats.jsonl line (others are parsed whole)
_EPISODE_INDEX = re.compile(rb'\s*\{\s*"episode_index"\s*:\s*(\d+)\s*,')


def _source_schema(source: V21Source, plan: Plan) -> pa.Schema:
    """The parquet schema of the first planned episode (its footer only)."""
    episode = plan.episodes[0].source_episode_index
    path = source.data_file(episode)
    try:
        return pq.read_schema(source.readable(path))  # range reads of a remote source
    except (OSError, pa.ArrowInvalid) as exc:
        raise source.error(f"unreadable parquet: {exc}", episode=episode, file=path) from None


def _in_meta(path: str) -> Path:
    return Path(path).relative_to("meta")


def convert_info(info: dict, plan: Plan) -> dict:
    """v3.0 info.json from the v2.1 one (lerobot 0.6.1 ``convert_info``, :442-461).

    ``codebase_version`` becomes ``v3.0``; ``total_chunks``/``total_videos`` go; the size
    thresholds are added; the path templates become v3.0's; ``fps`` becomes an int; every
    non-video feature gets ``"fps"``. ``chunks_size`` is copied unchanged, as lerobot does.
    Lerobot's default features are declared where ``info`` lacks them
    (:func:`robopipe.formats.v21_repairs.with_default_features`, lerobot's dtypes; pass
    features completed from the data's schema to declare the columns' own).
    With skipped episodes, ``total_episodes``, ``total_frames`` and ``splits`` describe the
    output.
    """
    fps = int(info["fps"])
    features = {}
    for name, feature in with_default_features(info["features"]).items():
        features[name] = dict(feature) if feature["dtype"] == "video" else {**feature, "fps": fps}
    converted = {
        **info,
        "codebase_version": "v3.0",
        "fps": fps,
        "features": features,
        "data_files_size_in_mb": plan.options.data_file_size_in_mb,
        "video_files_size_in_mb": plan.options.video_file_size_in_mb,
        "data_path": DATA_PATH,
        "video_path": VIDEO_PATH if info.get("video_path") else None,
    }
    if plan.options.skip_episodes:
        n = len(plan.episodes)
        converted["total_episodes"] = n
        converted["total_frames"] = plan.total_frames
        converted["splits"] = {"train": f"0:{n}"}
    return {key: converted[key] for key in INFO_KEYS if key in converted}


def episode_stats(
    source: V21Source,
    ep: PlannedEpisode,
    *,
    restamp_timestamps: bool,
    computed: dict | None = None,
    timestamp_dtype: str = "float32",
    found: dict | None = None,
) -> dict:
    """An output episode's stats: its ``episodes_stats.jsonl`` entry (else ``computed``, by
    the ``compute_missing_stats`` repair), with the ``timestamp`` stats of
    ``frame_index / fps`` in ``timestamp_dtype``, the column's
    (:func:`robopipe.stats.restamped_timestamp_stats`) when timestamps were restamped, also
    where the source's stats have no ``timestamp`` (an export whose info.json did not
    declare it). ``found``: the episode's ``episodes_stats.jsonl`` entry where the caller
    read it (else it is looked up in :attr:`V21Source.available_stats`).

    Raises:
        DatasetError: the episode has no stats (the message names the repair).
    """
    src_index = ep.source_episode_index
    if found is None:  # not read by the caller
        found = source.available_stats.get(src_index, computed)
    if found is None:
        raise source.error(
            f"no stats for this episode; {STATS_FIX}",
            episode=src_index,
            file=V21_EPISODES_STATS_PATH,
        )
    stats = dict(found)
    if restamp_timestamps:
        stats["timestamp"] = restamped_timestamp_stats(ep.length, source.fps, timestamp_dtype)
    return stats


def episode_rows(
    source: V21Source,
    plan: Plan,
    durations: dict[str, list[int]],
    time_bases: dict[str, Fraction],
    stats: list[dict] | Callable[[PlannedEpisode], dict],
) -> Iterator[dict]:
    """One v3.0 episodes-metadata row per output episode, columns in lerobot's order, made
    one at a time.

    ``durations[video_key][i]`` is episode ``i``'s stream duration in ticks of
    ``time_bases[video_key]`` seconds (columns of each camera grouped); ``from_timestamp``
    is the sum of the earlier episodes' durations in the same file (lerobot 0.6.1,
    ``convert_videos_of_camera``, :313-381), ``to_timestamp = from + duration``, seconds.
    Stats columns are ``stats/{feature}/{stat}`` from ``stats[i]`` (:func:`episode_stats`),
    or from ``stats(episode)`` where ``stats`` is a function.
    """
    offsets = {key: (None, 0) for key in plan.video_keys}
    for ep in plan.episodes:
        legacy = source.episodes[ep.source_episode_index]
        row = {
            "episode_index": ep.episode_index,
            "data/chunk_index": ep.data[0],
            "data/file_index": ep.data[1],
            "dataset_from_index": ep.dataset_from_index,
            "dataset_to_index": ep.dataset_to_index,
        }
        for key in plan.video_keys:
            row[f"videos/{key}/chunk_index"] = ep.videos[key][0]
            row[f"videos/{key}/file_index"] = ep.videos[key][1]
            current_file, start = offsets[key]
            if current_file != ep.videos[key]:
                start = 0
            end = start + int(durations[key][ep.episode_index])
            row[f"videos/{key}/from_timestamp"] = float(start * time_bases[key])
            row[f"videos/{key}/to_timestamp"] = float(end * time_bases[key])
            offsets[key] = (ep.videos[key], end)
        for column, value in legacy.items():
            if column != "episode_index":
                row[column] = value
        episode = stats(ep) if callable(stats) else stats[ep.episode_index]
        for feature, feature_stats in episode.items():
            for stat, value in feature_stats.items():
                row[f"stats/{feature}/{stat}"] = value
        yield row


# Rows per Arrow table built from Python rows (about 10 KB each with images' stats): the
# tables are written as one, and the parquet bytes are those of one table of every row.
ROWS_PER_TABLE = 256


def episode_tables(
    source: V21Source,
    plan: Plan,
    durations: dict[str, list[int]],
    time_bases: dict[str, Fraction],
    stats: list[dict] | Callable[[PlannedEpisode], dict],
    rows_per_table: int = ROWS_PER_TABLE,
) -> Iterator[pa.Table]:
    """:func:`episode_rows` as Arrow tables of ``rows_per_table`` rows each, so that the Python
    rows of only one table are held at a time."""
    yield from _tables(episode_rows(source, plan, durations, time_bases, stats), rows_per_table)


def _tables(rows: Iterable[dict], rows_per_table: int) -> Iterator[pa.Table]:
    """``rows`` as tables of ``rows_per_table`` rows with the columns of the first row, as
    :meth:`pyarrow.Table.from_pylist` names them (a row without a column gives a null)."""
    names, batch = None, []
    for row in rows:
        if names is None:
            names = list(row)
        batch.append(row)
        if len(batch) == rows_per_table:
            yield pa.Table.from_pydict({n: [r.get(n) for r in batch] for n in names})
            batch = []
    if batch:
        yield pa.Table.from_pydict({n: [r.get(n) for r in batch] for n in names})


def _concat(tables: list[pa.Table]) -> pa.Table:
    """The tables as one, with the types :meth:`pyarrow.Table.from_pylist` infers from all the
    rows: where the tables' inferred types differ, the columns are inferred again whole."""
    if all(t.schema == tables[0].schema for t in tables):
        return pa.concat_tables(tables)
    return pa.Table.from_pydict(
        {n: [v for t in tables for v in t.column(n).to_pylist()] for n in tables[0].column_names}
    )


def write_episodes(
    rows: list[dict] | Iterable[pa.Table],
    meta_dir: Path,
    chunks_size: int,
    file_size_in_mb: float = EPISODES_FILE_SIZE_IN_MB,
) -> None:
    """Write the episodes metadata: one file, as lerobot 0.6.1's converter writes, while it
    holds at most ``file_size_in_mb`` (100) in memory; beyond that (where lerobot raises
    ``NotImplementedError``, ``io_utils.py:190-208``) several files of at most that size.

    ``rows``: the rows (dicts), or tables of them (:func:`episode_tables`). Each file is one
    parquet row group (``pq.write_table`` of all its rows, as lerobot writes it), and how many
    rows a file holds depends on the size of all of them; so the tables go to a temporary
    Arrow IPC file in ``meta_dir`` as they come (removed before returning), and each episodes
    file is written from that file memory-mapped (:func:`_mapped`, :func:`_dropping_pages`):
    memory holds one table of rows and, while a file is written, part of that file's rows
    (at most ``file_size_in_mb`` of them), not all of them. Where the tables' inferred types
    differ, the rows are joined in memory and their columns inferred again whole
    (:func:`_concat`), as one table of every row would have them.

    The last two columns, ``meta/episodes/chunk_index`` and ``meta/episodes/file_index``, say
    which file holds each row. Row ``i`` is episode ``i`` across the files in sorted order.
    """
    if isinstance(rows, list) and (not rows or isinstance(rows[0], dict)):
        tables = iter([pa.Table.from_pylist(rows)] if rows else [])
    else:
        tables = iter(rows)
    first = next(tables, None)
    if first is None:
        return
    meta_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".episodes-", dir=meta_dir) as tmp:
        spill = Path(tmp) / "episodes.arrow"
        nbytes, mixed = 0, None
        with pa.OSFile(str(spill), "wb") as sink, pa.ipc.new_file(sink, first.schema) as writer:
            for table in itertools.chain([first], tables):
                if table.schema != first.schema:
                    mixed = [table, *tables]
                    break
                writer.write_table(table)
                nbytes += table.nbytes  # that of the tables joined (pa.concat_tables)
        if mixed is not None:
            whole = _concat([pa.ipc.open_file(str(spill)).read_all(), *mixed])
            _write_episode_files(whole, whole.nbytes, meta_dir, chunks_size, file_size_in_mb)
            return
        table, pages = _mapped(spill)
        _write_episode_files(table, nbytes, meta_dir, chunks_size, file_size_in_mb, pages)


def _write_episode_files(
    table: pa.Table,
    nbytes: int,
    meta_dir: Path,
    chunks_size: int,
    file_size_in_mb: float,
    pages: mmap.mmap | None = None,
) -> None:
    """Write ``table`` (``nbytes`` as Arrow) as episodes files of at most ``file_size_in_mb``
    each; ``pages``: the memory map ``table`` lives in, whose pages the writer has read are
    let go while it writes (:func:`_dropping_pages`)."""
    per_file = table.num_rows
    if nbytes / 2**20 > file_size_in_mb:
        per_file = max(1, int(file_size_in_mb * 2**20 * table.num_rows / nbytes))
    chunk, file = 0, 0
    for start in range(0, table.num_rows, per_file):
        part = table.slice(start, per_file)
        n = part.num_rows
        part = part.append_column("meta/episodes/chunk_index", pa.array([chunk] * n, pa.int64()))
        part = part.append_column("meta/episodes/file_index", pa.array([file] * n, pa.int64()))
        path = meta_dir / _in_meta(episodes_path(chunk, file))
        with atomic_path(path) as tmp, _dropping_pages(pages):
            pq.write_table(part, tmp)
        del part
        chunk, file = next_chunk_file(chunk, file, chunks_size)


def _mapped(path: Path) -> tuple[pa.Table, mmap.mmap]:
    """The Arrow IPC file at ``path`` as a table whose buffers are the file's pages, mapped
    read-only (no copy), and the memory map, which is unmapped when neither it nor the table
    (nor a slice of it) is referenced any more."""
    with open(path, "rb") as f:
        pages = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    return pa.ipc.open_file(pa.BufferReader(pa.py_buffer(pages))).read_all(), pages


# how often the pages of a memory-mapped table that pq.write_table read are let go
DROP_PAGES_EVERY_S = 0.02


@contextmanager
def _dropping_pages(pages: mmap.mmap | None, every_s: float = DROP_PAGES_EVERY_S):
    """While the body runs (``pq.write_table``, with the GIL released), a thread drops the
    pages of the read-only memory map ``pages`` from this process every ``every_s`` seconds
    (``madvise(MADV_DONTNEED)``): the data stays in the page cache, and a page read again is
    mapped again from it. The writer first validates every chunk (the first and last offset
    of each list, which maps nearly every page of the row group at once), then writes a
    column at a time, so the process holds the pages of the columns read in the last
    ``every_s``, not of every column written so far."""
    if pages is None:
        yield
        return
    pages.madvise(mmap.MADV_DONTNEED)  # those the IPC reader read
    stop = threading.Event()

    def drop() -> None:
        while not stop.wait(every_s):
            pages.madvise(mmap.MADV_DONTNEED)

    thread = threading.Thread(target=drop, name="drop-episodes-pages", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        pages.madvise(mmap.MADV_DONTNEED)


def write_tasks(tasks: list[str], path: Path) -> None:
    """Write ``meta/tasks.parquet`` as lerobot does: a pandas frame indexed by ``task``
    with one column ``task_index``, rows in ascending ``task_index`` (the loader looks tasks
    up with ``tasks.iloc[task_index]``)."""
    import pandas as pd

    frame = pd.DataFrame({"task_index": range(len(tasks))}, index=pd.Index(tasks, name="task"))
    frame["task_index"] = frame["task_index"].astype("int64")
    with atomic_path(path) as tmp:
        frame.to_parquet(tmp)


def _video_durations(
    plan: Plan, video_episodes: list[Path]
) -> tuple[dict[str, np.ndarray], dict[str, Fraction]]:
    durations = {key: np.zeros(len(plan.episodes), np.int64) for key in plan.video_keys}
    time_bases = {}
    for path in video_episodes:
        landed = json.loads(Path(path).read_text("utf-8"))
        key = landed["video_key"]
        for row in landed["episodes"]:
            durations[key][row["episode_index"]] = row["duration_ticks"]
        time_bases[key] = Fraction(landed["time_base"])
    return durations, time_bases

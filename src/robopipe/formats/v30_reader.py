"""Read a LeRobot v3.0 dataset's metadata and data files from any fsspec URL into numpy.

No HF ``datasets``: parquet is read with pyarrow and every column is held as a numpy array.
No directory listing either (plain HTTP servers cannot list): the episodes metadata files are
found by walking ``chunk-XXX/file-YYY`` until one is missing, and the data and video files are
named by the episode rows, as lerobot 0.6.1 ``DatasetReader.get_item`` does
(``dataset_reader.py:312-354``).
"""

from __future__ import annotations

import asyncio
import functools
import io
import json
import os
import weakref
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import NamedTuple

import fsspec
import fsspec.asyn
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from fsspec.implementations.local import LocalFileSystem
from fsspec.spec import AbstractBufferedFile

from robopipe import retry
from robopipe.errors import DatasetError
from robopipe.layout import (
    DATA_PATH,
    DEFAULT_CHUNK_SIZE,
    INFO_PATH,
    STATS_PATH,
    TASKS_PATH,
    VIDEO_PATH,
    data_path,
    episodes_path,
    next_chunk_file,
    video_path,
)

EPISODE_COLUMNS = ("episode_index", "dataset_from_index", "dataset_to_index", "length")

# lerobot 0.6.1 DatasetInfo field order (datasets/utils.py:114-235); the conversion drops
# other keys.
INFO_KEYS = (
    "codebase_version",
    "fps",
    "features",
    "total_episodes",
    "total_frames",
    "total_tasks",
    "chunks_size",
    "data_files_size_in_mb",
    "video_files_size_in_mb",
    "data_path",
    "video_path",
    "robot_type",
    "splits",
)


def open_url(
    url: str, storage_options: dict | None = None, budget: retry.RetryBudget | None = None
) -> tuple[fsspec.AbstractFileSystem, str]:
    """Filesystem and root path of a dataset URL.

    ``url`` is a local path, ``http(s)://host/dir``, ``s3://bucket/dir``,
    ``hf://datasets/<repo>`` or ``hf://buckets/<name>`` (huggingface_hub's HfFileSystem); any
    other fsspec protocol works too. ``storage_options`` go to the filesystem (for example
    ``{"client_kwargs": {"endpoint_url": ...}}`` for s3fs). An http(s) or s3 client waits at
    most ``budget.read_timeout_s`` (default :data:`robopipe.retry.DEFAULT_BUDGET`'s) for a
    connection or the next bytes of a response, unless ``storage_options`` set a timeout
    (``client_kwargs["timeout"]``; s3: ``config_kwargs["read_timeout"]``); an http(s) client
    also waits at most ``budget.first_byte_timeout_s`` for a response to begin, unless
    ``storage_options`` give their own ``get_client``. hf:// reads follow huggingface_hub's
    ``HF_HUB_DOWNLOAD_TIMEOUT``.

    Each call opens a filesystem of its own (fsspec's ``skip_instance_cache``, unless
    ``storage_options`` say otherwise): fsspec would hand every caller with the same options
    one instance, whose pooled connections outlive the server they lead to. A process forked
    while the filesystem lives (a DataLoader worker) keeps it unclosed (see
    :func:`_hold_for_children`); the filesystem is for the process that opened it (an async
    one refuses any other), so a forked process opens its own.
    """
    options = dict(
        _with_read_timeout(str(url), storage_options or {}, budget or retry.DEFAULT_BUDGET)
    )
    options.setdefault("skip_instance_cache", True)
    fs, root = fsspec.core.url_to_fs(str(url), **options)
    _opened.add(fs)
    return fs, root.rstrip("/")


_opened: weakref.WeakSet = weakref.WeakSet()  # the filesystems open_url made, while they live
_held_by_child: list = []  # in a forked child: the parent's filesystems, never closed there


def _hold_for_children() -> None:
    """Before a fork: the child will hold every filesystem :func:`open_url` made, for life.

    A forked child that drops one of them (a DataLoader worker replacing its dataset's
    filesystem by its own) lets fsspec's finaliser close the parent's aiohttp connections
    there, and closing an asyncio transport removes its socket from the epoll instance the
    child shares with the parent (one kernel object across the fork). The parent's event
    loop then never hears from those connections again: the next read on one waits for its
    read timeout (30 s by default) before it is retried, read after read. Held, the
    parent's filesystems are never finalised in the child (multiprocessing's forked
    processes end by ``os._exit``, which runs no finaliser). fsspec empties its instance
    cache in a forked child, so the instances it caches (those opened without
    ``skip_instance_cache``, by any caller) are held too.
    """
    cached = [
        fs for cls in set(fsspec.registry.values()) for fs in getattr(cls, "_cache", {}).values()
    ]
    _held_by_child[:] = [*_opened, *cached]


def _release_in_parent() -> None:
    _held_by_child.clear()


os.register_at_fork(before=_hold_for_children, after_in_parent=_release_in_parent)


def _with_read_timeout(url: str, options: dict, budget: retry.RetryBudget) -> dict:
    protocol = url.split("://", 1)[0] if "://" in url else "file"
    timeout = budget.read_timeout_s
    if protocol in ("http", "https"):
        import aiohttp

        client = dict(options.get("client_kwargs") or {})
        client.setdefault("timeout", aiohttp.ClientTimeout(sock_connect=timeout, sock_read=timeout))
        if "get_client" in options:
            return {**options, "client_kwargs": client}
        client["first_byte_timeout_s"] = budget.first_byte_timeout_s
        return {**options, "client_kwargs": client, "get_client": http_client}
    if protocol in ("s3", "s3a"):
        config = dict(options.get("config_kwargs") or {})
        config.setdefault("read_timeout", timeout)
        config.setdefault("connect_timeout", timeout)
        return {**options, "config_kwargs": config}
    return options


async def http_client(first_byte_timeout_s: float, **kwargs):
    """fsspec ``HTTPFileSystem``'s ``get_client``: an ``aiohttp.ClientSession(**kwargs)``
    whose every response must begin (status line and headers) within
    ``first_byte_timeout_s`` seconds of its request, or the request raises ``TimeoutError``
    (aiohttp's ``ClientTimeout`` has no such bound: its ``sock_read`` is the one wait for the
    headers and for each chunk of the body).
    """
    import aiohttp

    return aiohttp.ClientSession(
        response_class=_first_byte_response(first_byte_timeout_s), **kwargs
    )


@functools.cache
def _first_byte_response(timeout_s: float) -> type:
    """An ``aiohttp.ClientResponse`` whose headers must come within ``timeout_s`` seconds."""
    import aiohttp

    class FirstByteResponse(aiohttp.ClientResponse):
        async def start(self, connection):
            try:
                async with asyncio.timeout(timeout_s):
                    return await super().start(connection)
            except TimeoutError:
                raise TimeoutError(
                    f"{self.url}: no response within {timeout_s:g} s (first_byte_timeout_s)"
                ) from None

    return FirstByteResponse


RANGE_THREADS = 16  # ranges of a synchronous filesystem read at once


def read_ranges(
    fs: fsspec.AbstractFileSystem,
    paths: list[str],
    starts: list[int],
    ends: list[int],
    budget: retry.RetryBudget = retry.DEFAULT_BUDGET,
) -> list[bytes]:
    """Bytes ``[start, end)`` of each path, each range in one request of exactly those bytes,
    all of them in flight at once (:func:`try_ranges`); a range that fails transiently or
    comes back short is requested again (:func:`read_range`, within ``budget``), the failed
    ranges at once.

    Raises:
        robopipe.retry.RemoteReadError: a range failed on every attempt of ``budget``.
        OSError: a range could not be read (the filesystem's non-transient error).
    """
    return read_again(fs, paths, starts, ends, try_ranges(fs, paths, starts, ends, budget), budget)


def read_again(
    fs: fsspec.AbstractFileSystem,
    paths: list[str],
    starts: list[int],
    ends: list[int],
    blobs: list[bytes | BaseException],
    budget: retry.RetryBudget = retry.DEFAULT_BUDGET,
) -> list[bytes]:
    """``blobs`` (:func:`try_ranges`'s answer for these ranges) with each error replaced by
    its range's bytes requested again (:func:`read_range`, within ``budget``), the failed
    ranges at once (up to ``RANGE_THREADS``): one 429's ``Retry-After`` does not delay the
    others.

    Raises:
        robopipe.retry.RemoteReadError: a range failed on every attempt of ``budget``.
        OSError: a range could not be read (the filesystem's non-transient error).
    """
    blobs = list(blobs)
    failed = [i for i, blob in enumerate(blobs) if isinstance(blob, BaseException)]
    if len(failed) == 1:
        (i,) = failed
        blobs[i] = read_range(fs, paths[i], starts[i], ends[i], budget, failed=blobs[i])
    elif failed:
        with ThreadPoolExecutor(min(RANGE_THREADS, len(failed))) as pool:
            again = pool.map(
                lambda i: read_range(fs, paths[i], starts[i], ends[i], budget, blobs[i]), failed
            )
            for i, blob in zip(failed, list(again), strict=True):
                blobs[i] = blob
    return blobs


def try_ranges(
    fs: fsspec.AbstractFileSystem,
    paths: list[str],
    starts: list[int],
    ends: list[int],
    budget: retry.RetryBudget = retry.DEFAULT_BUDGET,
) -> list[bytes | BaseException]:
    """One attempt at bytes ``[start, end)`` of each path, all in flight at once: each
    range's bytes, or the error of its attempt (a short body is
    :class:`robopipe.retry.ShortBody`), not retried.

    An async filesystem (http, s3) sends them all on its event loop, each hedged
    (:func:`robopipe.retry.hedged`, with ``budget.hedge``): a range still unanswered after the
    p95 latency of its size gets a second request, so that one stalled connection costs the
    batch about a p95, not a timeout. A synchronous one (huggingface_hub's ``HfFileSystem``)
    reads the ranges of ``cat_ranges`` one after the other, each through a file with fsspec's
    ``readahead`` cache, which asks for ``end + block_size`` (``HfFileSystem``: 5 MiB) bytes:
    on hf a 20 KB GOP cost a round trip and 5 MiB. Here each range is read through a file
    without cache (``cache_type="none"``), up to ``RANGE_THREADS`` at once.
    """
    if isinstance(fs, fsspec.asyn.AsyncFileSystem):
        return fsspec.asyn.sync(fs.loop, _hedged_ranges, fs, paths, starts, ends, budget)

    def once(path: str, start: int, end: int) -> bytes | BaseException:
        try:
            return _read_once(fs, path, start, end, budget)
        except Exception as error:
            return error

    if len(paths) == 1:
        return [once(paths[0], starts[0], ends[0])]
    with ThreadPoolExecutor(min(RANGE_THREADS, len(paths))) as pool:
        return list(pool.map(once, paths, starts, ends))


def read_range(
    fs: fsspec.AbstractFileSystem,
    path: str,
    start: int,
    end: int,
    budget: retry.RetryBudget = retry.DEFAULT_BUDGET,
    failed: BaseException | None = None,
) -> bytes:
    """Bytes ``[start, end)`` of ``path`` (one range of :func:`try_ranges`), requested again
    after a transient error or a short body within ``budget``; ``failed``: the error of a
    first attempt made already (see :func:`robopipe.retry.call`).

    Raises:
        robopipe.retry.RemoteReadError: every attempt of ``budget`` failed.
        OSError: the filesystem's non-transient error.
    """
    return retry.call(lambda: _read_once(fs, path, start, end, budget), path, budget, failed=failed)


def _read_once(fs, path: str, start: int, end: int, budget: retry.RetryBudget) -> bytes:
    if isinstance(fs, fsspec.asyn.AsyncFileSystem):
        (blob,) = fsspec.asyn.sync(fs.loop, _hedged_ranges, fs, [path], [start], [end], budget)
        if isinstance(blob, BaseException):
            raise blob
        return blob
    with fs.open(path, "rb", cache_type="none") as f:
        f.seek(start)
        return _checked(f.read(end - start), path, start, end)


async def _hedged_ranges(
    fs: fsspec.asyn.AsyncFileSystem,
    paths: list[str],
    starts: list[int],
    ends: list[int],
    budget: retry.RetryBudget,
) -> list[bytes | BaseException]:
    """Each range's bytes (length checked), or the error of its (hedged) attempt."""

    async def one(path: str, start: int, end: int) -> bytes:
        async def attempt() -> bytes:
            return _checked(await fs._cat_file(path, start=start, end=end), path, start, end)

        return await retry.hedged(attempt, end - start, enabled=budget.hedge)

    return await asyncio.gather(*map(one, paths, starts, ends), return_exceptions=True)


def _checked(data: bytes, path: str, start: int, end: int) -> bytes:
    if len(data) != end - start:
        raise retry.ShortBody(path, start, end, len(data))
    return data


def cat_file(
    fs: fsspec.AbstractFileSystem, path: str, budget: retry.RetryBudget = retry.DEFAULT_BUDGET
) -> bytes:
    """The whole file ``path`` in one request, requested again after a transient error
    (a body shorter than its ``Content-Length`` is one: the HTTP client raises it).

    Raises:
        FileNotFoundError: no such file.
        robopipe.retry.RemoteReadError: every attempt of ``budget`` failed.
    """
    return retry.call(lambda: fs.cat_file(path), path, budget)


def exists(
    fs: fsspec.AbstractFileSystem, path: str, budget: retry.RetryBudget = retry.DEFAULT_BUDGET
) -> bool:
    """Whether ``path`` exists (fsspec's ``exists`` answers False to any error, a 503
    included; here a transient error is retried within ``budget``).

    Raises:
        robopipe.retry.RemoteReadError: every attempt of ``budget`` failed.
    """
    try:
        retry.call(lambda: fs.info(path), path, budget)
    except FileNotFoundError:
        return False
    return True


def file_size(
    fs: fsspec.AbstractFileSystem, path: str, budget: retry.RetryBudget = retry.DEFAULT_BUDGET
) -> int:
    """``path``'s size in bytes (one request of a remote file, retried within ``budget``).

    Raises:
        FileNotFoundError: no such file.
        robopipe.retry.RemoteReadError: every attempt of ``budget`` failed.
    """
    return int(retry.call(lambda: fs.size(path), path, budget))


def open_file(
    fs: fsspec.AbstractFileSystem,
    path: str,
    budget: retry.RetryBudget = retry.DEFAULT_BUDGET,
    **options,
):
    """``fs.open(path, "rb", **options)``, opened again after a transient error, whose range
    requests are retried (:func:`retrying_file`).

    Raises:
        FileNotFoundError: no such file.
        robopipe.retry.RemoteReadError: the open or a read failed on every attempt.
    """
    f = retry.call(lambda: fs.open(path, "rb", **options), path, budget)
    return retrying_file(f, path, budget)


def retrying_file(f, url: str, budget: retry.RetryBudget = retry.DEFAULT_BUDGET):
    """``f`` (an fsspec buffered file of known size: http, s3, hf, or
    ``robopipe.hub.HubRangeFile``) with each range request checked for length and requested
    again after a transient error or a short body, within ``budget`` (its reads then raise
    ``robopipe.retry.RemoteReadError`` when every attempt failed). Any other file is returned
    as it is."""
    if not isinstance(f, AbstractBufferedFile) or f.size is None:
        return f
    fetch = f._fetch_range

    def fetch_checked(start: int, end: int) -> bytes:
        end = min(end, f.size)
        if start >= end:
            return b""
        return retry.call(lambda: _checked(fetch(start, end), url, start, end), url, budget)

    f._fetch_range = fetch_checked
    f.cache.fetcher = fetch_checked
    return f


@dataclass
class DatasetMeta:
    """A v3.0 dataset's metadata, held in memory.

    Attributes:
        name: dataset name used in error messages.
        url: the dataset root URL as given.
        info: ``meta/info.json``.
        fps: frames per second (int).
        video_keys: camera keys (features with dtype ``video``), in info.json order.
        data_keys: non-video feature keys read from the data parquet files.
        tasks: task strings by ``task_index`` (``meta/tasks.parquet`` row k has task_index k).
        episodes: episode columns as numpy arrays, one row per episode, row i = episode i:
            ``episode_index``, ``dataset_from_index``, ``dataset_to_index``, ``length``,
            ``data/chunk_index``, ``data/file_index`` and per camera
            ``videos/<cam>/{chunk_index,file_index,from_timestamp,to_timestamp}``
            (timestamps in seconds from the start of that mp4).
        retry_budget: how long each remote read is retried (``robopipe.retry.RetryBudget``).
    """

    name: str
    url: str
    info: dict
    tasks: list[str]
    episodes: dict[str, np.ndarray]
    storage_options: dict | None = None
    root: str = ""
    retry_budget: retry.RetryBudget = retry.DEFAULT_BUDGET
    _fs: tuple[int, fsspec.AbstractFileSystem] | None = field(default=None, repr=False)

    def __getstate__(self):
        return {**self.__dict__, "_fs": None}

    @property
    def fs(self) -> fsspec.AbstractFileSystem:
        """The dataset's filesystem, opened again in each process (async ones are not
        fork-safe)."""
        if self._fs is None or self._fs[0] != os.getpid():
            fs = open_url(self.url, self.storage_options, self.retry_budget)[0]
            self._fs = (os.getpid(), fs)
        return self._fs[1]

    @property
    def fps(self) -> int:
        return int(self.info["fps"])

    @property
    def video_keys(self) -> list[str]:
        return [k for k, f in self.info["features"].items() if f["dtype"] == "video"]

    @property
    def stored_frame_keys(self) -> list[str]:
        """Camera keys whose frames live in the data parquet files (``image`` features)."""
        return [k for k, f in self.info["features"].items() if f["dtype"] == "image"]

    @property
    def camera_keys(self) -> list[str]:
        """Every camera: video keys, then stored-frame keys (info.json order within each)."""
        return self.video_keys + self.stored_frame_keys

    @property
    def data_keys(self) -> list[str]:
        return [k for k, f in self.info["features"].items() if f["dtype"] not in ("video", "image")]

    @property
    def num_episodes(self) -> int:
        return len(self.episodes["episode_index"])

    @property
    def num_frames(self) -> int:
        return int(self.episodes["dataset_to_index"][-1]) if self.num_episodes else 0

    def path(self, relative: str) -> str:
        """Full filesystem path of a file given relative to the dataset root."""
        return f"{self.root}/{relative}" if self.root else relative

    def data_file(self, episode: int) -> str:
        """Relative path of the data parquet holding ``episode``."""
        e = self.episodes
        return data_path(int(e["data/chunk_index"][episode]), int(e["data/file_index"][episode]))

    def video_file(self, camera: str, episode: int) -> str:
        """Relative path of the mp4 holding ``episode`` for ``camera``."""
        e = self.episodes
        return video_path(
            camera,
            int(e[f"videos/{camera}/chunk_index"][episode]),
            int(e[f"videos/{camera}/file_index"][episode]),
        )

    def file_ids(self, episode: int) -> list[tuple]:
        """The (kind, chunk, file) ids of every file ``episode`` lives in (data and each camera)."""
        e = self.episodes
        ids = [("data", int(e["data/chunk_index"][episode]), int(e["data/file_index"][episode]))]
        for cam in self.video_keys:
            ids.append(
                (
                    cam,
                    int(e[f"videos/{cam}/chunk_index"][episode]),
                    int(e[f"videos/{cam}/file_index"][episode]),
                )
            )
        return ids

    def episode_of(self, index: np.ndarray | int) -> np.ndarray | int:
        """Episode holding each global frame index (``index`` column value)."""
        return np.searchsorted(self.episodes["dataset_to_index"], index, side="right")


def read_meta(
    url: str,
    *,
    name: str | None = None,
    storage_options: dict | None = None,
    retry_budget: retry.RetryBudget = retry.DEFAULT_BUDGET,
) -> DatasetMeta:
    """Read info.json, tasks.parquet and meta/episodes of the v3.0 dataset at ``url``; every
    remote read of the dataset is retried within ``retry_budget``.

    The ``stats/*`` columns of the episodes files are not read (lerobot drops them too,
    ``io_utils.py:212-218``).

    Raises:
        DatasetError: not a v3.0 dataset, missing files, or episodes not numbered 0..n-1.
    """
    meta = _info_only(url, name, storage_options, retry_budget)
    meta.tasks = read_tasks(meta)
    meta.episodes = _read_episodes(meta)
    return meta


def _info_only(
    url: str, name: str | None, storage_options: dict | None, retry_budget: retry.RetryBudget
) -> DatasetMeta:
    """The dataset's :class:`DatasetMeta` with its info.json only (no tasks, no episodes).

    Raises:
        DatasetError: no info.json, or not a v3.0 dataset.
    """
    fs, root = open_url(url, storage_options, retry_budget)
    name = name or root.rstrip("/").rsplit("/", 1)[-1]
    meta = DatasetMeta(
        name=name,
        url=str(url),
        info={},
        tasks=[],
        episodes={},
        storage_options=storage_options,
        root=root,
        retry_budget=retry_budget,
        _fs=(os.getpid(), fs),
    )
    try:
        meta.info = json.loads(cat_file(fs, meta.path(INFO_PATH), retry_budget))
    except FileNotFoundError as err:
        raise DatasetError(name, "no meta/info.json", file=meta.path(INFO_PATH)) from err
    if meta.info.get("codebase_version") != "v3.0":
        raise DatasetError(
            name,
            f"codebase_version {meta.info.get('codebase_version')!r}, expected 'v3.0'",
            file=meta.path(INFO_PATH),
        )
    return meta


def read_tasks(meta: DatasetMeta) -> list[str]:
    """Task strings by ``task_index`` from ``meta/tasks.parquet``: the one reader of that file.

    Accepts what lerobot 0.6.1's ``load_tasks`` (``pd.read_parquet``) accepts: the task
    strings as the pandas index, named ``task`` (lerobot's own writer) or unnamed
    (``__index_level_0__``, or whatever column the pandas metadata names as the index), or a
    plain ``task`` column; ``task_index`` is a column. See ``tasks_from_table``.

    Raises:
        DatasetError: missing or unreadable file, no task strings, no ``task_index`` column,
            or task indices not 0..n-1.
    """
    table = _read_parquet(meta, TASKS_PATH, columns=None)
    return tasks_from_table(table, name=meta.name, file=meta.path(TASKS_PATH))


def tasks_from_table(table: pa.Table, *, name: str, file: str) -> list[str]:
    """Task strings ordered by ``task_index`` from a ``meta/tasks.parquet`` table.

    The task strings are the ``task`` column if there is one, else the single pandas index
    column named in the schema's pandas metadata, else ``__index_level_0__``.

    Raises:
        DatasetError: (naming ``name`` and ``file``) no task strings, no ``task_index``
            column, null or non-string tasks, or task indices not 0..n-1.
    """
    names = table.column_names
    if "task_index" not in names:
        raise DatasetError(name, "no 'task_index' column", file=file)
    task_column = _task_strings_column(table)
    if task_column is None:
        raise DatasetError(
            name,
            f"no task strings (no 'task' column and no pandas index column; columns: {names})",
            file=file,
        )
    strings = table.column(task_column)
    if not (pa.types.is_string(strings.type) or pa.types.is_large_string(strings.type)):
        raise DatasetError(
            name, f"task strings column {task_column!r} has type {strings.type}", file=file
        )
    if strings.null_count:
        raise DatasetError(name, f"{strings.null_count} null task string(s)", file=file)
    index = table.column("task_index").to_numpy(zero_copy_only=False)
    if not np.array_equal(np.sort(index), np.arange(len(index))):
        raise DatasetError(name, "task_index is not 0..n-1", file=file)
    tasks = strings.to_pylist()
    return [tasks[int(i)] for i in np.argsort(index)]


def _task_strings_column(table: pa.Table) -> str | None:
    """Name of the column holding the task strings, or None."""
    names = table.column_names
    if "task" in names:
        return "task"
    pandas_meta = table.schema.pandas_metadata or {}
    # RangeIndex entries are dicts (no stored column); stored index columns are names.
    index_columns = [
        c
        for c in pandas_meta.get("index_columns", [])
        if isinstance(c, str) and c in names and c != "task_index"
    ]
    if len(index_columns) == 1:
        return index_columns[0]
    if "__index_level_0__" in names:
        return "__index_level_0__"
    return None


def _read_episodes(meta: DatasetMeta) -> dict[str, np.ndarray]:
    wanted = list(EPISODE_COLUMNS) + ["data/chunk_index", "data/file_index"]
    for cam in meta.video_keys:
        wanted += [f"videos/{cam}/{c}" for c in ("chunk_index", "file_index")]
        wanted += [f"videos/{cam}/{c}" for c in ("from_timestamp", "to_timestamp")]
    table = read_episodes_table(meta, wanted)
    episodes = {c: table.column(c).to_numpy() for c in wanted}
    if not np.array_equal(episodes["episode_index"], np.arange(len(table))):
        raise DatasetError(meta.name, "meta/episodes rows are not episodes 0..n-1 in order")
    return episodes


def read_episodes_table(
    meta: DatasetMeta, columns: list[str] | None = None, files: list[str] | None = None
) -> pa.Table:
    """``columns`` (None: all) of every ``meta/episodes/chunk-XXX/file-YYY.parquet`` file,
    concatenated in file order (found by walking the chunk and file numbers until one is
    missing; or ``files``, those :func:`episodes_files` found), each file's columns in the
    first file's order.

    Raises:
        DatasetError: no episodes file, or an unreadable one.
    """
    tables = []
    if files is None:
        chunks_size = int(meta.info.get("chunks_size") or DEFAULT_CHUNK_SIZE)
        files = episodes_files(meta.fs, meta.root, chunks_size, meta.retry_budget)
    for rel in files:
        tables.append(_read_parquet(meta, rel, columns=columns))
        columns = tables[0].column_names  # every later file's columns in the first's order
    if not tables:
        raise DatasetError(meta.name, "no episodes metadata", file=meta.path(episodes_path(0, 0)))
    return pa.concat_tables(tables)


def episodes_files(
    fs: fsspec.AbstractFileSystem,
    root: str,
    chunks_size: int = DEFAULT_CHUNK_SIZE,
    budget: retry.RetryBudget = retry.DEFAULT_BUDGET,
) -> list[str]:
    """The ``meta/episodes`` files of the dataset at ``root`` (relative paths, in order),
    found without a listing: ``chunk-000/file-000`` and each next one as lerobot numbers them
    (:func:`robopipe.layout.next_chunk_file`, ``chunks_size`` files a chunk), until one is
    missing. One existence test per file and one more, each retried within ``budget``.

    Raises:
        robopipe.retry.RemoteReadError: an existence test failed on every attempt.
    """
    found, chunk, file = [], 0, 0
    while True:
        rel = episodes_path(chunk, file)
        if not exists(fs, f"{root}/{rel}" if root else rel, budget):
            return found
        found.append(rel)
        chunk, file = next_chunk_file(chunk, file, chunks_size)


def file_index_columns(cameras: Iterable[str]) -> list[str]:
    """The ``meta/episodes`` columns that name each episode's data file and, per camera in
    ``cameras``, its video file (what :func:`named_files` reads)."""
    columns = ["data/chunk_index", "data/file_index"]
    for cam in cameras:
        columns += [f"videos/{cam}/chunk_index", f"videos/{cam}/file_index"]
    return columns


def named_files(
    info: dict, episodes, rows: Iterable[int], cameras: Iterable[str]
) -> tuple[dict[str, list[int]], dict[tuple[str, str], list[int]]]:
    """The files that episode rows name, as lerobot 0.6.1 fills in info.json's templates.

    Args:
        info: ``meta/info.json`` (its ``data_path`` and ``video_path``; lerobot's own
            templates where it has none).
        episodes: the ``meta/episodes`` columns by name (numpy arrays, e.g. a dict), at least
            :func:`file_index_columns` of ``cameras``.
        rows: the row positions to name the files of.
        cameras: the video keys whose files are named.

    Returns:
        ``(data, videos)``: each data file (relative path) -> the rows it holds, and each
        ``(camera, video file)`` -> the rows it holds; files in the order their first row
        names them (cameras in ``cameras`` order), rows in ``rows`` order.

    Raises:
        KeyError, ValueError, IndexError: a template that ``chunk_index``, ``file_index``
            and ``video_key`` cannot fill in.
    """
    rows = list(rows)
    data_template = info.get("data_path") or DATA_PATH
    data: dict[str, list[int]] = {}
    for row in rows:
        rel = data_template.format(
            chunk_index=int(episodes["data/chunk_index"][row]),
            file_index=int(episodes["data/file_index"][row]),
        )
        data.setdefault(rel, []).append(row)
    video_template = info.get("video_path") or VIDEO_PATH
    videos: dict[tuple[str, str], list[int]] = {}
    for cam in cameras:
        for row in rows:
            rel = video_template.format(
                video_key=cam,
                chunk_index=int(episodes[f"videos/{cam}/chunk_index"][row]),
                file_index=int(episodes[f"videos/{cam}/file_index"][row]),
            )
            videos.setdefault((cam, rel), []).append(row)
    return data, videos


class DatasetFiles(NamedTuple):
    """Every file a v3.0 dataset's metadata names, relative to its root, each list sorted."""

    meta: list[str]  # info.json, stats.json, tasks.parquet, the meta/episodes files
    data: list[str]
    videos: list[str]


def dataset_files(
    url: str,
    storage_options: dict | None = None,
    retry_budget: retry.RetryBudget = retry.DEFAULT_BUDGET,
) -> DatasetFiles:
    """The files of the v3.0 dataset at ``url`` as its metadata names them, without a listing
    (a plain http server lists nothing): ``meta/info.json``, then the data and video file
    indices of every ``meta/episodes`` file (:func:`episodes_files`, :func:`named_files`:
    what the v3.0 check reads too). The metadata files are read whole; every read and
    existence test is retried within ``retry_budget``.

    Raises:
        DatasetError: no ``meta/info.json``, not a v3.0 dataset, no episodes file, or an
            unreadable one.
        robopipe.retry.RemoteReadError: a read failed on every attempt.
    """
    meta = _info_only(url, None, storage_options, retry_budget)
    cameras = meta.video_keys
    columns = file_index_columns(cameras)
    chunks_size = int(meta.info.get("chunks_size") or DEFAULT_CHUNK_SIZE)
    walked = episodes_files(meta.fs, meta.root, chunks_size, retry_budget)
    table = read_episodes_table(meta, columns, walked)
    episodes = {c: table.column(c).to_numpy() for c in columns}
    data, videos = named_files(meta.info, episodes, range(table.num_rows), cameras)
    return DatasetFiles(
        sorted([INFO_PATH, STATS_PATH, TASKS_PATH, *walked]),
        sorted(data),
        sorted({rel for _cam, rel in videos}),
    )


def _read_parquet(meta: DatasetMeta, relative: str, columns: list[str] | None) -> pa.Table:
    """``columns`` (None: all) of one parquet file.

    A local file, or a remote data file of a dataset with frames stored in it (a JPEG or raw
    copy, gigabytes of frames), is read column chunk by column chunk, so that frame bytes are
    not read; any other remote file in one request (fewer round trips).
    """
    path = meta.path(relative)
    try:
        if isinstance(meta.fs, LocalFileSystem):
            source = path
        elif columns is not None and meta.stored_frame_keys:
            source = open_file(meta.fs, path, meta.retry_budget)
        else:
            source = io.BytesIO(cat_file(meta.fs, path, meta.retry_budget))
        return pq.ParquetFile(source).read(columns=columns, use_threads=False)
    except FileNotFoundError as err:
        raise DatasetError(meta.name, "missing file", file=path) from err
    except (pa.ArrowInvalid, KeyError) as err:
        raise DatasetError(meta.name, f"unreadable parquet: {err}", file=path) from err


def read_data_file(meta: DatasetMeta, relative: str) -> dict[str, np.ndarray]:
    """The data columns of one data parquet file as numpy arrays.

    Each column of ``meta.data_keys`` becomes an array of shape (rows, *feature shape) with
    the feature's dtype, except features of shape [1], which become (rows,) (as lerobot's
    items hold them as 0-d tensors). ``list<float>`` and ``fixed_size_list`` both work.

    Raises:
        DatasetError: missing file or column, or a column whose width differs from info.json.
    """
    table = _read_parquet(meta, relative, columns=meta.data_keys)
    return _data_columns(meta, table, relative)


def open_data_file(meta: DatasetMeta, relative: str) -> tuple[pq.ParquetFile, np.ndarray]:
    """One data parquet file opened for reading row groups, and where its row groups start.

    Only the footer is read here; a remote file is read by ranges later, one row group at a
    time (:func:`read_data_rows`). The starts are the cumulative row counts: row group ``g``
    holds the file's rows ``starts[g]:starts[g + 1]`` (``len(starts)`` is the number of row
    groups plus one).

    Raises:
        DatasetError: missing or unreadable file.
        robopipe.retry.RemoteReadError: a remote read failed on every attempt.
    """
    path = meta.path(relative)
    try:
        local = isinstance(meta.fs, LocalFileSystem)  # a path reads faster than a file object
        parquet = pq.ParquetFile(path if local else open_file(meta.fs, path, meta.retry_budget))
    except FileNotFoundError as err:
        raise DatasetError(meta.name, "missing file", file=path) from err
    except retry.RemoteReadError:  # a server that kept failing: its one line, not bad data
        raise
    except (pa.ArrowInvalid, OSError) as err:
        raise DatasetError(meta.name, f"unreadable parquet: {err}", file=path) from err
    metadata = parquet.metadata
    rows = [metadata.row_group(g).num_rows for g in range(metadata.num_row_groups)]
    return parquet, np.cumsum([0, *rows])


def row_groups_of_rows(starts: np.ndarray, first: int, count: int) -> range:
    """The row groups holding a file's rows ``first:first + count`` (``starts`` as
    :func:`open_data_file` gives them): one group per episode in files written one row group
    per episode (robopipe, lerobot's recorder and ``aggregate``), the only group in files of
    one row group (lerobot's v2.1 -> v3.0 converter)."""
    lo = int(np.searchsorted(starts, first, side="right")) - 1
    hi = int(np.searchsorted(starts, first + max(count, 1) - 1, side="right"))
    return range(max(lo, 0), max(hi, lo + 1))


def read_data_rows(
    meta: DatasetMeta, relative: str, parquet: pq.ParquetFile, groups: range
) -> dict[str, np.ndarray]:
    """The data columns (as :func:`read_data_file`) of the row groups ``groups`` of the data
    file ``relative``, opened as ``parquet`` (:func:`open_data_file`).

    Raises:
        DatasetError: unreadable row groups, or a column as :func:`read_data_file` says.
        robopipe.retry.RemoteReadError: a remote read failed on every attempt.
    """
    try:
        table = parquet.read_row_groups(list(groups), columns=meta.data_keys, use_threads=False)
    except retry.RemoteReadError:
        raise
    except (pa.ArrowInvalid, KeyError, OSError) as err:
        raise DatasetError(meta.name, f"unreadable parquet: {err}", file=relative) from err
    return _data_columns(meta, table, relative)


def _data_columns(meta: DatasetMeta, table: pa.Table, relative: str) -> dict[str, np.ndarray]:
    columns = {}
    for key in meta.data_keys:
        feature = meta.info["features"][key]
        shape = tuple(feature["shape"])
        column = table.column(key).combine_chunks()
        if pa.types.is_list(column.type) or pa.types.is_fixed_size_list(column.type):
            values = column.flatten().to_numpy(zero_copy_only=False)
            if values.size != len(column) * int(np.prod(shape)):
                raise DatasetError(
                    meta.name, f"column {key!r} does not have shape {shape}", file=relative
                )
            array = values.reshape((len(column), *shape))
        else:
            array = column.to_numpy(zero_copy_only=False)
            if shape != (1,):
                array = array.reshape((len(column), *shape))
        columns[key] = array.astype(_numpy_dtype(feature["dtype"]), copy=False)
    return columns


def _numpy_dtype(dtype: str) -> np.dtype:
    return np.dtype("bool" if dtype == "bool" else dtype)

"""One episode's columns, frames and stored stats, from a LeRobot v2.0, v2.1 or v3.0 dataset at
a local folder or any fsspec URL.

v2.x: one parquet per episode and one mp4 per episode and camera, named by info.json's
``data_path`` / ``video_path`` templates, frame ``i`` of the mp4 at ``i / fps`` seconds;
lengths from ``meta/episodes.jsonl``, stats from ``meta/episodes_stats.jsonl``. v3.0: packed
files named by ``meta/episodes`` (:mod:`robopipe.formats.v30_reader`), an episode's frame
``i`` at ``from_timestamp + i / fps`` of its camera's mp4, stats from the ``stats/*`` columns
of ``meta/episodes``. Both: global stats from ``meta/stats.json`` where there is one.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from robopipe.errors import DatasetError
from robopipe.formats import v30_reader
from robopipe.layout import (
    DEFAULT_CHUNK_SIZE,
    INFO_PATH,
    STATS_PATH,
    V21_EPISODES_PATH,
    V21_EPISODES_STATS_PATH,
)

# columns every LeRobot dataset has that are bookkeeping, not signals
INDEX_COLUMNS = ("timestamp", "frame_index", "episode_index", "index", "task_index")
NUMERIC_DTYPES = frozenset(
    (
        "float16",
        "float32",
        "float64",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "bool",
    )  # fmt: skip
)
CAMERA_DTYPES = ("video", "image")
_EPISODE_PREFIX = re.compile(rb'^\s*\{\s*"episode_index"\s*:\s*(\d+)')


@dataclass
class QualityDataset:
    """A dataset opened for the quality checks: its info.json and where each episode's rows
    and frames are. Build with :func:`open_dataset`.

    Attributes:
        root: the URL or folder as given.
        name: the root's last path component (for messages).
        info: ``meta/info.json``.
        version: ``codebase_version`` (``"v2.0"``, ``"v2.1"`` or ``"v3.0"``).
        lengths: int64 ``(episodes,)``: frames per episode, by episode index.
        meta: the v3.0 :class:`robopipe.formats.v30_reader.DatasetMeta` (None for v2.x).
    """

    root: str
    name: str
    info: dict
    version: str
    lengths: np.ndarray
    fs: object = field(repr=False)
    path_root: str = ""
    meta: v30_reader.DatasetMeta | None = None

    @property
    def fps(self) -> float:
        return float(self.info["fps"])

    @property
    def features(self) -> dict:
        return self.info["features"]

    @property
    def video_keys(self) -> list[str]:
        """The cameras stored as mp4 (features of dtype ``video``), in info.json order."""
        return [k for k, f in self.features.items() if f.get("dtype") == "video"]

    @property
    def signal_keys(self) -> list[str]:
        """Numeric features the content checks read: every feature of a numeric dtype but the
        bookkeeping columns (:data:`INDEX_COLUMNS`), in info.json order."""
        return [
            k
            for k, f in self.features.items()
            if f.get("dtype") in NUMERIC_DTYPES and k not in INDEX_COLUMNS
        ]

    @property
    def unknown_keys(self) -> list[str]:
        """Features the checks do not read: not numeric, not a camera, not a string."""
        known = (*NUMERIC_DTYPES, *CAMERA_DTYPES, "string")
        return [k for k, f in self.features.items() if f.get("dtype") not in known]

    @property
    def num_episodes(self) -> int:
        return len(self.lengths)

    def dimension_names(self, key: str) -> list[str]:
        """Names of ``key``'s dimensions: info.json's ``names`` where it lists one per
        dimension (a list, or a dict holding one list), else ``"<key>[d]"``."""
        feature = self.features[key]
        width = int(np.prod(feature.get("shape") or [1]))
        names = feature.get("names")
        if isinstance(names, dict) and len(names) == 1:
            names = next(iter(names.values()))
        if (
            isinstance(names, list)
            and len(names) == width
            and all(isinstance(n, str) for n in names)
        ):
            return names
        return [f"{key}[{d}]" for d in range(width)]

    def full(self, relative: str) -> str:
        return f"{self.path_root}/{relative}" if self.path_root else relative

    # ------------------------------------------------------------------ files
    def data_file(self, episode: int) -> str:
        """Path (on :attr:`fs`) of the parquet holding ``episode``."""
        if self.meta is not None:
            return self.full(self.meta.data_file(episode))
        chunk = episode // int(self.info.get("chunks_size") or DEFAULT_CHUNK_SIZE)
        return self.full(self.info["data_path"].format(episode_chunk=chunk, episode_index=episode))

    def video_file(self, episode: int, video_key: str) -> str:
        """Path (on :attr:`fs`) of the mp4 holding ``episode``'s frames of ``video_key``."""
        if self.meta is not None:
            return self.full(self.meta.video_file(video_key, episode))
        chunk = episode // int(self.info.get("chunks_size") or DEFAULT_CHUNK_SIZE)
        return self.full(
            self.info["video_path"].format(
                episode_chunk=chunk, episode_index=episode, video_key=video_key
            )
        )

    def video_start_s(self, episode: int, video_key: str) -> float:
        """Seconds from the start of :meth:`video_file` to ``episode``'s first frame."""
        if self.meta is None:
            return 0.0
        return float(self.meta.episodes[f"videos/{video_key}/from_timestamp"][episode])

    def check_episode(self, episode: int) -> None:
        if not 0 <= episode < self.num_episodes:
            raise DatasetError(
                self.name, f"no episode {episode} (the dataset has {self.num_episodes})"
            )

    # ------------------------------------------------------------------ rows
    def episode_table(self, episode: int, columns: Sequence[str]) -> pa.Table:
        """``columns`` of ``episode``'s rows, read with pyarrow (a v3.0 data file's row groups
        holding the episode only).

        Raises:
            FileNotFoundError: the data file is missing.
            DatasetError: the file is unreadable, lacks a column, or its rows do not match
                the episode's length.
        """
        self.check_episode(episode)
        path = self.data_file(episode)
        columns = list(dict.fromkeys(columns))
        try:
            with self.fs.open(path, "rb") as f:
                parquet = pq.ParquetFile(f)
                missing = [c for c in columns if c not in parquet.schema_arrow.names]
                if missing:
                    raise DatasetError(
                        self.name, f"no column(s) {', '.join(missing)}", episode=episode, file=path
                    )
                if self.meta is None:
                    table = parquet.read(columns=columns, use_threads=False)
                else:
                    table = self._v30_rows(parquet, episode, columns)
        except (pa.ArrowInvalid, OSError) as err:
            if isinstance(err, FileNotFoundError):
                raise
            raise DatasetError(
                self.name, f"unreadable parquet: {err}", episode=episode, file=path
            ) from None
        if table.num_rows != self.lengths[episode]:
            raise DatasetError(
                self.name,
                f"{table.num_rows} rows, the metadata says {self.lengths[episode]}",
                episode=episode,
                file=path,
            )
        return table

    def _v30_rows(self, parquet: pq.ParquetFile, episode: int, columns: list[str]) -> pa.Table:
        e = self.meta.episodes
        first = int(e["dataset_from_index"][episode])
        count = int(e["length"][episode])
        wanted = list(dict.fromkeys([*columns, "index"]))
        metadata = parquet.metadata
        rows = [metadata.row_group(g).num_rows for g in range(metadata.num_row_groups)]
        starts = np.cumsum([0, *rows])
        # the file's first global index, from the first row group's statistics where written
        offset = _first_index(parquet)
        groups = v30_reader.row_groups_of_rows(starts, first - offset, count)
        table = parquet.read_row_groups(list(groups), columns=wanted, use_threads=False)
        index = table.column("index")
        mask = pc.and_(pc.greater_equal(index, first), pc.less(index, first + count))
        return table.filter(mask).select(columns)

    def columns(self, episode: int, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """:func:`read_episode_columns` on this dataset."""
        table = self.episode_table(episode, keys)
        return {key: column_array(table.column(key)) for key in keys}

    # ------------------------------------------------------------------ stats
    def stored_episode_stats(self, episodes: Iterable[int]) -> dict[int, dict]:
        """The stored stats of ``episodes``: ``{episode: {feature: {stat: ndarray}}}``
        (``min``, ``max``, ``mean``, ``std``, ``count``); episodes without stored stats are
        left out. v2.1: the lines of ``meta/episodes_stats.jsonl`` of those episodes (others
        are not parsed); v3.0: the ``stats/*`` columns of the ``meta/episodes`` files that
        hold them.

        Raises:
            DatasetError: the file is unreadable.
        """
        wanted = set(int(e) for e in episodes)
        if self.meta is not None:
            return self._v30_stats(wanted)
        path = self.full(V21_EPISODES_STATS_PATH)
        if not self.fs.exists(path):
            return {}
        found: dict[int, dict] = {}
        with self.fs.open(path, "rb") as lines:
            for number, line in enumerate(lines, start=1):
                head = _EPISODE_PREFIX.match(line)
                if head is not None and int(head.group(1)) not in wanted:
                    continue
                if not line.strip():
                    continue
                try:
                    entry = json.loads(line)
                except ValueError as err:
                    raise DatasetError(
                        self.name, f"line {number} is not valid JSON: {err}", file=path
                    ) from None
                if entry.get("episode_index") in wanted and isinstance(entry.get("stats"), dict):
                    found[entry["episode_index"]] = _stats_arrays(entry["stats"])
        return found

    def _v30_stats(self, wanted: set[int]) -> dict[int, dict]:
        chunks = int(self.info.get("chunks_size") or DEFAULT_CHUNK_SIZE)
        found: dict[int, dict] = {}
        for rel in v30_reader.episodes_files(self.fs, self.path_root, chunks):
            with self.fs.open(self.full(rel), "rb") as f:
                parquet = pq.ParquetFile(f)
                names = parquet.schema_arrow.names
                index = parquet.read(columns=["episode_index"]).column(0).to_numpy()
                rows = np.flatnonzero(np.isin(index, list(wanted)))
                if not len(rows):
                    continue
                stat_columns = [c for c in names if c.startswith("stats/")]
                table = parquet.read(columns=stat_columns).take(pa.array(rows))
            for row, episode in zip(range(len(rows)), index[rows].tolist(), strict=True):
                stats: dict[str, dict] = {}
                for column in stat_columns:
                    _, rest = column.split("/", 1)
                    key, stat = rest.rsplit("/", 1)
                    value = table.column(column)[row].as_py()
                    if value is not None:
                        stats.setdefault(key, {})[stat] = np.asarray(value, dtype=np.float64)
                found[int(episode)] = stats
        return found

    def stored_global_stats(self) -> dict:
        """``meta/stats.json`` as ``{feature: {stat: ndarray}}``, ``{}`` where there is none.

        Raises:
            DatasetError: the file is not valid JSON.
        """
        path = self.full(STATS_PATH)
        if not self.fs.exists(path):
            return {}
        try:
            stats = json.loads(self.fs.cat_file(path))
        except ValueError as err:
            raise DatasetError(self.name, f"not valid JSON: {err}", file=path) from None
        return _stats_arrays(stats) if isinstance(stats, dict) else {}


def _first_index(parquet: pq.ParquetFile) -> int:
    """The ``index`` value of a v3.0 data file's first row (from the footer's statistics where
    written, else read)."""
    names = parquet.schema_arrow.names
    column = names.index("index")
    group = parquet.metadata.row_group(0)
    stats = group.column(column).statistics
    if stats is not None and stats.has_min_max:
        return int(stats.min)
    return int(parquet.read_row_group(0, columns=["index"]).column(0)[0].as_py())


def _stats_arrays(stats: dict) -> dict[str, dict[str, np.ndarray]]:
    out: dict[str, dict[str, np.ndarray]] = {}
    for key, entry in stats.items():
        if not isinstance(entry, dict):
            continue
        arrays = {}
        for stat, value in entry.items():
            try:
                arrays[stat] = np.asarray(value, dtype=np.float64)
            except (TypeError, ValueError):
                continue
        out[key] = arrays
    return out


def column_array(column: pa.ChunkedArray) -> np.ndarray:
    """A numeric parquet column as a numpy array: ``(frames,)`` for scalars, ``(frames, D)``
    for vectors (``list`` or ``fixed_size_list``), in the column's dtype.

    Raises:
        ValueError: a nested column whose rows differ in length, or a non-numeric column.
    """
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if (
        pa.types.is_list(column.type)
        or pa.types.is_large_list(column.type)
        or (pa.types.is_fixed_size_list(column.type))
    ):
        values = column.flatten().to_numpy(zero_copy_only=False)
        rows = len(column)
        if rows and values.size % rows:
            raise ValueError("rows of different lengths")
        return values.reshape(rows, -1 if rows else 0)
    if not (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)
            or pa.types.is_boolean(column.type)):  # fmt: skip
        raise ValueError(f"column of type {column.type} is not numeric")
    return column.to_numpy(zero_copy_only=False)


@functools.lru_cache(maxsize=4)
def _open_cached(root: str, options_key: str) -> QualityDataset:
    return _open(root, json.loads(options_key) or None)


def forget_opened() -> None:
    """Drop the datasets :func:`open_dataset` keeps, so that the next call reads the
    metadata again (after a dataset's files were rewritten in place)."""
    _open_cached.cache_clear()


def open_dataset(root: str, *, storage_options: dict | None = None) -> QualityDataset:
    """Open the dataset at ``root`` (a folder or fsspec URL): its info.json and episode
    lengths (v3.0: meta/episodes), nothing per frame. The last few opened are cached.

    Raises:
        DatasetError: no info.json, an unknown ``codebase_version``, or unreadable episode
            metadata.
    """
    return _open_cached(str(root), json.dumps(storage_options or {}, sort_keys=True))


def _open(root: str, storage_options: dict | None) -> QualityDataset:
    fs, path_root = v30_reader.open_url(root, storage_options)
    name = path_root.rstrip("/").rsplit("/", 1)[-1] or str(root)
    info_path = f"{path_root}/{INFO_PATH}" if path_root else INFO_PATH
    try:
        info = json.loads(fs.cat_file(info_path))
    except FileNotFoundError:
        raise DatasetError(name, "no meta/info.json", file=INFO_PATH) from None
    except ValueError as err:
        raise DatasetError(name, f"not valid JSON: {err}", file=INFO_PATH) from None
    version = info.get("codebase_version")
    if version == "v3.0":
        meta = v30_reader.read_meta(root, name=name, storage_options=storage_options)
        lengths = np.asarray(meta.episodes["length"], dtype=np.int64)
        return QualityDataset(str(root), name, meta.info, version, lengths, fs, path_root, meta)
    if version not in ("v2.0", "v2.1"):
        raise DatasetError(
            name,
            f"codebase_version {version!r}: the quality checks read v2.0, v2.1 and v3.0",
            file=INFO_PATH,
        )
    lengths = _v21_lengths(fs, path_root, name, int(info.get("total_episodes", 0)))
    return QualityDataset(str(root), name, info, version, lengths, fs, path_root)


def _v21_lengths(fs, path_root: str, name: str, total: int) -> np.ndarray:
    path = f"{path_root}/{V21_EPISODES_PATH}" if path_root else V21_EPISODES_PATH
    lengths = np.full(total, -1, dtype=np.int64)
    try:
        with fs.open(path, "rb") as lines:
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                try:
                    entry = json.loads(line)
                    episode, length = int(entry["episode_index"]), int(entry["length"])
                except (ValueError, KeyError, TypeError):
                    raise DatasetError(
                        name, f"line {number}: no episode_index and length", file=path
                    ) from None
                if episode >= len(lengths):
                    lengths = np.concatenate([lengths, np.full(episode + 1 - len(lengths), -1)])
                lengths[episode] = length
    except FileNotFoundError:
        raise DatasetError(name, "file is missing", file=V21_EPISODES_PATH) from None
    missing = np.flatnonzero(lengths < 0)
    if len(missing):
        raise DatasetError(name, "episode not listed", episode=int(missing[0]), file=path)
    return lengths


def read_episode_columns(
    root: str, episode_index: int, columns: Sequence[str], *, storage_options: dict | None = None
) -> dict[str, np.ndarray]:
    """``columns`` of one episode as numpy arrays: ``(frames,)`` for a scalar feature,
    ``(frames, D)`` for a vector, in the column's dtype (float32 for lerobot's features).

    Works for v2.0, v2.1 (the episode's parquet) and v3.0 (its rows of the packed data file,
    the row groups holding it only) at a folder or fsspec URL.

    Raises:
        DatasetError: no such episode or column, an unreadable file.
        FileNotFoundError: the episode's data file is missing.
    """
    dataset = open_dataset(root, storage_options=storage_options)
    return dataset.columns(int(episode_index), list(columns))


def read_episode_frames(
    root: str,
    episode_index: int,
    video_key: str,
    frame_indices: Sequence[int],
    *,
    storage_options: dict | None = None,
) -> np.ndarray:
    """Frames ``frame_indices`` (of the episode, 0-based) of camera ``video_key``: uint8
    ``(n, H, W, 3)`` RGB, in the order asked, decoded on the CPU with PyAV (only the GOPs
    holding them, :func:`robopipe.quality.video._cpu_frames`).

    Raises:
        DatasetError: no such episode or camera, a frame index out of range, or a video file
            that is missing or cannot be decoded (the message names the file).
    """
    from robopipe.quality.video import decode_rgb

    dataset = open_dataset(root, storage_options=storage_options)
    episode = int(episode_index)
    dataset.check_episode(episode)
    if video_key not in dataset.video_keys:
        raise DatasetError(
            dataset.name, f"no camera {video_key!r} (cameras: {', '.join(dataset.video_keys)})"
        )
    indices = np.asarray(frame_indices, dtype=np.int64)
    length = int(dataset.lengths[episode])
    if len(indices) and (indices.min() < 0 or indices.max() >= length):
        raise DatasetError(
            dataset.name, f"frame index out of range 0..{length - 1}", episode=episode
        )
    path = dataset.video_file(episode, video_key)
    return decode_rgb(dataset, path, dataset.video_start_s(episode, video_key), indices, episode)


def v30_batches(root: str, *, storage_options: dict | None = None) -> list[list[int]]:
    """The episode batches of a v3.0 dataset: one per data file, the episode indices it holds
    (from meta/episodes alone), in file order.

    Raises:
        DatasetError: not a v3.0 dataset, or unreadable episode metadata.
    """
    dataset = open_dataset(root, storage_options=storage_options)
    if dataset.meta is None:
        raise DatasetError(dataset.name, f"a {dataset.version} dataset has no packed data files")
    e = dataset.meta.episodes
    batches: dict[tuple[int, int], list[int]] = {}
    for episode, chunk, file in zip(
        e["episode_index"].tolist(),
        e["data/chunk_index"].tolist(),
        e["data/file_index"].tolist(),
        strict=True,
    ):
        batches.setdefault((chunk, file), []).append(int(episode))
    return list(batches.values())

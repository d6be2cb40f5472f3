"""Check one v2.1 episode's files: its parquet (footer, rows, columns and their dtypes and
shapes, timestamps) and each camera's mp4 (present, readable, not truncated, its stream as
``info.json`` declares it, as many frames as the parquet has rows), every path inside the
dataset root."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from fractions import Fraction
from pathlib import Path

import numpy as np

from robopipe.checks.report import Problem
from robopipe.checks.rules import (
    FRAME_INDEX_MESSAGE,
    timestamp_error,
    undeclared_column_message,
    unknown_task_indices,
    unknown_task_message,
)
from robopipe.checks.streams import consistency_key, stream_signature
from robopipe.formats.v21_reader import V21Source, declared_stream
from robopipe.formats.v21_repairs import (
    DERIVABLE_COLUMNS,
    column_feature,
    repairs_of,
    undeclared_columns,
)
from robopipe.layout import DEFAULT_FEATURES, V21_TASKS_PATH
from robopipe.options import ConversionOptions
from robopipe.retry import RemoteReadError


class EpisodeChecker:
    """Checks one episode's files (thread-safe: each call returns its own results) and
    collects each camera's stream parameters for :meth:`consistency_problems`."""

    def __init__(
        self,
        source: V21Source,
        options: ConversionOptions,
        lengths: Mapping[int, int | None],
        first_index: Mapping[int, int | None] | None = None,
    ) -> None:
        """``lengths``: ``episodes.jsonl``'s length of each episode it checks (None where the
        line has none); ``first_index``: each one's first ``index`` value, the frames of every
        episode before it in episode order (None where an earlier length is missing; the
        ``index`` column goes unchecked without it)."""
        self.source = source
        self.lengths = lengths  # of the episodes it checks
        self.first_index = first_index or {}
        self.prefix = os.path.join(str(source.root), "")  # the root as paths start with it
        self.real_root = str(source.root.resolve())
        self.real_prefix = os.path.join(self.real_root, "")
        self.real_folders: dict[str, str] = {}  # os.path.realpath of each folder
        self.repairs = repairs_of(options)
        self.restamp = options.restamp_timestamps
        self.tolerance_s = options.tolerance_s
        # the stream PyAV found in an earlier mp4 of the same stream_signature
        self.known_streams: dict[tuple, dict] = {}

    def check(self, episode: int) -> tuple[list[Problem], dict[str, list[int]], dict[str, tuple]]:
        """The episode's problems, its files' ``[size, mtime_ns]`` and each readable camera's
        :func:`consistency_key` of its stream."""
        problems: list[Problem] = []
        files: dict[str, list[int]] = {}
        streams = {}
        rows = self._check_data(episode, problems, files)
        for key in self.source.video_keys:
            params = self._check_video(episode, key, rows, problems, files)
            if params is not None:
                streams[key] = consistency_key(params)
        return problems, files, streams

    def _resolve(self, path: str) -> tuple[str, os.stat_result | None]:
        """``os.path.realpath(path)``, and the file's stat where it is a local file that is
        not a symlink (None otherwise): each folder resolved once, each file one ``lstat``
        (``realpath`` makes one per path component)."""
        if self.source.remote:
            return os.path.realpath(path), None
        folder, name = os.path.split(path)
        real_folder = self.real_folders.get(folder)
        if real_folder is None:
            real_folder = self.real_folders.setdefault(folder, os.path.realpath(folder))
        try:
            found = os.lstat(path)
        except FileNotFoundError:
            return os.path.join(real_folder, name), None
        if stat.S_ISLNK(found.st_mode):
            return os.path.realpath(path), None
        return os.path.join(real_folder, name), found

    def _locate(self, episode: int, path: Path, what: str, problems: list[Problem], files: dict):
        """The path relative to the root, or None (with a problem) when it is unusable;
        ``what`` names the file in messages (``data file``, ``video file``)."""
        text = str(path)
        rel = text[len(self.prefix) :] if text.startswith(self.prefix) else ""
        if not rel or "/../" in f"/{rel}/":  # a path that needs normalising
            rel = os.path.relpath(path, self.source.root)
        real, found = self._resolve(text)
        if real != self.real_root and not real.startswith(self.real_prefix):
            problems.append(
                Problem(
                    "outside_root",
                    f"resolves to {real}, outside the dataset folder; keep every file (and "
                    "symlink target) inside it, or fix the path template in info.json",
                    episode,
                    rel,
                )
            )
            return None
        try:
            size, mtime_ns = (
                (found.st_size, found.st_mtime_ns) if found else self.source.file_signature(path)
            )
        except FileNotFoundError:
            problems.append(
                Problem(
                    "missing_file",
                    f"{what} is missing; restore it, or leave the episode out with `skip_episodes`",
                    episode,
                    rel,
                )
            )
            return None
        files[rel] = [size, mtime_ns]
        if size == 0:
            problems.append(
                Problem(
                    "empty_file",
                    f"{what} is empty; restore it, or leave the episode out with `skip_episodes`",
                    episode,
                    rel,
                )
            )
            return None
        return rel

    def _check_data(self, episode: int, problems: list[Problem], files: dict) -> int | None:
        import pyarrow.parquet as pq

        source = self.source
        path = source.data_file(episode)
        rel = self._locate(episode, path, "data file", problems, files)
        if rel is None:
            return None
        try:
            parquet = pq.ParquetFile(source.readable(path))
        except RemoteReadError:
            raise  # a network give-up says nothing of the file
        except Exception as exc:  # ArrowInvalid / OSError: truncated or not a parquet
            problems.append(
                Problem(
                    "unreadable_file",
                    f"unreadable parquet ({exc}); restore the file, or "
                    "leave the episode out with `skip_episodes`",
                    episode,
                    rel,
                )
            )
            return None
        rows = parquet.metadata.num_rows
        length = self.lengths.get(episode)
        if rows != length:
            problems.append(
                Problem(
                    "frame_count",
                    f"parquet has {rows} rows but episodes.jsonl says length={length}",
                    episode,
                    rel,
                )
            )
        schema = parquet.schema_arrow
        for column in DEFAULT_FEATURES:
            if schema.get_field_index(column) >= 0:
                continue
            if column in DERIVABLE_COLUMNS:
                if not self.repairs["derive_missing_columns"]:
                    problems.append(
                        Problem(
                            "columns",
                            f"column {column!r} is missing; set "
                            "`derive_missing_columns: true` to derive it",
                            episode,
                            rel,
                        )
                    )
            else:
                problems.append(
                    Problem(
                        "columns", f"column {column!r} is missing; lerobot needs it", episode, rel
                    )
                )
        for feature, spec in source.info["features"].items():
            if spec.get("dtype") in ("video", "image"):
                continue
            if schema.get_field_index(feature) < 0:
                if feature in DEFAULT_FEATURES:
                    continue  # named above
                problems.append(
                    Problem(
                        "columns",
                        f"column {feature!r} of info.json's features is "
                        "missing; add it, or remove the feature from info.json",
                        episode,
                        rel,
                    )
                )
            else:
                problems += self._feature_problems(episode, rel, feature, spec, schema)
        mode = self.repairs["undeclared_columns"]
        for column in undeclared_columns(schema.names, source.info["features"]):
            arrow_type = schema.field(column).type
            if mode == "drop" or (mode == "declare" and column_feature(arrow_type)):
                continue
            message = undeclared_column_message(column, "the parquet holds")
            if mode == "declare":  # a type the repair cannot declare
                message = (
                    f"the parquet holds a column {column!r} that info.json's features do not "
                    f"declare, of type {arrow_type}, which `undeclared_columns: declare` "
                    "cannot declare (bool or numeric scalars and fixed-size lists only); "
                    "declare it in info.json (dtype, shape, names), or set "
                    "`undeclared_columns: drop`"
                )
            problems.append(Problem("undeclared_column", message, episode, rel))
        problems += self._row_problems(episode, rel, parquet)
        return rows

    def _feature_problems(self, episode, rel, feature, spec, schema) -> list[Problem]:
        import pyarrow as pa

        arrow_type = schema.field(feature).type
        declared = spec.get("dtype")
        shape = list(spec.get("shape") or [1])
        size = None
        if pa.types.is_fixed_size_list(arrow_type):
            size, arrow_type = arrow_type.list_size, arrow_type.value_type
        elif pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
            arrow_type = arrow_type.value_type
        elif shape != [1]:
            return [
                Problem(
                    "feature_shape",
                    f"column {feature!r} holds scalars but info.json declares shape {shape}",
                    episode,
                    rel,
                )
            ]
        try:
            stored = str(arrow_type.to_pandas_dtype().__name__)
        except NotImplementedError:
            stored = str(arrow_type)
        stored = {"float_": "float64", "bool_": "bool", "str_": "string", "object_": "string"}.get(
            stored, stored
        )
        problems = []
        if size is not None and [size] != shape:
            problems.append(
                Problem(
                    "feature_shape",
                    f"column {feature!r} holds vectors of {size} but "
                    f"info.json declares shape {shape}",
                    episode,
                    rel,
                )
            )
        if stored == declared or (declared == "string" and stored == "string"):
            return problems
        if stored == "float64" and declared == "float32":
            if not self.repairs["cast_float64"]:
                problems.append(
                    Problem(
                        "float64",
                        f"column {feature!r} is float64 but info.json declares "
                        "float32; set `cast_float64: true` to cast it (only where every "
                        "value survives exactly)",
                        episode,
                        rel,
                    )
                )
            return problems
        problems.append(
            Problem(
                "feature_dtype",
                f"column {feature!r} is {stored} but info.json declares "
                f"{declared}; fix info.json or the data",
                episode,
                rel,
            )
        )
        return problems

    def _row_problems(self, episode: int, rel: str, parquet) -> list[Problem]:
        """The rows' ``frame_index`` (counting ``0..length-1``) and timestamps (unless they
        are restamped), and the values that point into other files: every ``episode_index`` is
        this episode's, every ``task_index`` names a task of ``tasks.jsonl``, and ``index``
        counts on from the frames of the episodes before it in ``episodes.jsonl`` (lerobot
        v2.1's ``episode_data_index``, from which v3.0's ``dataset_from_index`` comes)."""
        names = set(parquet.schema_arrow.names)
        timestamps = not self.restamp and {"timestamp", "frame_index"} <= names
        columns = [
            *(["timestamp"] if timestamps else []),
            *(c for c in ("frame_index", "episode_index", "task_index", "index") if c in names),
        ]
        if not columns:
            return []
        try:
            table = parquet.read(columns=columns, use_threads=False)
        except RemoteReadError:
            raise  # a network give-up says nothing of the file
        except Exception as exc:  # ArrowInvalid / OSError: a damaged column chunk
            return [
                Problem(
                    "unreadable_file", f"unreadable parquet ({exc}); restore the file", episode, rel
                )
            ]
        problems = []
        if "frame_index" in names:
            frame_index = table.column("frame_index").to_numpy()
            if not np.array_equal(frame_index, np.arange(len(frame_index))):
                problems.append(Problem("frame_index", FRAME_INDEX_MESSAGE, episode, rel))
        if timestamps:
            problems += self._timestamp_problems(episode, rel, table)
        if "episode_index" in names:
            values = np.unique(table.column("episode_index").to_numpy())
            others = values[values != episode].tolist()
            if others:
                problems.append(
                    Problem(
                        "episode_index",
                        f"the parquet holds rows of episode(s) {others}; every row of an "
                        "episode's file must be that episode's",
                        episode,
                        rel,
                    )
                )
        first = self.first_index.get(episode)
        if "index" in names and first is not None:
            index = table.column("index").to_numpy()
            if not np.array_equal(index, np.arange(first, first + len(index))):
                problems.append(
                    Problem(
                        "index",
                        f"index does not count {first}..{first + len(index) - 1}, the frames "
                        "after those of the episodes before it in meta/episodes.jsonl (v3.0's "
                        "dataset_from_index/dataset_to_index come from these); restore the "
                        "column, or drop it from every parquet and set "
                        "`derive_missing_columns: true`",
                        episode,
                        rel,
                    )
                )
        if "task_index" in names:
            tasks = len(self.source.tasks)
            unknown = unknown_task_indices(table.column("task_index").to_numpy(), tasks)
            if unknown:
                message = unknown_task_message(unknown, V21_TASKS_PATH, tasks)
                problems.append(Problem("task_index", message, episode, rel))
        return problems

    def _timestamp_problems(self, episode: int, rel: str, table) -> list[Problem]:
        worst, at = timestamp_error(
            table.column("timestamp").to_numpy(),
            table.column("frame_index").to_numpy(),
            self.source.fps,
        )
        if worst <= self.tolerance_s:
            return []
        return [
            Problem(
                "timestamps",
                f"timestamp differs from frame_index / fps by {worst:.6f} s at frame {at} "
                f"(tolerance_s={self.tolerance_s}); set `restamp_timestamps: true` to rewrite "
                "them as frame_index / fps (where the video frames are)",
                episode,
                rel,
            )
        ]

    def _check_video(self, episode, key, rows, problems, files) -> dict | None:
        """Check camera ``key``'s mp4; its stream's parameters, None where it is unreadable."""
        from robopipe.mp4 import plain_track

        path = self.source.video_file(episode, key)
        rel = self._locate(episode, path, "video file", problems, files)
        if rel is None:
            return None
        readable = self.source.readable(path)
        # the mp4's index where it is plain and an earlier file of the same sample entry was
        # opened with PyAV (a third of the check's time at 20,000 episodes); else PyAV
        track = plain_track(readable) if isinstance(readable, str) else None
        signature = stream_signature(track)
        params = self.known_streams.get(signature) if signature else None
        if params is not None:
            frames = track.frames
        else:
            found = self._demuxed_stream(episode, readable, rel, problems, files)
            if found is None:
                return None
            params, frames = found
            if signature:
                self.known_streams.setdefault(signature, params)
        problems += self._stream_problems(episode, key, rel, params)
        if rows is not None and frames and frames != rows:
            problems.append(
                Problem(
                    "frame_count",
                    f"{frames} frames in the mp4 but {rows} rows in the parquet",
                    episode,
                    rel,
                )
            )
        return params

    def _demuxed_stream(self, episode, readable, rel, problems, files):
        """The stream's parameters and frame count from PyAV, or None (with a problem) when
        the file cannot be read; a truncated file adds a problem."""
        import av

        from robopipe.remux import MP4, intact_until, stream_duration_s

        fix = "restore the file, or leave the episode out with `skip_episodes`"
        try:
            with av.open(readable, format=MP4) as container:
                if not container.streams.video:
                    problems.append(
                        Problem("video_stream", f"no video stream; {fix}", episode, rel)
                    )
                    return None
                stream = container.streams.video[0]
                if stream.codec_context is None or stream.codec_context.codec is None:
                    problems.append(
                        Problem("unreadable_file", f"no decoder for its video; {fix}", episode, rel)
                    )
                    return None
                params = {
                    "codec": stream.codec_context.codec.canonical_name,
                    "width": stream.width,
                    "height": stream.height,
                    "pix_fmt": stream.pix_fmt,
                    "fps": Fraction(stream.average_rate or stream.base_rate or 0),
                    "time_base": Fraction(stream.time_base),
                }
                frames = stream.frames
                duration = stream_duration_s(container, stream)
                intact = intact_until(container, stream, files[rel][0], duration)
        except RemoteReadError:
            raise  # a network give-up says nothing of the file
        except (av.FFmpegError, OSError) as exc:
            problems.append(
                Problem("unreadable_file", f"cannot read video ({exc}); {fix}", episode, rel)
            )
            return None
        if intact is not None:
            problems.append(
                Problem(
                    "truncated_file",
                    f"truncated: its frames are intact up to {intact:.3f} s of "
                    f"{duration:.3f} s ({files[rel][0]} bytes); {fix}",
                    episode,
                    rel,
                )
            )
        return params, frames

    def _declared(self, key: str) -> dict:
        """What ``info.json`` says of camera ``key``'s stream (:func:`declared_stream`)."""
        return declared_stream(self.source.info, key)

    def _stream_problems(self, episode, key, rel, params) -> list[Problem]:
        """The stream against what info.json declares."""
        problems = []
        for what, expected in self._declared(key).items():
            if expected is None or params[what] == expected:
                continue
            kind = "video_size" if what in ("width", "height") else f"video_{what}"
            problems.append(
                Problem(
                    kind,
                    f"video {what} is {params[what]} but info.json says {expected} for {key}; "
                    "re-encode the episode to match, or leave it out with `skip_episodes`",
                    episode,
                    rel,
                )
            )
        return problems

"""Check a whole LeRobot v3.0 dataset in one pass, before anything loads it.

The v3.0 counterpart of :func:`robopipe.checks.v21.check_source`: the same
:class:`~robopipe.checks.report.CheckReport` of :class:`~robopipe.checks.report.Problem`
lines, each naming the dataset, the episode (where there is one) and the file. Every problem is
collected (nothing stops at the first), from the metadata, the parquet footers, a few small
columns of the data files (``episode_index``, ``index``, ``frame_index``, ``timestamp``,
``task_index``) and the mp4 headers; no frame is decoded. What is checked:

- ``meta/info.json``: a v3.0 dataset with the fields lerobot 0.6.1 reads, path templates with
  only lerobot's placeholders (and, as robopipe's readers assume, lerobot's own templates);
  every file the metadata names resolves, symlinks resolved, inside the dataset root;
- every file the metadata names (data parquets, mp4s, ``meta/episodes`` files,
  ``tasks.parquet``, ``stats.json``) is present, not empty, readable and, for an mp4, not
  truncated (its last packets are demuxed);
- ``meta/episodes``, read file by file (the ``stats/*`` columns are not read): episodes
  ``0..total_episodes-1`` each listed once and in order, ``length == dataset_to_index -
  dataset_from_index``, the ranges contiguous from 0, ``total_episodes`` and ``total_frames``;
- each episode's data file: its rows ``[dataset_from_index, dataset_to_index)`` (global row
  positions, data files concatenated in path order, as lerobot reads them) lie in that file and
  hold that episode, the ``index`` column is the row position, ``frame_index`` counts from 0,
  ``timestamp`` is ``frame_index / fps`` within ``tolerance_s``, every ``episode_index`` in
  the file has an episode row, every ``task_index`` has a task in ``tasks.parquet``;
- per camera: each episode's mp4, ``from_timestamp``/``to_timestamp`` inside its duration,
  episodes tiling the file without gaps, ``(to - from) * fps`` equal to ``length``, and the
  stream's codec, size, pixel format and frame rate against ``features[key]["info"]``;
- ``meta/stats.json``: a stats entry for every feature, none for unknown features, and each
  statistic's shape that of the feature (``(C, 1, 1)`` for cameras, ``(1,)`` for ``count``).

A problem that concerns a file shared by several episodes (a missing data file, a wrong stream)
is reported once for each episode in it, so that leaving those episodes out (``skip_episodes``)
is exactly what the report asks for. Files that are not part of the dataset are notes, except a
data parquet no episode names: lerobot reads every ``data/*/*.parquet``, so it shifts the rows.

The dataset is read through fsspec, so a remote one (``hf://``, ``s3://``, ``https://``) is
checked the same way without downloading whole files: the metadata files, then range reads of
the parquet footers and small columns, and of the mp4 headers and last GOPs. Every remote read,
listing (``glob``, ``find``) and existence test is retried after transient faults within the
``retry_budget`` (:mod:`robopipe.retry`); one that still fails raises its
:class:`~robopipe.retry.RemoteReadError` (one line: the URL and the last error), never a problem:
a network give-up says nothing of the file, while a damaged file is ``unreadable_file``.
"""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import fsspec
import numpy as np
from fsspec.implementations.local import LocalFileSystem

from robopipe.checks.changes import changes
from robopipe.checks.doctor import doctor_opinion
from robopipe.checks.files import KNOWN_EXTRA_FILES
from robopipe.checks.report import CheckReport, Problem
from robopipe.checks.v30_data import DataFileCheck
from robopipe.checks.v30_episodes import FIX, Episodes
from robopipe.checks.v30_videos import VideoFileCheck
from robopipe.errors import DatasetError
from robopipe.formats.v21_reader import template_fields
from robopipe.formats.v30_reader import (
    EPISODE_COLUMNS,
    INFO_KEYS,
    DatasetMeta,
    cat_file,
    episodes_files,
    exists,
    named_files,
    open_file,
    open_url,
    read_tasks,
)
from robopipe.layout import (
    DATA_PATH,
    DEFAULT_CHUNK_SIZE,
    DEFAULT_FEATURES,
    DEFAULT_TOLERANCE_S,
    INFO_PATH,
    STATS_PATH,
    TASKS_PATH,
    VIDEO_PATH,
    episodes_path,
)
from robopipe.retry import DEFAULT_BUDGET, RemoteReadError, RetryBudget, call

# The info.json fields lerobot 0.6.1's DatasetInfo needs (the others have defaults).
OPTIONAL_INFO_FIELDS = (
    "data_files_size_in_mb",
    "video_files_size_in_mb",
    "video_path",
    "robot_type",
    "splits",
)
REQUIRED_INFO_FIELDS = tuple(k for k in INFO_KEYS if k not in OPTIONAL_INFO_FIELDS)
# The placeholders lerobot 0.6.1 fills in each v3.0 path template.
TEMPLATE_PLACEHOLDERS = {
    "data_path": ("chunk_index", "file_index"),
    "video_path": ("video_key", "chunk_index", "file_index"),
}
DEFAULT_TEMPLATES = {"data_path": DATA_PATH, "video_path": VIDEO_PATH}
CAMERA_COLUMNS = ("chunk_index", "file_index", "from_timestamp", "to_timestamp")
STAT_NAMES = ("min", "max", "mean", "std", "count")
# range reads of a remote file: a parquet footer or an mp4 header costs a request or two
REMOTE_BLOCK_SIZE = 1 << 18


def check_v30(
    root: str | Path,
    name: str,
    *,
    storage_options: dict | None = None,
    fs: fsspec.AbstractFileSystem | None = None,
    threads: int = 1,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
    skip_episodes: Iterable[int] = (),
    episodes: Iterable[int] | None = None,
    previous: Mapping | None = None,
    doctor: bool = False,
    doctor_python: str | None = None,
    retry_budget: RetryBudget = DEFAULT_BUDGET,
) -> CheckReport:
    """Check the v3.0 dataset at ``root`` completely; never raises for bad data.

    Args:
        root: the v3.0 dataset's folder (``meta/``, ``data/``, ``videos/``): a local path or
            any fsspec URL (``hf://datasets/<id>@<revision>``, ``s3://...``, ``https://...``);
            with ``fs``, a path on that filesystem.
        name: the dataset name (for messages).
        storage_options: fsspec options of ``root`` (ignored with ``fs``).
        fs: the filesystem ``root`` is on (default: the one its URL names).
        threads: files checked at once (footer reads and mp4 opens release the GIL).
        tolerance_s: how far a timestamp may be from where it should be (lerobot's default
            1e-4 s): ``timestamp`` against ``frame_index / fps``, ``to_timestamp`` against the
            mp4's duration, episodes' timestamps against their neighbours' in the same mp4.
        skip_episodes: episodes left out; their problems become notes.
        episodes: the episodes that are read (a dataset's ``episodes:``, as LeRobotDataset's
            ``episodes=``); the problems of every other episode become notes. None: all.
        previous: an earlier report's JSON: files that changed since are listed as notes.
        doctor: also ask ``lerobot-lance-doctor`` of the peer interpreter ``doctor_python``
            (:func:`robopipe.checks.doctor.doctor_opinion`: a local folder only; its flag
            is a problem, or a note where episodes are left out); the verdict is the
            report's ``doctor``.
        retry_budget: how long each remote read, listing and existence test is retried
            (``robopipe.retry``).

    Returns:
        A :class:`~robopipe.checks.report.CheckReport` (``repairs`` is empty: no repair
        applies to v3.0; ``files`` maps each file read to ``[size, mtime_ns]`` for a local
        file, ``[size, ETag or checksum]`` for a remote one).

    Raises:
        robopipe.retry.RemoteReadError: a remote read failed on every attempt of
            ``retry_budget`` (one line: the URL and the last error).
    """
    if fs is None:
        fs, base = open_url(str(root), storage_options, retry_budget)  # no earlier listings
    else:
        base = str(root).rstrip("/")
    local = isinstance(fs, LocalFileSystem)
    report = CheckReport(name, os.path.realpath(base) if local else str(root), {})
    try:  # a server without listings (plain http) has no folders: its info.json then
        found = call(lambda: fs.isdir(base), base, retry_budget) or exists(
            fs, f"{base}/{INFO_PATH}", retry_budget
        )
    except RemoteReadError:
        raise  # transient faults beyond the budget say nothing of the dataset
    except OSError as exc:  # a remote revision or bucket that cannot be listed
        found, why = False, f"cannot be read ({exc})"
    else:
        why = "does not exist"
    if not found:
        report.problems.append(Problem("source", f"dataset folder {root} {why}"))
    else:
        checker = _Checker(fs, base, name, tolerance_s, report, retry_budget)
        checker.run(max(1, threads))
        skip = set(skip_episodes)
        chosen = None if episodes is None else set(episodes)

        def left_out(p: Problem) -> bool:
            if p.episode is None:
                return False
            return p.episode in skip or (chosen is not None and p.episode not in chosen)

        report.notes += [p for p in report.problems if left_out(p)]
        report.problems = [p for p in report.problems if not left_out(p)]
        report.notes += checker.stray_files()
        if doctor:
            selected = bool(skip) or chosen is not None
            report.doctor, flag = doctor_opinion(
                report.source, doctor_python, name, local=local, selected=selected
            )
            if flag:
                (report.notes if selected else report.problems).append(flag)
    if previous is not None:
        report.notes += changes(previous.get("files", {}), report.files)
    return report


class _Checker:
    def __init__(
        self,
        fs: fsspec.AbstractFileSystem,
        root: str,
        name: str,
        tolerance_s: float,
        report,
        budget: RetryBudget = DEFAULT_BUDGET,
    ) -> None:
        self.fs = fs
        self.budget = budget
        self.root = root
        self.local = isinstance(fs, LocalFileSystem)
        self.real_root = os.path.realpath(root) if self.local else posixpath.normpath(root)
        self.name = name
        self.tolerance_s = tolerance_s
        self.report = report
        self.info: dict = {}
        self.cameras: list[str] = []
        self.tasks: list[str] | None = None

    def add(self, kind: str, message: str, episode: int | None = None, file=None) -> None:
        self.report.problems.append(Problem(kind, message, episode, file))

    def path(self, rel: str) -> str:
        """The filesystem path of ``rel`` (relative to the dataset root)."""
        return f"{self.root}/{rel}"

    def open(self, rel: str):
        """A context giving ``rel`` to read: a local path, or a remote file read in ranges of
        :data:`REMOTE_BLOCK_SIZE` (never the whole file at once)."""
        if self.local:
            return contextlib.nullcontext(self.path(rel))
        return open_file(self.fs, self.path(rel), self.budget, block_size=REMOTE_BLOCK_SIZE)

    # -- the pass -------------------------------------------------------------------------

    def run(self, threads: int) -> None:
        if not self._check_info():
            return
        templates_ok = self._check_templates()
        self.tasks = self._check_tasks()
        self._check_stats()
        episodes = self._read_episodes()
        self.report.episodes = len(np.unique(episodes["episode_index"])) if len(episodes) else 0
        valid = self._check_episode_rows(episodes)
        if not templates_ok:
            return  # the files cannot be named
        data_files, video_files = named_files(self.info, episodes, valid.tolist(), self.cameras)
        data_rows = self._check_data_files(episodes, data_files, threads)
        total = self.info["total_frames"]
        if data_rows is not None and data_rows != total:
            self.add(
                "totals",
                f"the data files hold {data_rows} rows but info.json says total_frames={total}",
                file=INFO_PATH,
            )
        self._check_videos(episodes, video_files, threads)

    # -- info.json, templates, tasks, stats -----------------------------------------------

    def _check_info(self) -> bool:
        self._record(INFO_PATH)
        try:
            info = json.loads(cat_file(self.fs, self.path(INFO_PATH), self.budget))
        except FileNotFoundError:
            self.add("metadata", "file is missing", file=INFO_PATH)
            return False
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            self.add("metadata", f"not valid JSON: {exc}", file=INFO_PATH)
            return False
        version = info.get("codebase_version")
        if version != "v3.0":
            hint = "; convert it first (a v2.1 dataset is a `path` source)" if version else ""
            self.add(
                "version", f"codebase_version is {version!r}, not 'v3.0'{hint}", file=INFO_PATH
            )
            return False
        missing = [k for k in REQUIRED_INFO_FIELDS if k not in info]
        if missing:
            self.add(
                "info_fields",
                f"info.json lacks required field(s) {', '.join(missing)}",
                file=INFO_PATH,
            )
            return False
        features = info["features"]
        if not isinstance(features, dict) or any(
            not isinstance(f, dict) or "dtype" not in f or "shape" not in f
            for f in features.values()
        ):
            self.add("info_fields", "every feature needs a dtype and a shape", file=INFO_PATH)
            return False
        for key in DEFAULT_FEATURES:
            if key not in features:
                self.add(
                    "info_fields", f"feature {key!r} is missing; lerobot needs it", file=INFO_PATH
                )
        self.info = info
        self.cameras = [k for k, f in features.items() if f["dtype"] == "video"]
        if self.cameras and not info.get("video_path"):
            self.add("info_fields", "video features but no video_path", file=INFO_PATH)
            self.cameras = []
        return True

    def _check_templates(self) -> bool:
        ok = True
        for key, allowed in TEMPLATE_PLACEHOLDERS.items():
            template = self.info.get(key)
            if template is None or (key == "video_path" and not self.cameras):
                continue
            fields = template_fields(template)
            unknown = sorted(set(fields) - set(allowed))
            absent = sorted(set(allowed) - set(fields))
            message = None
            if unknown or absent:
                message = (
                    f"{key} {template!r} must use exactly the placeholders "
                    + ", ".join("{" + a + "}" for a in allowed)
                    + (f"; unknown: {', '.join(unknown)}" if unknown else "")
                    + (f"; missing: {', '.join(absent)}" if absent else "")
                )
            else:
                try:
                    example = template.format(video_key="camera", chunk_index=0, file_index=0)
                except (ValueError, IndexError, KeyError) as exc:
                    example, message = None, f"{key} {template!r} cannot be filled in: {exc}"
                if example is not None and (
                    os.path.isabs(example) or os.path.normpath(example).startswith("..")
                ):
                    message = f"{key} {template!r} names files outside the dataset folder"
            if message:
                self.add("template", message, file=INFO_PATH)
                ok = False
            elif template != DEFAULT_TEMPLATES[key]:
                # lerobot's loader finds data files by glob and robopipe's readers use the
                # default names, so another template only misleads
                self.add(
                    "template",
                    f"{key} {template!r} is not lerobot's {DEFAULT_TEMPLATES[key]!r}, which "
                    "lerobot's and robopipe's loaders assume; rename the files and fix info.json",
                    file=INFO_PATH,
                )
        return ok

    def _check_tasks(self) -> list[str] | None:
        if self._locate(TASKS_PATH, "tasks file") is None:
            return None
        meta = DatasetMeta(
            self.name,
            self.root,
            self.info,
            [],
            {},
            root=self.root,
            retry_budget=self.budget,
            _fs=(os.getpid(), self.fs),
        )
        try:
            tasks = read_tasks(meta)
        except DatasetError as exc:
            self.add("tasks", exc.reason, file=TASKS_PATH)
            return None
        except RemoteReadError:
            raise  # a network give-up says nothing of the file
        except OSError as exc:
            self.add("unreadable_file", f"unreadable parquet ({exc})", file=TASKS_PATH)
            return None
        if len(tasks) != self.info["total_tasks"]:
            self.add(
                "totals",
                f"tasks.parquet has {len(tasks)} task(s) but info.json says "
                f"total_tasks={self.info['total_tasks']}",
                file=INFO_PATH,
            )
        return tasks

    def _check_stats(self) -> None:
        if self._locate(STATS_PATH, "stats file") is None:
            return
        try:
            stats = json.loads(cat_file(self.fs, self.path(STATS_PATH), self.budget))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            self.add("unreadable_file", f"not valid JSON ({exc})", file=STATS_PATH)
            return
        if not isinstance(stats, dict):
            self.add("stats", "stats.json is not an object of features", file=STATS_PATH)
            return
        features = self.info["features"]
        for key in sorted(set(stats) - set(features)):
            self.add(
                "stats", f"stats for {key!r}, which info.json does not declare", file=STATS_PATH
            )
        for key, spec in features.items():
            if key not in stats:
                self.add("stats", f"no stats for feature {key!r}", file=STATS_PATH)
                continue
            if spec["dtype"] in ("video", "image"):
                shape = list(spec["shape"])
                channels = shape[0] if shape and shape[0] in (1, 3, 4) else shape[-1]
                expected = [(channels, 1, 1), (1, 1, 1)]
            elif spec["dtype"] == "string":
                continue
            else:
                expected = [tuple(spec["shape"])]
            entry = stats[key] if isinstance(stats[key], dict) else {}
            for stat in sorted(set(STAT_NAMES) - set(entry)):
                self.add("stats", f"stats of {key!r} lack {stat!r}", file=STATS_PATH)
            for stat, value in entry.items():
                want = [(1,)] if stat == "count" else expected
                try:
                    shape = np.asarray(value, dtype=float).shape
                except (TypeError, ValueError):
                    shape = None
                if shape not in want:
                    self.add(
                        "stats",
                        f"{key}/{stat} has shape {shape} but feature {key!r} needs "
                        + " or ".join(str(w) for w in want),
                        file=STATS_PATH,
                    )

    # -- meta/episodes ----------------------------------------------------------------------

    def _episode_columns(self) -> list[str]:
        wanted = list(EPISODE_COLUMNS) + ["data/chunk_index", "data/file_index"]
        for cam in self.cameras:
            wanted += [f"videos/{cam}/{c}" for c in CAMERA_COLUMNS]
        return wanted

    def _read_episodes(self) -> Episodes:
        """Every ``meta/episodes`` file, walked ``chunk-XXX/file-YYY`` as lerobot numbers them,
        read one at a time (only the columns checked, never ``stats/*``)."""
        import pyarrow.parquet as pq

        episodes = Episodes()
        wanted = self._episode_columns()
        parts: dict[str, list[np.ndarray]] = defaultdict(list)
        chunks_size = int(self.info.get("chunks_size") or DEFAULT_CHUNK_SIZE)
        walked = episodes_files(self.fs, self.root, chunks_size, self.budget)
        if not walked:
            self._locate(episodes_path(0, 0), "episodes metadata file")
            episodes.complete = False
        for rel in sorted(self._on_disk("meta/episodes") - set(walked)):
            self.add(
                "episodes_file",
                "not reached: episodes files are numbered chunk-XXX/file-YYY without gaps "
                "from chunk-000/file-000; rename it",
                file=rel,
            )
            episodes.complete = False
        for rel in walked:
            if self._locate(rel, "episodes metadata file") is None:
                episodes.complete = False
                continue
            try:
                with self.open(rel) as source:
                    parquet = pq.ParquetFile(source, pre_buffer=True)
                    names = parquet.schema_arrow.names
                    absent = [c for c in wanted if c not in names]
                    extra = ["tasks"] if "tasks" in names else []
                    if not absent:
                        table = parquet.read(columns=wanted + extra, use_threads=False)
                if absent:
                    self.add("columns", f"column(s) {', '.join(absent)} missing", file=rel)
                    episodes.complete = False
                    continue
            except RemoteReadError:
                raise  # a network give-up says nothing of the file
            except Exception as exc:  # ArrowInvalid / OSError: truncated or not a parquet
                self.add("unreadable_file", f"unreadable parquet ({exc}); {FIX}", file=rel)
                episodes.complete = False
                continue
            nulls = [c for c in wanted if table.column(c).null_count]
            if nulls:
                self.add("metadata", f"null values in {', '.join(nulls)}", file=rel)
                episodes.complete = False
                continue
            for c in wanted:
                parts[c].append(table.column(c).to_numpy())
            episodes.source += [rel] * table.num_rows
            episodes.tasks += table.column("tasks").to_pylist() if extra else [None] * len(table)
        for c in wanted:
            episodes.columns[c] = np.concatenate(parts[c]) if parts[c] else np.zeros(0)
        return episodes

    def _check_episode_rows(self, episodes: Episodes) -> np.ndarray:
        """Check the rows against each other and info.json; return the usable rows' positions
        (each episode index once, in range)."""
        total = self.info["total_episodes"]
        index = episodes["episode_index"].astype(np.int64)
        counts = Counter(index.tolist())
        first_row = {}
        for row, ep in enumerate(index.tolist()):
            first_row.setdefault(ep, row)
            source = episodes.source[row]
            if counts[ep] > 1 and first_row[ep] != row:
                self.add(
                    "episode_index",
                    f"episode {ep} has {counts[ep]} rows in meta/episodes; remove the duplicate",
                    ep,
                    source,
                )
            if not 0 <= ep < total:
                self.add(
                    "episode_index",
                    f"episode {ep} is out of range: info.json says total_episodes={total}",
                    ep,
                    source,
                )
        if episodes.complete:
            for ep in sorted(set(range(total)) - set(counts)):
                self.add(
                    "episode_index",
                    f"episode {ep} has no row in meta/episodes (info.json says "
                    f"total_episodes={total})",
                    ep,
                    episodes_path(0, 0),
                )
        if len(episodes) != total:
            self.add(
                "totals",
                f"meta/episodes has {len(episodes)} rows but info.json says total_episodes={total}",
                file=INFO_PATH,
            )
        valid = np.array(
            [r for r, ep in enumerate(index.tolist()) if first_row[ep] == r and 0 <= ep < total],
            dtype=np.int64,
        )
        if not len(episodes):
            return valid
        in_order = np.array_equal(index, np.arange(len(index)))
        if not in_order and set(counts) == set(range(len(index))):
            for row, ep in enumerate(index.tolist()):
                if row != ep:
                    self.add(
                        "episode_order",
                        f"episode {ep} is row {row} of meta/episodes; lerobot needs row i to "
                        "be episode i",
                        ep,
                        episodes.source[row],
                    )
        start, stop = episodes["dataset_from_index"], episodes["dataset_to_index"]
        length = episodes["length"]
        for row in valid.tolist():
            ep, source = int(index[row]), episodes.source[row]
            if length[row] <= 0 or stop[row] - start[row] != length[row]:
                self.add(
                    "episode_range",
                    f"dataset_from_index={start[row]}, dataset_to_index={stop[row]} but "
                    f"length={length[row]}",
                    ep,
                    source,
                )
        # the ranges tile 0..total_frames in episode order (an unlisted episode's
        # neighbours are not blamed for its gap)
        stop_of = {int(index[row]): int(stop[row]) for row in valid.tolist()}
        stop_of[-1] = 0
        for row in valid.tolist():
            ep = int(index[row])
            if ep - 1 in stop_of and start[row] != stop_of[ep - 1]:
                self.add(
                    "episode_range",
                    f"dataset_from_index={start[row]} but episode {ep - 1} ends at "
                    f"{stop_of[ep - 1]}; episodes' frame ranges must follow each other",
                    ep,
                    episodes.source[row],
                )
        frames = int(length[valid].sum())
        if frames != self.info["total_frames"]:
            self.add(
                "totals",
                f"the episodes' lengths add up to {frames} frames but info.json says "
                f"total_frames={self.info['total_frames']}",
                file=INFO_PATH,
            )
        self._check_episode_tasks(episodes, valid)
        return valid

    def _check_episode_tasks(self, episodes: Episodes, valid: np.ndarray) -> None:
        if self.tasks is None:
            return
        known = set(self.tasks)
        for row in valid.tolist():
            unknown = [t for t in episodes.tasks[row] or [] if t not in known]
            if unknown:
                self.add(
                    "task_index",
                    f"tasks {unknown} of this episode are not in {TASKS_PATH}",
                    int(episodes["episode_index"][row]),
                    episodes.source[row],
                )

    # -- files -----------------------------------------------------------------------------

    def _record(self, rel: str) -> int | None:
        """Record ``rel``'s signature in the report; return its size, None when missing."""
        try:
            if self.local:
                stat = os.stat(self.path(rel))
                signature = [stat.st_size, stat.st_mtime_ns]
            else:
                path = self.path(rel)
                info = call(lambda: self.fs.info(path), path, self.budget)
                if info.get("type") == "directory":
                    return None
                version = info.get("ETag") or info.get("blob_id") or info.get("etag")
                lfs = info.get("lfs") or {}
                signature = [int(info["size"]), lfs.get("sha256") or version]
        except (FileNotFoundError, NotADirectoryError):
            return None
        self.report.files[rel] = signature
        return signature[0]

    def _locate(self, rel: str, what: str, episodes: Iterable[int] = (None,)) -> str | None:
        """``rel`` when the file is usable; otherwise None, with a problem for each of
        ``episodes`` (None: the file's own problem)."""
        episodes = list(episodes)
        if self.local:
            real = os.path.realpath(self.path(rel))
        else:  # no symlinks remotely: only `..` can leave the root
            real = posixpath.normpath(self.path(rel))
        message = kind = None
        if not (real + "/").startswith(self.real_root.rstrip("/") + "/"):
            kind = "outside_root"
            message = (
                f"{what} resolves to {real}, outside the dataset folder; keep every file (and "
                "symlink target) inside it"
            )
        else:
            size = self._record(rel)
            if size is None:
                kind, message = "missing_file", f"{what} is missing; {FIX}"
            elif size == 0:
                kind, message = "empty_file", f"{what} is empty; {FIX}"
        if kind is None:
            return rel
        for ep in episodes:
            self.add(kind, message, ep, rel)
        return None

    def _on_disk(self, folder: str) -> set[str]:
        """The ``<folder>/*/*.parquet`` files there are (lerobot globs these)."""
        pattern = self.path(f"{folder}/*/*.parquet")
        found = call(lambda: self.fs.glob(pattern), pattern, self.budget)
        return {self._relative(p) for p in found}

    def _relative(self, path: str) -> str:
        """A path the filesystem listed, relative to the root."""
        return posixpath.relpath(self.fs._strip_protocol(path), self.fs._strip_protocol(self.root))

    def stray_files(self) -> list[Problem]:
        """Notes for the files under the root that are not part of the dataset."""
        found = call(lambda: self.fs.find(self.root), self.root, self.budget)
        return [
            Problem("stray_file", "not part of the dataset; it is not converted", file=rel)
            for rel in sorted(self._relative(p) for p in found)
            if rel not in self.report.files and rel not in KNOWN_EXTRA_FILES
        ]

    def _check_data_files(
        self, episodes: Episodes, by_file: dict[str, list[int]], threads: int
    ) -> int | None:
        """Check the data files the episode rows name (``by_file``: each with its rows) and
        those there are; return the rows they hold (None when one is unreadable)."""
        on_disk = self._on_disk("data")
        for rel in sorted(on_disk - set(by_file)):
            self.add(
                "stray_data_file",
                "no episode names this data file, but lerobot reads every data/*/*.parquet, "
                "which shifts every later row; remove it",
                file=rel,
            )
        files = sorted(on_disk | set(by_file))
        index = episodes["episode_index"]
        usable = {}
        for rel in files:
            eps = [int(index[r]) for r in by_file.get(rel, [])] or [None]
            if self._locate(rel, "data file", eps) is not None:
                usable[rel] = eps
        with ThreadPoolExecutor(threads) as pool:
            footers = dict(zip(usable, pool.map(self._footer, usable), strict=True))
        rows_of, offsets, offset = {}, {}, 0
        for rel in files:
            footer = footers.get(rel)
            if isinstance(footer, Exception):
                for ep in usable[rel]:
                    self.add("unreadable_file", f"unreadable parquet ({footer}); {FIX}", ep, rel)
            offsets[rel] = offset
            rows_of[rel] = footer if isinstance(footer, int) else 0
            offset += rows_of[rel]
        jobs = [
            (rel, offsets[rel], rows_of[rel], by_file[rel])
            for rel in files
            if isinstance(footers.get(rel), int) and by_file.get(rel)
        ]
        data = DataFileCheck(self, episodes)
        with ThreadPoolExecutor(threads) as pool:
            for problems in pool.map(lambda job: data.check(*job), jobs):
                self.report.problems += problems
        return offset if all(isinstance(footers.get(rel), int) for rel in files) else None

    def _footer(self, rel: str) -> int | Exception:
        import pyarrow.parquet as pq

        try:
            with self.open(rel) as source:
                return pq.ParquetFile(source).metadata.num_rows
        except RemoteReadError:
            raise  # a network give-up says nothing of the file
        except Exception as exc:  # ArrowInvalid / OSError: truncated or not a parquet
            return exc

    def _check_videos(
        self, episodes: Episodes, jobs: dict[tuple[str, str], list[int]], threads: int
    ) -> None:
        """Check each ``(camera, video file)`` of ``jobs`` against the episode rows it holds."""
        usable = []
        for (cam, rel), rows in jobs.items():
            eps = [int(episodes["episode_index"][r]) for r in rows]
            if self._locate(rel, "video file", eps) is not None:
                usable.append((cam, rel, rows))
        video = VideoFileCheck(self, episodes)
        with ThreadPoolExecutor(threads) as pool:
            for problems in pool.map(lambda job: video.check(*job), usable):
                self.report.problems += problems

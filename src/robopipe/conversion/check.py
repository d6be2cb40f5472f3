"""Check a whole v2.1 source in one pass, before anything is converted.

Every problem of every episode and file is collected (nothing stops at the first), from
metadata, parquet footers and mp4 headers only: no frame is decoded and only the
``timestamp`` and ``frame_index`` columns are read. What is checked:

- ``meta/info.json``: a v2.1 dataset (a v3.0 one is named as such), the fields lerobot 0.6.1's
  converter needs, path templates with only lerobot's placeholders;
- ``episodes.jsonl``: every index ``0..total_episodes-1`` listed once (duplicates, missing and
  out-of-range indices named as what they are); ``tasks.jsonl``; ``episodes_stats.jsonl``;
- every episode's parquet: present, non-empty, a readable footer, rows equal to the episode's
  ``length``, the required columns (``index``, ``episode_index``, ``frame_index``,
  ``timestamp``, ``task_index``) and every ``info.json`` feature with its dtype and shape,
  timestamps within ``tolerance_s`` of ``frame_index / fps``, and no column that no feature
  declares (:func:`undeclared_columns`, the rule ``validate`` enforces on the output);
- every episode's mp4 per camera: present, non-empty, readable, not truncated (the last
  packets are demuxed), one video stream whose codec, width, height, pixel format, frame rate
  and time base agree with ``info.json`` and with the other episodes, and as many frames as
  the parquet has rows;
- every path, symlinks resolved, inside the dataset root.

Files that are not part of the dataset are listed as notes, as are source files that changed
since the previous check.

A large source is checked in parts: :func:`check_part` checks the files of a range of
episode indices (a job each, in parallel), and :func:`merge_parts` checks the metadata and
merges the parts into the report one job (:func:`check_source`) gives, without a table of
every file: the files are read back from the parts as the report is written, stray files
found from the path templates, the earlier files compared as hashes (:class:`_Changes`), and
each camera's streams held as runs of episodes (:class:`StreamRuns`). Problems that an opt-in repair
(:data:`robopipe.conversion.repairs.REPAIRS`) fixes are not problems when it is on, and name
it when it is off.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import stat
import string
from array import array
from collections import Counter
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np

from robopipe.atomic import atomic_path, write_json
from robopipe.conversion.options import ConversionOptions
from robopipe.conversion.repairs import (
    DERIVABLE_COLUMNS,
    column_feature,
    repairs_of,
    undeclared_columns,
)
from robopipe.errors import DatasetError
from robopipe.formats.v21_reader import (
    STATS_FIX,
    V21Source,
    declared_stream,
    episode_index_problems,
    info_problem,
    normalise_template,
    read_episode_lines,
    read_json,
    read_jsonl,
    source_root,
    template_problems,
)
from robopipe.layout import (
    DEFAULT_FEATURES,
    V21_EPISODES_PATH,
    V21_EPISODES_STATS_PATH,
    V21_INFO_PATH,
    V21_TASKS_PATH,
)

CHECK_VERSION = 1

# Files a v2.1 folder may hold besides the dataset (Hub repositories carry these).
KNOWN_EXTRA_FILES = ("README.md", ".gitattributes")

# Episodes of a remote source checked at once, whatever ``threads`` says.
REMOTE_THREADS = 16

# Episodes given to the thread pool at once.
EPISODES_PER_BATCH = 256


def undeclared_column_message(column: str, holder: str = "the data files hold") -> str:
    """What is wrong with an undeclared ``column`` and the fix; ``holder`` names the files."""
    return (
        f"{holder} a column {column!r} that info.json's features do not declare, and "
        "lerobot's loader reads only declared columns; set `undeclared_columns: drop` to "
        "leave it out, or `undeclared_columns: declare` to declare it from its parquet type, "
        "or declare it in info.json (dtype, shape, names)"
    )


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the source (or, as a note, worth knowing).

    Attributes:
        kind: a short stable name grouping problems (``missing_file``, ``video_size``, ...).
        message: what is wrong; what to do.
        episode: the source episode index, when the problem belongs to one.
        file: the file, relative to the dataset root.
    """

    kind: str
    message: str
    episode: int | None = None
    file: str | None = None

    def line(self, dataset: str) -> str:
        """``robopipe: dataset 'X': episode N: file F: message`` (parts that apply)."""
        return "robopipe: " + str(
            DatasetError(dataset, self.message, episode=self.episode, file=self.file)
        )


@dataclass
class CheckReport:
    """What :func:`check_source` found.

    Attributes:
        dataset: the dataset name.
        source: the source folder (absolute).
        repairs: each repair of :data:`~robopipe.conversion.repairs.REPAIRS` and whether it is on.
        problems: what stops the conversion.
        notes: what does not (stray files, changed source files, skipped episodes' problems).
        files: every source file the conversion reads: ``[size in bytes, mtime in ns]``
            (from :func:`merge_parts`: a mapping read from the parts when iterated).
        episodes: episodes listed in ``episodes.jsonl``.
        doctor: a v3.0 source's outside opinion (``lerobot-lance-doctor``,
            :func:`robopipe.conversion.doctor.doctor_opinion`); None where it was not asked.
    """

    dataset: str
    source: str
    repairs: dict[str, bool]
    problems: list[Problem] = field(default_factory=list)
    notes: list[Problem] = field(default_factory=list)
    files: dict[str, list[int]] = field(default_factory=dict)
    episodes: int = 0
    doctor: dict | None = None

    @property
    def ok(self) -> bool:
        """True when nothing stops the conversion."""
        return not self.problems

    def to_json(self) -> dict:
        """The report as written to ``check.json``."""
        return {
            "version": CHECK_VERSION,
            "dataset": self.dataset,
            "source": self.source,
            "ok": self.ok,
            "repairs": self.repairs,
            "episodes": self.episodes,
            "counts": dict(Counter(p.kind for p in self.problems)),
            "problems": [dataclasses.asdict(p) for p in self.problems],
            "notes": [dataclasses.asdict(p) for p in self.notes],
            "files": self.files,
            **({} if self.doctor is None else {"doctor": self.doctor}),
        }

    def summary(self, *, first: int = 5, path: str | Path | None = None) -> str:
        """The console summary: per kind its count and first episodes, then up to ``first``
        one-line messages per kind (every line is in ``check.json``), then the notes' counts."""
        lines = []
        where = f" (all of them in {path})" if path else ""
        if self.problems:
            lines.append(
                f"robopipe: dataset {self.dataset!r}: {len(self.problems)} problem(s) in the "
                f"source {self.source}{where}:"
            )
        else:
            lines.append(f"robopipe: dataset {self.dataset!r}: source {self.source} checked, OK")
        for title, items, show in (("problems", self.problems, first), ("notes", self.notes, 2)):
            by_kind: dict[str, list[Problem]] = {}
            for p in items:
                by_kind.setdefault(p.kind, []).append(p)
            for kind, group in by_kind.items():
                episodes = sorted({p.episode for p in group if p.episode is not None})
                shown = ", ".join(map(str, episodes[:first])) + (
                    ", ..." if len(episodes) > first else ""
                )
                lines.append(
                    f"  {title[:-1]} {kind}: {len(group)}"
                    + (f" (episodes {shown})" if episodes else "")
                )
                lines += [p.line(self.dataset) for p in group[:show]]
        return "\n".join(lines)


def check_source(
    root: str | Path,
    name: str,
    options: ConversionOptions | None = None,
    *,
    previous: Mapping | None = None,
    threads: int = 8,
) -> CheckReport:
    """Check the v2.1 source in ``root`` completely, in this process; never raises for bad
    data. The same report as :func:`check_part` jobs over episode ranges merged by
    :func:`merge_parts`, with ``files`` in memory.

    Args:
        root: the v2.1 dataset folder, or a remote source's manifest (its files are then
            read by range reads, or from its cache where they are cached:
            :func:`robopipe.formats.v21_reader.source_root`).
        name: the dataset name (for messages).
        options: the dataset's conversion settings; used: the repairs,
            ``restamp_timestamps``, ``tolerance_s``, ``skip_episodes`` (problems of skipped
            episodes become notes).
        previous: an earlier report's JSON (:meth:`CheckReport.to_json`): source files that
            changed, appeared or disappeared since are listed as notes.
        threads: episodes checked at once (footer reads and mp4 opens release the GIL); at
            least :data:`REMOTE_THREADS` for a remote source.

    Returns:
        A :class:`CheckReport`.
    """
    part = check_part(root, name, options, threads=threads)
    report = merge_parts(root, name, options, lambda: [part], previous=previous)
    report.files = dict(report.files.items())
    return report


@dataclass
class CheckPart:
    """What :func:`check_part` found in one range of episodes.

    Attributes:
        problems: the episodes' problems, in episode order.
        files: each file it read, ``[size in bytes, mtime in ns]``, in episode order.
        streams: each camera's stream parameters, :meth:`StreamRuns.to_json`.
    """

    problems: list[Problem] = field(default_factory=list)
    files: dict[str, list[int]] = field(default_factory=dict)
    streams: dict[str, list] = field(default_factory=dict)

    def to_json(self) -> dict:
        """The part as :func:`write_part` writes it."""
        return {
            "problems": [dataclasses.asdict(p) for p in self.problems],
            "files": self.files,
            "streams": self.streams,
        }


def write_part(part: CheckPart, path: str | Path) -> None:
    """Write ``part`` as JSON to ``path``, atomically."""
    write_json(path, part.to_json(), indent=None)


def read_part(path: str | Path) -> CheckPart:
    """The :class:`CheckPart` :func:`write_part` wrote to ``path``."""
    value = json.loads(Path(path).read_text(encoding="utf-8"))
    return CheckPart([Problem(**p) for p in value["problems"]], value["files"], value["streams"])


def check_part(
    root: str | Path,
    name: str,
    options: ConversionOptions | None = None,
    *,
    first: int = 0,
    stop: int | None = None,
    threads: int = 8,
) -> CheckPart:
    """Check the files of the episodes listed in ``episodes.jsonl`` whose index is in
    ``[first, stop)`` (``stop`` None: every index from ``first``); the metadata itself is
    :func:`merge_parts`'s. Memory grows with the range, not with the dataset.

    Args:
        root, name, options, threads: as :func:`check_source`.
        first, stop: the range of source episode indices.

    Returns:
        A :class:`CheckPart`; empty where the metadata leaves no episode to check.
    """
    options = options or ConversionOptions()
    root, remote = source_root(root, name)
    if remote:  # range reads wait on the network, not on this job's CPUs
        threads = max(threads, REMOTE_THREADS)
    scratch = CheckReport(name, "", repairs_of(options))
    source = _check_metadata(root, name, scratch, remote, stats=False)
    part = CheckPart()
    if source is None:
        return part
    positions = [
        i
        for i, (index, _) in enumerate(getattr(source.episodes, "heads", ()))
        if index >= first and (stop is None or index < stop)
    ]
    lengths = {}
    for i in positions:
        episode = source.episodes[i]
        lengths[episode["episode_index"]] = episode.get("length")
    source.episodes = ()  # the range's lengths are all the checker needs of them
    checker = _EpisodeChecker(source, options, lengths)
    streams = StreamRuns(source.video_keys)
    indices = list(lengths)
    with ThreadPoolExecutor(max(1, threads)) as pool:
        # one thread: this one; else a batch at a time (the pool holds a future per episode)
        checked = map if threads <= 1 else pool.map
        for start in range(0, len(indices), EPISODES_PER_BATCH):
            batch = indices[start : start + EPISODES_PER_BATCH]
            for episode, (problems, files, found) in zip(
                batch, checked(checker.check, batch), strict=True
            ):
                part.problems += problems
                part.files.update(files)
                for key, params in found.items():
                    streams.add(key, episode, params)
    part.streams = streams.to_json()
    return part


def merge_parts(
    root: str | Path,
    name: str,
    options: ConversionOptions | None,
    parts,
    *,
    previous: str | Path | Mapping | None = None,
) -> CheckReport:
    """The whole report of a source from its :func:`check_part` results: the metadata's
    problems, the parts' in order, the cameras' consistency across every part, skipped
    episodes' problems as notes, stray files and changes since ``previous`` as notes.

    Args:
        root, name, options: as :func:`check_source`.
        parts: a callable giving the parts in episode order (each time it is called: the
            report's ``files`` is read from them again as it is written).
        previous: an earlier report's ``check_files.json`` (a path, read a piece at a time)
            or its JSON: source files that changed, appeared or disappeared since are notes.

    Returns:
        A :class:`CheckReport` whose ``files`` is read from ``parts`` when iterated
        (:func:`write_report`, :func:`write_files` write it a piece at a time).
    """
    options = options or ConversionOptions()
    root, remote = source_root(root, name)
    report = CheckReport(name, remote.url if remote else str(root.resolve()), repairs_of(options))
    source = _check_metadata(root, name, report, remote)
    meta_files = dict(report.files)
    changes = None if previous is None else _Changes(previous)
    if changes:
        changes.compare(meta_files)
    count = len(meta_files)
    if source is None:
        parts = list  # nothing but the metadata was checked
    else:
        skip = set(options.skip_episodes)
        listed = _listed(source)
        source.episodes = ()  # the parts checked them: not held while they are read
        streams = StreamRuns(source.video_keys)
        for part in parts():
            report.problems += part.problems
            streams.update(part.streams)
            count += len(part.files)
            if changes:
                changes.compare(part.files)
        report.problems += streams.problems(source)
        # what is wrong with a skipped episode is only worth a note
        report.notes += [p for p in report.problems if p.episode in skip]
        report.problems = [p for p in report.problems if p.episode not in skip]
        outside = {p.file for p in report.problems + report.notes if p.kind == "outside_root"}
        used = _UsedFiles(source, listed, meta_files, outside)
        report.notes += _stray_files(root, used, remote)
    if changes:
        report.notes += changes.notes()
    report.files = _StreamedFiles(meta_files, parts, count)
    return report


class _StreamedFiles(dict):
    """``report.files`` of :func:`merge_parts`: the metadata's files, then each part's, read
    from the parts when iterated (json's Python encoder asks only ``len`` and ``items``)."""

    def __init__(self, meta: dict, parts, count: int) -> None:
        super().__init__()
        self._meta, self._parts, self._count = meta, parts, count

    def __len__(self) -> int:
        return self._count

    def items(self):
        for files in self.groups():
            yield from files.items()

    def groups(self):
        """The files a group at a time: the metadata's, then each part's."""
        yield self._meta
        for part in self._parts():
            yield part.files


class SourceCheckError(DatasetError):
    """The source check found problems: the message is the first one's, ``report`` has all."""

    def __init__(self, report: CheckReport) -> None:
        first = report.problems[0]
        super().__init__(report.dataset, first.message, episode=first.episode, file=first.file)
        self.report = report


def write_report(report: CheckReport, path: str | Path) -> None:
    """Write ``report`` as JSON to ``path``, atomically."""
    write_json(path, report.to_json(), indent=1)


def write_files(report: CheckReport, path: str | Path) -> None:
    """Write ``report.files`` as ``{"files": ...}`` compact JSON to ``path``, atomically, a
    piece at a time (``check_files.json``, the next check's ``previous``)."""
    files = report.files
    groups = files.groups() if isinstance(files, _StreamedFiles) else [files]
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as file:
        # json.dumps's bytes of the whole, from its C encoder a group at a time
        file.write('{"files": {')
        separator = ""
        for group in groups:
            if group:
                file.write(separator + json.dumps(group, ensure_ascii=False)[1:-1])
                separator = ", "
        file.write("}}")


def read_report(path: str | Path) -> dict | None:
    """The JSON of an earlier report at ``path``, or None when there is none."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _check_metadata(root: Path, name: str, report: CheckReport, remote=None, *, stats=True):
    """Check ``meta/`` (``episodes_stats.jsonl`` too where ``stats``); return the
    :class:`V21Source` when episodes can be checked."""
    if not root.is_dir():
        report.problems.append(
            Problem("source", f"source folder {root} does not exist; check `path`")
        )
        return None
    meta_problems = report.problems
    try:
        info = read_json(root, V21_INFO_PATH, name)
    except DatasetError as exc:
        meta_problems.append(Problem("metadata", exc.reason, file=V21_INFO_PATH))
        return None
    problem = info_problem(info)
    if problem:
        kind = "info_fields" if problem.startswith("info.json lacks") else "version"
        meta_problems.append(Problem(kind, problem, file=V21_INFO_PATH))
        return None
    repairs = report.repairs
    for problem in template_problems(info, repairs["template_placeholders"]):
        meta_problems.append(Problem("template", problem, file=V21_INFO_PATH))
    if repairs["template_placeholders"]:
        info = {**info, **{k: normalise_template(info[k]) for k in ("data_path", "video_path")}}
    for rel in (V21_INFO_PATH, V21_EPISODES_PATH, V21_TASKS_PATH, V21_EPISODES_STATS_PATH):
        _record(root, rel, report.files)
    episodes, tasks = [], []
    try:
        lines = read_episode_lines(root, V21_EPISODES_PATH, name)
        for episode, message in episode_index_problems(lines.heads, info["total_episodes"]):
            meta_problems.append(Problem("episode_index", message, episode, V21_EPISODES_PATH))
        # the listed episodes that can be checked: each valid index once (its first line),
        # in index order; as arrays (8 bytes an episode), not a dict
        total = info["total_episodes"]
        indices = np.fromiter(
            (i if isinstance(i, int) and 0 <= i < total else -1 for i, _ in lines.heads),
            np.int64,
            len(lines.heads),
        )
        valid, first = np.unique(indices, return_index=True)
        episodes = lines.take(first[valid >= 0])
    except DatasetError as exc:
        meta_problems.append(Problem("metadata", exc.reason, file=V21_EPISODES_PATH))
    try:
        task_lines = read_jsonl(root, V21_TASKS_PATH, name)
        tasks = [t.get("task") for t in sorted(task_lines, key=lambda t: t.get("task_index", -1))]
        if sorted(t.get("task_index") for t in task_lines) != list(range(len(task_lines))):
            meta_problems.append(
                Problem("metadata", "task indices are not 0..K-1", file=V21_TASKS_PATH)
            )
    except DatasetError as exc:
        meta_problems.append(Problem("metadata", exc.reason, file=V21_TASKS_PATH))
    report.episodes = len(episodes)
    if any(p.kind == "template" for p in meta_problems):
        return None  # episodes cannot be matched to files
    video_keys = sorted(k for k, ft in info["features"].items() if ft.get("dtype") == "video")
    if video_keys and not info["video_path"]:
        meta_problems.append(
            Problem("info_fields", "video features but no video_path", file=V21_INFO_PATH)
        )
        return None
    source = V21Source(name, root, info, episodes, tasks, video_keys, remote)
    if stats:
        _check_stats(source, repairs["compute_missing_stats"], meta_problems)
    return source


def _check_stats(source: V21Source, repair: bool, problems: list[Problem]) -> None:
    try:
        have = _stats_episodes(source)
    except DatasetError as exc:
        problems.append(Problem("stats", exc.reason, file=V21_EPISODES_STATS_PATH))
        return
    listed = getattr(source.episodes, "heads", None)  # EpisodeLines: no line parsed again
    if listed is None:
        listed = [(e["episode_index"], None) for e in source.episodes]
    absent = sorted(index for index, _ in listed if index not in have)
    if not absent or repair:
        return
    if not have:
        message = f"file is missing; {STATS_FIX}"
        problems.append(Problem("stats", message, file=V21_EPISODES_STATS_PATH))
        return
    for episode in absent:
        problems.append(
            Problem(
                "stats", f"no stats for this episode; {STATS_FIX}", episode, V21_EPISODES_STATS_PATH
            )
        )


def _stats_episodes(source: V21Source) -> set[int]:
    """The episodes ``episodes_stats.jsonl`` has stats for (none when the file is missing),
    read a line at a time: the stats themselves are not kept.

    Raises:
        DatasetError: a line is not valid JSON (as :func:`read_jsonl` names it).
    """
    path = source.root / V21_EPISODES_STATS_PATH
    if not path.is_file():
        return set()
    have = set()
    with open(path, "rb") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise DatasetError(
                    source.name,
                    f"line {number} is not valid JSON: {exc}",
                    file=V21_EPISODES_STATS_PATH,
                ) from None
            if "stats" in entry:
                have.add(entry.get("episode_index"))
    return have


class _EpisodeChecker:
    """Checks one episode's files (thread-safe: each call returns its own results) and
    collects each camera's stream parameters for :meth:`consistency_problems`."""

    def __init__(
        self, source: V21Source, options: ConversionOptions, lengths: Mapping[int, int | None]
    ) -> None:
        self.source = source
        self.lengths = lengths  # of the episodes it checks
        self.prefix = os.path.join(str(source.root), "")  # the root as paths start with it
        self.real_root = str(source.root.resolve())
        self.real_prefix = os.path.join(self.real_root, "")
        self.real_folders: dict[str, str] = {}  # os.path.realpath of each folder
        self.repairs = repairs_of(options)
        self.restamp = options.restamp_timestamps
        self.tolerance_s = options.tolerance_s
        # the stream PyAV found in an earlier mp4 of the same _stream_signature
        self.known_streams: dict[tuple, dict] = {}

    def check(self, episode: int) -> tuple[list[Problem], dict[str, list[int]], dict[str, tuple]]:
        """The episode's problems, its files' ``[size, mtime_ns]`` and each readable camera's
        :func:`_consistency_key` of its stream."""
        problems: list[Problem] = []
        files: dict[str, list[int]] = {}
        streams = {}
        rows = self._check_data(episode, problems, files)
        for key in self.source.video_keys:
            params = self._check_video(episode, key, rows, problems, files)
            if params is not None:
                streams[key] = _consistency_key(params)
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
        if not self.restamp and {"timestamp", "frame_index"} <= set(schema.names):
            problems += self._timestamp_problems(episode, rel, parquet)
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

    def _timestamp_problems(self, episode: int, rel: str, parquet) -> list[Problem]:
        from robopipe.conversion.shard import timestamp_error

        try:
            table = parquet.read(columns=["timestamp", "frame_index"], use_threads=False)
        except Exception as exc:  # ArrowInvalid / OSError: a damaged column chunk
            return [
                Problem(
                    "unreadable_file", f"unreadable parquet ({exc}); restore the file", episode, rel
                )
            ]
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
        signature = _stream_signature(track)
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


# the stream parameters compared across a camera's episodes, in :func:`_consistency_key` order
CONSISTENCY = ("codec", "width", "height", "pix_fmt", "time_base")


def _consistency_key(params: Mapping) -> tuple:
    """The :data:`CONSISTENCY` parameters of a stream, as JSON keeps them (the time base as
    its text: ``1/15360``, as the messages print it)."""
    return tuple(str(params[w]) if w == "time_base" else params[w] for w in CONSISTENCY)


class StreamRuns:
    """Each camera's stream parameters (:func:`_consistency_key`) by episode, held as runs of
    consecutive episodes per distinct value: a few entries per camera, not one per episode.

    ``runs[key][params]`` is a list of ``[first, stop)`` episode ranges, the values in the
    order their first episode comes (episodes are added in increasing order).
    """

    def __init__(self, keys) -> None:
        self.runs: dict[str, dict[tuple, list[list[int]]]] = {k: {} for k in keys}

    def add(self, key: str, episode: int, params: tuple) -> None:
        """Camera ``key``'s stream of ``episode`` (after any episode added before)."""
        ranges = self.runs[key].setdefault(params, [])
        if ranges and ranges[-1][1] == episode:
            ranges[-1][1] = episode + 1
        else:
            ranges.append([episode, episode + 1])

    def update(self, other: Mapping[str, list]) -> None:
        """Add a later part's runs, as :meth:`to_json` wrote them."""
        for key, values in other.items():
            for params, ranges in values:
                for first, stop in ranges:
                    mine = self.runs[key].setdefault(tuple(params), [])
                    if mine and mine[-1][1] == first:
                        mine[-1][1] = stop
                    else:
                        mine.append([first, stop])

    def to_json(self) -> dict:
        """``{key: [[params, ranges], ...]}``."""
        return {k: [[list(p), r] for p, r in v.items()] for k, v in self.runs.items()}

    def problems(self, source: V21Source) -> list[Problem]:
        """Episodes whose stream differs from most episodes of the same camera in what
        info.json does not declare: the time base, and any parameter it leaves out."""
        problems = []
        for key, by_value in self.runs.items():
            declared = declared_stream(source.info, key)
            for i, what in enumerate(CONSISTENCY):
                if declared.get(what) is not None:
                    continue  # each episode was compared with info.json
                values: Counter = Counter()
                for params, ranges in by_value.items():
                    values[params[i]] += sum(stop - first for first, stop in ranges)
                usual = values.most_common(1)[0][0] if values else None
                odd = sorted(
                    (episode, params[i])
                    for params, ranges in by_value.items()
                    if params[i] != usual
                    for first, stop in ranges
                    for episode in range(first, stop)
                )
                for episode, value in odd:
                    kind = "video_size" if what in ("width", "height") else f"video_{what}"
                    rel = os.path.relpath(source.video_file(episode, key), source.root)
                    message = (
                        f"video {what} is {value} but {values[usual]} other episodes of "
                        f"{key} have {usual}; re-encode the episode to match, or leave it out "
                        "with `skip_episodes`"
                    )
                    problems.append(Problem(kind, message, episode, rel))
        return problems


def _stream_signature(track) -> tuple | None:
    """What fixes an mp4's stream parameters and frame rate as PyAV reports them: the sample
    entry (codec, size, parameter sets), the time scale and the one frame duration
    (:class:`robopipe.mp4.Track`); None for no track or a variable frame duration."""
    if track is None or track.durations.min() != track.durations.max():
        return None
    return track.parameters, track.timescale, int(track.durations[0])


def _record(root: Path, rel: str, files: dict) -> None:
    try:
        stat = os.stat(root / rel)
    except FileNotFoundError:
        return
    files[rel] = [stat.st_size, stat.st_mtime_ns]


def _stray_files(root: Path, used: Mapping, remote=None) -> list[Problem]:
    """A note per file of the source that the conversion does not read (a remote source's:
    those of its listing)."""
    notes = []
    for rel in sorted(remote.files) if remote else _walk(root):
        if rel not in used and rel not in KNOWN_EXTRA_FILES:
            notes.append(
                Problem("stray_file", "not part of the dataset; it is not converted", file=rel)
            )
    return notes


def _walk(root: Path):
    """Every file under ``root``, relative to it, in sorted folder order."""
    for folder, dirs, names in os.walk(root):
        dirs.sort()
        base = os.path.relpath(folder, root)
        for name in sorted(names):
            yield name if base == "." else f"{base}/{name}"


class _UsedFiles:
    """Whether a file of the source is one the check read (``rel in used``): a metadata file
    it recorded, or the data file or an mp4 of an episode listed in ``episodes.jsonl``, inside
    the root; decided from the path templates, without a table of every file."""

    def __init__(self, source: V21Source, listed: bytearray, meta: Mapping, outside: set) -> None:
        self.source, self.meta, self.outside = source, meta, outside
        self.listed = listed  # per index: whether the episode was checked (:func:`_listed`)
        self.templates = [
            (*_template_pattern(source.info["data_path"]), False),
            *([(*_template_pattern(source.info["video_path"]), True)] if source.video_keys else []),
        ]

    def __contains__(self, rel: str) -> bool:
        if rel in self.meta:
            return True
        if rel in self.outside:
            return False
        source = self.source
        for pattern, fields, video in self.templates:
            match = pattern.fullmatch(rel)
            if match is None:
                continue
            values = dict(zip(fields, match.groups(), strict=True))
            if not values.get("episode_index", "").isdigit():
                continue
            episode = int(values["episode_index"])
            if episode >= len(self.listed) or not self.listed[episode]:
                continue
            key = values.get("video_key")
            if video and key not in source.video_keys:
                continue
            # the file's path as the checker names it (V21Source.data_file, .video_file,
            # relative to the root), without pathlib
            made = source.info["video_path" if video else "data_path"].format(
                episode_chunk=episode // source.chunks_size, episode_index=episode, video_key=key
            )
            if made == rel or os.path.normpath(made) == rel:
                return True
        return False


def _listed(source: V21Source) -> bytearray:
    """A byte per index ``0..total_episodes-1``: 1 for each episode the check reads (listed
    in ``episodes.jsonl``, its index in range)."""
    listed = bytearray(int(source.info["total_episodes"]))
    for index, _ in getattr(source.episodes, "heads", ()):
        listed[index] = 1
    return listed


def _template_pattern(template: str) -> tuple[re.Pattern, list[str]]:
    """A regular expression matching the paths ``template`` makes, and its groups' fields."""
    pattern, fields = [], []
    for literal, name, _spec, _conversion in string.Formatter().parse(template):
        pattern.append(re.escape(literal))
        if name is not None:
            fields.append(name)
            pattern.append("(.+?)" if name == "video_key" else r"(\d+)")
    return re.compile("".join(pattern)), fields


# an entry of compact JSON's "files" object: its key (JSON-escaped) and its value's text
_FILE_ENTRY = re.compile(rb'"((?:[^"\\]|\\.)*)": (\[[^\]]*\])')


def _hash64(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little") - (
        1 << 63
    )


class _Changes:
    """The source files that changed, appeared or disappeared since an earlier check, compared
    a group of files at a time. The earlier files are held as 64-bit hashes of each path and
    of its signature (16 bytes a file); their paths are read again only for removed files.

    Args:
        previous: the earlier ``check_files.json`` (compact JSON, read a piece at a time), or
            an earlier report's JSON (``{"files": {path: signature}}``).
    """

    def __init__(self, previous: str | Path | Mapping) -> None:
        self.previous = previous
        paths, values = array("q"), array("q")  # 8 bytes a file, not a Python int
        for rel, value in self._entries():
            paths.append(_hash64(rel))
            values.append(_hash64(value))
        order = np.argsort(np.frombuffer(paths, np.int64), kind="stable")
        self.paths = np.frombuffer(paths, np.int64)[order]
        self.values = np.frombuffer(values, np.int64)[order]
        self.seen = np.zeros(len(paths), bool)
        self.found: list[tuple[str, str]] = []  # (path, kind)

    def _entries(self):
        """Each earlier file's path and its signature's JSON text."""
        if isinstance(self.previous, Mapping):
            for rel, value in self.previous.get("files", {}).items():
                yield rel, json.dumps(list(value))
            return
        with open(self.previous, "rb") as file:
            rest = b""
            while chunk := file.read(1 << 20):
                rest += chunk
                end = 0
                for match in _FILE_ENTRY.finditer(rest):
                    key, end = match.group(1), match.end()
                    rel = json.loads(b'"' + key + b'"') if b"\\" in key else key.decode()
                    yield rel, match.group(2).decode()
                rest = rest[end:]

    def compare(self, files: Mapping) -> None:
        """Compare ``files`` (``{path: signature}``, no path given twice)."""
        rels = list(files)
        if not rels:
            return
        paths = np.array([_hash64(rel) for rel in rels], np.int64)
        values = np.array([_hash64(json.dumps(list(files[rel]))) for rel in rels], np.int64)
        at = np.minimum(np.searchsorted(self.paths, paths), max(len(self.paths) - 1, 0))
        known = self.paths[at] == paths if len(self.paths) else np.zeros(len(rels), bool)
        self.seen[at[known]] = True
        changed = known & (self.values[at] != values) if len(self.paths) else known
        self.found += [(rels[i], "source_added") for i in np.flatnonzero(~known)]
        self.found += [(rels[i], "source_changed") for i in np.flatnonzero(changed)]

    def notes(self) -> list[Problem]:
        """A note per file that changed, appeared (compared) or disappeared (earlier, never
        compared), in path order."""
        removed = set(self.paths[~self.seen].tolist())
        if removed:
            self.found += [
                (rel, "source_removed") for rel, _ in self._entries() if _hash64(rel) in removed
            ]
        messages = {
            "source_removed": "removed since the last check",
            "source_added": "added since the last check",
            "source_changed": "changed since the last check (size or modification time): "
            "the jobs that read it are rerun",
        }
        return [Problem(kind, messages[kind], file=rel) for rel, kind in sorted(self.found)]


def _changes(before: Mapping, after: Mapping) -> list[Problem]:
    """Notes for the files of ``after`` (``{path: signature}``) that changed, appeared or
    disappeared since ``before`` (the same)."""
    changes = _Changes({"files": before})
    changes.compare(after)
    return changes.notes()

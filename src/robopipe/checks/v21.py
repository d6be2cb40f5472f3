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
  timestamps within ``tolerance_s`` of ``frame_index / fps``, no column that no feature
  declares (:func:`robopipe.formats.v21_repairs.undeclared_columns`, the rule ``validate``
  enforces on the output), ``frame_index`` counting ``0..length-1``, and the values that
  point into other files: every ``episode_index`` is the episode's own, every ``task_index``
  names a task of ``tasks.jsonl``;
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
found from the path templates (:mod:`robopipe.checks.files`), the earlier files compared as
hashes (:mod:`robopipe.checks.changes`), and each camera's streams held as runs of episodes
(:mod:`robopipe.checks.streams`). Each episode's files are checked by
:mod:`robopipe.checks.v21_episode`. Problems that an opt-in repair
(:data:`robopipe.formats.v21_repairs.REPAIRS`) fixes are not problems when it is on, and name
it when it is off.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from robopipe.checks.changes import Changes
from robopipe.checks.files import UsedFiles, listed_episodes, record_file, stray_files
from robopipe.checks.parts import CheckPart, StreamedFiles
from robopipe.checks.report import CheckReport, Problem
from robopipe.checks.streams import StreamRuns
from robopipe.checks.v21_episode import EpisodeChecker
from robopipe.errors import DatasetError
from robopipe.formats.v21_reader import (
    STATS_FIX,
    V21Source,
    episode_index_problems,
    info_problem,
    normalise_template,
    read_episode_lines,
    read_json,
    read_jsonl,
    template_problems,
)
from robopipe.formats.v21_repairs import repairs_of
from robopipe.layout import (
    V21_EPISODES_PATH,
    V21_EPISODES_STATS_PATH,
    V21_INFO_PATH,
    V21_TASKS_PATH,
)
from robopipe.options import ConversionOptions
from robopipe.source_cache import source_root

# Episodes of a remote source checked at once, whatever ``threads`` says.
REMOTE_THREADS = 16

# Episodes given to the thread pool at once.
EPISODES_PER_BATCH = 256


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
            :func:`robopipe.source_cache.source_root`).
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
    lengths, first_index = {}, {}
    wanted = set(positions)
    offset = 0  # frames of the episodes before, in episode order: the v2.1 ``index``
    for i in range(max(positions, default=-1) + 1):
        episode = source.episodes[i]
        length = episode.get("length")
        if i in wanted:
            lengths[episode["episode_index"]] = length
            first_index[episode["episode_index"]] = offset
        offset = offset + length if isinstance(offset, int) and isinstance(length, int) else None
    source.episodes = ()  # the range's lengths and first indices are all the checker needs
    checker = EpisodeChecker(source, options, lengths, first_index)
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
    changes = None if previous is None else Changes(previous)
    if changes:
        changes.compare(meta_files)
    count = len(meta_files)
    if source is None:
        parts = list  # nothing but the metadata was checked
    else:
        skip = set(options.skip_episodes)
        listed = listed_episodes(source)
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
        used = UsedFiles(source, listed, meta_files, outside)
        report.notes += stray_files(root, used, remote)
    if changes:
        report.notes += changes.notes()
    report.files = StreamedFiles(meta_files, parts, count)
    return report


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
        record_file(root, rel, report.files)
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
        have = source.stats_episodes()
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

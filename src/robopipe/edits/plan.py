"""The plan of an edit: every output file of a v3.0 dataset made from one or more v3.0
datasets by ``delete_episodes``, ``split``, ``merge``, ``remove_feature``, ``modify_tasks`` or
``recompute_stats`` (lerobot-edit-dataset's operations), from the inputs' ``meta/`` alone.

The rule, lerobot 0.6.1's for ``delete_episodes`` and ``split`` (``dataset_tools.py``
``_copy_and_reindex_data``, ``_copy_and_reindex_videos``) and ``merge`` with
``concatenate_videos=False``: each output file is made of one input file, the input's episodes
that the output keeps, in order. Input files that keep none are left out and the output files
are numbered again from ``chunk-000/file-000`` (lerobot keeps the input's numbers, with gaps).
So an output video file whose input file keeps every episode is that file (linked), and one
that keeps some is cut from it by stream copy; nothing is re-encoded.

Episodes are numbered again from 0 in output order (a merge: the first input's, then the
next's); ``index`` runs on over the output's frames. Tasks: a delete or split keeps the
input's task table (as the conversion with ``skip_episodes`` does; lerobot keeps only the tasks
of the kept episodes); a merge keeps the first input's tasks and appends each later input's
new ones, in order, and maps each input's ``task_index`` onto that table.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from robopipe.atomic import write_json
from robopipe.errors import DatasetError
from robopipe.formats.v30_reader import DatasetMeta, read_episodes_table, read_meta
from robopipe.layout import (
    DEFAULT_CHUNK_SIZE,
    DEFAULT_FEATURES,
    data_path,
    next_chunk_file,
    video_path,
)

OPERATIONS = (
    "delete_episodes",
    "split",
    "merge",
    "remove_feature",
    "modify_tasks",
    "recompute_stats",
)
# how far split fractions may add up from 1 (floating-point sums of decimal fractions)
FRACTIONS_TOLERANCE = 1e-9
# the video feature facts that must be equal for merged inputs to share a dataset
VIDEO_INFO_KEYS = ("video.codec", "video.pix_fmt", "video.height", "video.width")


@dataclass
class EditFile:
    """One output file: the input file it is made of and the output episodes it holds.

    Attributes:
        chunk, file: the output file's chunk and file index.
        source: the input's position in :attr:`EditPlan.sources`.
        path: the input file, relative to that input's root.
        first, stop: the output episodes ``first:stop`` it holds, in order.
        whole: the file keeps every episode of the input file.
    """

    chunk: int
    file: int
    source: int
    path: str
    first: int
    stop: int
    whole: bool


@dataclass
class EditPlan:
    """What an edit writes, made by :func:`make_edit_plan` from the inputs' ``meta/`` only.

    Attributes:
        dataset: the output's name (errors, logs).
        operation: the operation as configured (``{"type": ..., ...}``).
        sources: the inputs' v3.0 roots (absolute paths).
        source_names: the inputs' names, for messages.
        info: the output's ``meta/info.json`` (totals of the output).
        tasks: the output's tasks, by task_index.
        task_maps: per input, the output task_index of each input task_index.
        episodes: per output episode (row i = episode i), int64 arrays ``source``,
            ``source_episode``, ``length``, ``dataset_from_index`` (the output's),
            ``source_from_index`` (the input's); for ``modify_tasks`` also ``task_index``,
            the episode's output task (then ``task_maps`` are not used).
        data_files: the output data files, in order.
        video_files: per camera, its output video files, in order.
        removed: the input features the output leaves out (``remove_feature``).
        recomputed: the features whose stats the data jobs compute again from the rows
            (``recompute_stats``; :func:`recomputed_features`).
    """

    dataset: str
    operation: dict
    sources: list[str]
    source_names: list[str]
    info: dict
    tasks: list[str]
    task_maps: list[list[int]]
    episodes: dict[str, np.ndarray]
    data_files: list[EditFile]
    video_files: dict[str, list[EditFile]] = field(default_factory=dict)
    removed: list[str] = field(default_factory=list)
    recomputed: list[str] = field(default_factory=list)

    @property
    def num_episodes(self) -> int:
        return len(self.episodes["source"])

    @property
    def total_frames(self) -> int:
        return int(self.episodes["length"].sum())

    @property
    def video_keys(self) -> list[str]:
        return list(self.video_files)

    def data_file(self, chunk: int, file: int) -> EditFile:
        """The output data file ``chunk``/``file``. Raises KeyError: no such file."""
        return _find(self.data_files, chunk, file, "data")

    def video_file(self, video_key: str, chunk: int, file: int) -> EditFile:
        """The output video file of ``video_key``. Raises KeyError: no such file."""
        return _find(self.video_files[video_key], chunk, file, video_key)

    def file_paths(self) -> list[str]:
        """Every output data and video file, relative to the output root (what publish
        links), as :meth:`robopipe.conversion.plan.Plan.file_paths`."""
        paths = [data_path(f.chunk, f.file) for f in self.data_files]
        for key, files in self.video_files.items():
            paths += [video_path(key, f.chunk, f.file) for f in files]
        return paths

    def identity(self, position: int) -> bool:
        """Whether input ``position``'s rows keep their episode_index, index and task_index
        in the output (so a whole data file of it is linked, not rewritten)."""
        e = self.episodes
        rows = np.flatnonzero(e["source"] == position)
        return (
            not self.removed
            and "task_index" not in e
            and bool(np.array_equal(e["source_episode"][rows], rows))
            and bool(np.array_equal(e["source_from_index"][rows], e["dataset_from_index"][rows]))
            and self.task_maps[position] == list(range(len(self.task_maps[position])))
        )

    def to_json(self) -> dict:
        """The plan as JSON (:func:`load_edit_plan` reads it back)."""
        files = {"data": [vars(f) for f in self.data_files]}
        files["videos"] = {k: [vars(f) for f in v] for k, v in self.video_files.items()}
        return {
            "dataset": self.dataset,
            "operation": self.operation,
            "sources": self.sources,
            "source_names": self.source_names,
            "info": self.info,
            "tasks": self.tasks,
            "task_maps": self.task_maps,
            "episodes": {k: v.tolist() for k, v in self.episodes.items()},
            "files": files,
            "removed": self.removed,
            "recomputed": self.recomputed,
        }

    def save(self, path: str | Path) -> None:
        """Write the plan as JSON, atomically."""
        write_json(path, self.to_json(), indent=None)


def load_edit_plan(path: str | Path) -> EditPlan:
    """The plan :meth:`EditPlan.save` wrote."""
    obj = json.loads(Path(path).read_text("utf-8"))
    files = obj.pop("files")
    obj["episodes"] = {k: np.asarray(v, np.int64) for k, v in obj["episodes"].items()}
    return EditPlan(
        **obj,
        data_files=[EditFile(**f) for f in files["data"]],
        video_files={k: [EditFile(**f) for f in v] for k, v in files["videos"].items()},
    )


def _find(files: list[EditFile], chunk: int, file: int, what: str) -> EditFile:
    for f in files:
        if (f.chunk, f.file) == (chunk, file):
            return f
    raise KeyError(f"no {what} file chunk {chunk} file {file} in the edit plan")


def split_episodes(name: str, total: int, splits: dict) -> dict[str, list[int]]:
    """Each split's input episodes.

    ``splits`` maps a split name to a fraction of the episodes, or to a list of episode
    indices. Fractions follow lerobot 0.6.1 (``_fractions_to_episode_indices``): split ``k``
    takes the next ``int(total * fraction)`` episodes in order, the last one the rest; they
    must add up to 1 (lerobot accepts less and gives the rest to the last split anyway).

    Raises:
        DatasetError: fractions that do not add up to 1, a split without episodes, an
            unknown episode index, an episode in two splits, or fractions mixed with lists.
    """
    if not splits:
        raise DatasetError(name, "split: no splits given")
    values = list(splits.values())
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        check_fractions(name, splits)
        result, start = {}, 0
        for position, (split, fraction) in enumerate(splits.items()):
            stop = total if position == len(splits) - 1 else start + int(total * fraction)
            result[split] = list(range(start, stop))
            start = stop
    elif all(isinstance(v, list | tuple) for v in values):
        result = {split: sorted(int(i) for i in v) for split, v in splits.items()}
        seen: dict[int, str] = {}
        for split, indices in result.items():
            _check_indices(name, indices, total, f"split {split!r}")
            for i in indices:
                if i in seen:
                    raise DatasetError(
                        name, f"split: in splits {seen[i]!r} and {split!r}", episode=i
                    )
                seen[i] = split
    else:
        raise DatasetError(name, "split: give every split a fraction, or every split a list")
    for split, indices in result.items():
        if not indices:
            raise DatasetError(name, f"split {split!r} has no episodes of {total}")
    return result


def check_fractions(name: str, splits: dict) -> None:
    """Refuse split fractions that do not add up to 1 (within ``FRACTIONS_TOLERANCE``).

    Raises:
        DatasetError: naming every split and its fraction.
    """
    total_fraction = math.fsum(splits.values())
    if abs(total_fraction - 1) > FRACTIONS_TOLERANCE:
        shown = ", ".join(f"{k}: {v}" for k, v in splits.items())
        raise DatasetError(name, f"split fractions add up to {total_fraction:g}, not 1 ({shown})")


def flagged_episodes(
    quality_file: str | Path,
    checks: list[str],
    severities: tuple[str, ...] = ("error",),
    conversion_plan: str | Path | None = None,
) -> list[int]:
    """The episodes of the dataset's v3.0 that the quality target flagged with any of
    ``checks`` at one of ``severities``, sorted: the ``findings`` of its ``quality.json``
    (``{"findings": [{"check", "severity", "episode_index", ...}]}``, docs/checking.md).

    Findings name the source's episodes. For a converted (v2.x) source pass its conversion's
    ``plan.json`` as ``conversion_plan``: its ``episodes.source_episode_index`` column maps
    each source index to the output's (the output renumbers them where ``skip_episodes`` left
    some out); a finding of an episode the conversion left out names none of the output's.

    Raises:
        ValueError: a check name that no finding and no listed check of the file has.
    """
    report = json.loads(Path(quality_file).read_text("utf-8"))
    known = {c.get("name") for c in report.get("checks", [])}
    known |= {f["check"] for f in report.get("findings", [])}
    unknown = [c for c in checks if known and c not in known]
    if unknown:
        raise ValueError(f"{quality_file}: no check {unknown[0]!r} (checks: {sorted(known)})")
    flagged = {
        int(f["episode_index"])
        for f in report.get("findings", [])
        if f["check"] in checks and f.get("severity", "error") in severities
        and f.get("episode_index") is not None
    }  # fmt: skip
    if conversion_plan is not None:
        plan = json.loads(Path(conversion_plan).read_text("utf-8"))
        output_of = {
            int(source): out for out, source in enumerate(plan["episodes"]["source_episode_index"])
        }
        flagged = {output_of[i] for i in flagged if i in output_of}
    return sorted(flagged)


def _check_indices(name: str, indices, total: int, what: str) -> None:
    for i in indices:
        if not 0 <= int(i) < total:
            raise DatasetError(
                name, f"{what}: no episode {i}: the input has episodes 0..{total - 1}", episode=i
            )


def kept_episodes(name: str, total: int, operation: dict, split: str | None = None) -> list[int]:
    """The input episodes an output of ``delete_episodes`` or ``split`` keeps, in order.

    Raises:
        DatasetError: unknown or missing episode indices, a delete of every episode, bad
            splits (:func:`split_episodes`), an unknown split name.
    """
    kind = operation["type"]
    if kind == "delete_episodes":
        deleted = [int(i) for i in operation.get("episode_indices") or []]
        if not deleted:
            raise DatasetError(name, "delete_episodes: no episode to delete")
        _check_indices(name, deleted, total, "delete_episodes")
        gone = set(deleted)
        kept = [i for i in range(total) if i not in gone]
        if not kept:
            raise DatasetError(name, f"delete_episodes: every one of the {total} episodes")
        return kept
    if kind in ("remove_feature", "modify_tasks", "recompute_stats"):
        return list(range(total))
    if kind == "split":
        splits = split_episodes(name, total, operation.get("splits") or {})
        if split not in splits:
            raise DatasetError(name, f"split: no split {split!r} (splits: {', '.join(splits)})")
        return splits[split]
    raise DatasetError(name, f"operation {kind!r} keeps no episodes of one input")


def check_mergeable(names: list[str], infos: list[dict]) -> None:
    """Refuse inputs that cannot share one dataset: other features (names, dtypes, shapes),
    fps, or video codec, pixel format or frame size.

    Raises:
        DatasetError: naming the input and the feature that differs from the first input's.
    """
    first = infos[0]
    for name, info in zip(names[1:], infos[1:], strict=True):
        if info["fps"] != first["fps"]:
            raise DatasetError(
                name, f"merge: fps {info['fps']} differs from {names[0]!r}'s {first['fps']}"
            )
        ours, theirs = first["features"], info["features"]
        for feature in [*ours, *(k for k in theirs if k not in ours)]:
            if feature not in theirs or feature not in ours:
                where = names[0] if feature in ours else name
                raise DatasetError(name, f"merge: feature {feature!r} is only in {where!r}")
            a, b = ours[feature], theirs[feature]
            for key in ("dtype", "shape"):
                if a.get(key) != b.get(key):
                    raise DatasetError(
                        name,
                        f"merge: feature {feature!r} has {key} {b.get(key)} where "
                        f"{names[0]!r} has {a.get(key)}",
                    )
            if a["dtype"] == "video":
                for key in VIDEO_INFO_KEYS:
                    x, y = (a.get("info") or {}).get(key), (b.get("info") or {}).get(key)
                    if x != y:
                        raise DatasetError(
                            name,
                            f"merge: feature {feature!r} has {key} {y} where {names[0]!r} "
                            f"has {x}; re-encode one of them first",
                        )


def make_edit_plan(
    dataset: str,
    operation: dict,
    sources: list[str | Path],
    *,
    source_names: list[str] | None = None,
    split: str | None = None,
) -> EditPlan:
    """Plan the output ``dataset`` of ``operation`` on the v3.0 datasets ``sources``.

    Args:
        dataset: the output's name.
        operation: ``{"type": "delete_episodes", "episode_indices": [...]}``,
            ``{"type": "split", "splits": {name: fraction | [indices]}}`` (with ``split``,
            the split this output is), ``{"type": "merge"}`` (the inputs are ``sources``), or
            ``{"type": "remove_feature", "feature_names": [...]}``, or ``{"type":
            "modify_tasks", "new_task": ..., "episode_tasks": {i: task},
            "task_replacements": {old: new}}`` (any of the three; :func:`modified_tasks`),
            or ``{"type": "recompute_stats"}`` (:func:`recomputed_features`).
        sources: the inputs' v3.0 folders (one, or for a merge two or more).
        source_names: their names in messages (default: the folders).
        split: the split of a ``split`` operation that this output is.

    Only ``meta/`` of each input is read (info.json, tasks, the episodes' index and file
    columns), nothing per frame.

    Raises:
        DatasetError: bad input (see :func:`kept_episodes`, :func:`check_mergeable`), an
            unknown operation, an input that is not a v3.0 dataset.
    """
    kind = operation.get("type")
    if kind not in OPERATIONS:
        raise DatasetError(dataset, f"unknown operation {kind!r}; one of {', '.join(OPERATIONS)}")
    roots = [str(Path(s).resolve()) for s in sources]
    names = list(source_names or roots)
    if (kind == "merge") != (len(roots) > 1) or not roots:
        raise DatasetError(
            dataset, f"{kind}: needs {'two or more inputs' if kind == 'merge' else 'one input'}"
        )
    metas = [read_meta(root, name=n) for root, n in zip(roots, names, strict=True)]
    if kind == "merge":
        check_mergeable(names, [m.info for m in metas])
        picked = [np.arange(m.num_episodes) for m in metas]
    else:
        picked = [np.asarray(kept_episodes(names[0], metas[0].num_episodes, operation, split))]
    removed = (
        removed_features(names[0], metas[0].info, operation) if kind == "remove_feature" else []
    )
    tasks, task_maps = _merged_tasks(metas)
    episodes = _output_episodes(metas, picked)
    if kind == "modify_tasks":
        tasks, episodes["task_index"] = modified_tasks(names[0], metas[0], operation)
    chunks_size = int(metas[0].info.get("chunks_size") or DEFAULT_CHUNK_SIZE)
    data_files = _files(metas, episodes, ("data/chunk_index", "data/file_index"), chunks_size)
    for f in data_files:
        f.path = data_path(*_source_ids(metas, episodes, f, "data"))
    video_files = {}
    for key in (k for k in metas[0].video_keys if k not in removed):
        columns = (f"videos/{key}/chunk_index", f"videos/{key}/file_index")
        video_files[key] = _files(metas, episodes, columns, chunks_size)
        for f in video_files[key]:
            f.path = video_path(key, *_source_ids(metas, episodes, f, key))
    info = _output_info(metas[0].info, episodes, tasks)
    info["features"] = {k: v for k, v in info["features"].items() if k not in removed}
    return EditPlan(
        dataset=dataset,
        operation=dict(operation),
        sources=roots,
        source_names=names,
        info=info,
        tasks=tasks,
        task_maps=task_maps,
        episodes={k: v for k, v in episodes.items() if k in _PLAN_COLUMNS},
        data_files=data_files,
        video_files=video_files,
        removed=removed,
        recomputed=(
            recomputed_features(names[0], metas[0].info, operation)
            if kind == "recompute_stats"
            else []
        ),
    )


def removed_features(name: str, info: dict, operation: dict) -> list[str]:
    """The features ``remove_feature`` leaves out: its ``feature_names``, each a feature of
    the input and none of lerobot's default ones (``timestamp``, ``frame_index``,
    ``episode_index``, ``index``, ``task_index``), which lerobot 0.6.1 refuses too.

    Raises:
        DatasetError: no feature named, an unknown one, a default one, or every camera and
            every data feature but the defaults.
    """
    names = list(operation.get("feature_names") or [])
    if not names:
        raise DatasetError(name, "remove_feature: no feature_names")
    for feature in names:
        if feature not in info["features"]:
            known = ", ".join(k for k in info["features"] if k not in DEFAULT_FEATURES)
            raise DatasetError(name, f"remove_feature: no feature {feature!r} (features: {known})")
        if feature in DEFAULT_FEATURES:
            raise DatasetError(name, f"remove_feature: {feature!r} is a default feature")
    if all(k in names or k in DEFAULT_FEATURES for k in info["features"]):
        raise DatasetError(name, "remove_feature: would leave no feature but the defaults")
    return names


def recomputed_features(name: str, info: dict, operation: dict) -> list[str]:
    """The features ``recompute_stats`` computes the stats of again: every feature but the
    cameras, images, strings and lerobot's default ones (lerobot 0.6.1
    ``dataset_tools.recompute_stats``: its stats of images and videos are kept as they are
    even with ``skip_image_video: false``, and so are they here).

    Raises:
        DatasetError: ``relative_action: true`` (lerobot's stats of actions relative to the
            state over action chunks, not built here), or no such feature.
    """
    if operation.get("relative_action"):
        raise DatasetError(name, "recompute_stats: relative_action is not supported")
    features = [
        key
        for key, feature in info["features"].items()
        if feature.get("dtype") not in ("image", "video", "string", "language")
        and key not in DEFAULT_FEATURES
    ]
    if not features:
        raise DatasetError(name, "recompute_stats: no numeric feature but the defaults")
    return features


_PLAN_COLUMNS = (
    "source",
    "source_episode",
    "length",
    "dataset_from_index",
    "source_from_index",
    "task_index",
)


def check_modify_tasks(name: str, operation: dict, total: int) -> None:
    """The part of :func:`modified_tasks` that needs no task table: at least one of
    ``new_task``, ``episode_tasks`` and ``task_replacements``, and episode indices of the
    input (lerobot 0.6.1 ``dataset_tools.modify_tasks`` refuses the same).

    Raises:
        DatasetError: naming the missing keys or the unknown episode.
    """
    if not any(operation.get(k) for k in ("new_task", "episode_tasks", "task_replacements")):
        raise DatasetError(name, "modify_tasks: give new_task, episode_tasks or task_replacements")
    indices = sorted(int(i) for i in (operation.get("episode_tasks") or {}))
    _check_indices(name, indices, total, "modify_tasks: episode_tasks")


def modified_tasks(name: str, meta: DatasetMeta, operation: dict) -> tuple[list[str], np.ndarray]:
    """``modify_tasks``: the output's tasks and each episode's task_index in them.

    lerobot 0.6.1's rule (``dataset_tools.modify_tasks``): an episode's task is its
    ``episode_tasks`` entry, else its first task's ``task_replacements`` entry, else
    ``new_task``, else its first task as it was; the output's tasks are the distinct ones,
    sorted, numbered from 0. Reads the input's ``meta/episodes`` ``tasks`` column.

    Raises:
        DatasetError: see :func:`check_modify_tasks`; a replacement of a task the input does
            not have; an episode left without a task.
    """
    check_modify_tasks(name, operation, meta.num_episodes)
    episode_tasks = {int(k): v for k, v in (operation.get("episode_tasks") or {}).items()}
    replacements = dict(operation.get("task_replacements") or {})
    unknown = sorted(set(replacements) - set(meta.tasks))
    if unknown:
        raise DatasetError(
            name, f"modify_tasks: task_replacements: no task {unknown[0]!r} in the input"
        )
    new_task = operation.get("new_task")
    table = read_episodes_table(meta, ["episode_index", "tasks"])
    originals = dict(
        zip(table.column("episode_index").to_pylist(), table.column("tasks").to_pylist(),
            strict=True)
    )  # fmt: skip
    chosen = []
    for episode in range(meta.num_episodes):
        original = (originals.get(episode) or [None])[0]
        if episode in episode_tasks:
            chosen.append(episode_tasks[episode])
        elif original in replacements:
            chosen.append(replacements[original])
        elif new_task:
            chosen.append(new_task)
        elif original:
            chosen.append(original)
        else:
            raise DatasetError(
                name, "modify_tasks: no task; give new_task or episode_tasks", episode=episode
            )
    tasks = sorted(set(chosen))
    position = {t: i for i, t in enumerate(tasks)}
    return tasks, np.asarray([position[t] for t in chosen], np.int64)


def _merged_tasks(metas: list[DatasetMeta]) -> tuple[list[str], list[list[int]]]:
    tasks = list(metas[0].tasks)
    position = {t: i for i, t in enumerate(tasks)}
    maps = []
    for meta in metas:
        mapping = []
        for task in meta.tasks:
            if task not in position:
                position[task] = len(tasks)
                tasks.append(task)
            mapping.append(position[task])
        maps.append(mapping)
    return tasks, maps


def _output_episodes(metas: list[DatasetMeta], picked: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Per output episode: its input, input episode, length, input file ids (every
    ``*/chunk_index`` and ``*/file_index`` column), and input and output first index."""
    parts: dict[str, list[np.ndarray]] = {}
    for position, (meta, rows) in enumerate(zip(metas, picked, strict=True)):
        e = meta.episodes
        columns = {"source": np.full(len(rows), position, np.int64), "source_episode": rows}
        columns["source_from_index"] = e["dataset_from_index"][rows]
        columns["length"] = e["dataset_to_index"][rows] - e["dataset_from_index"][rows]
        for column, values in e.items():
            if column.endswith(("/chunk_index", "/file_index")):
                columns[column] = values[rows]
        for column, values in columns.items():
            parts.setdefault(column, []).append(np.asarray(values, np.int64))
    episodes = {k: np.concatenate(v) for k, v in parts.items()}
    episodes["dataset_from_index"] = np.concatenate([[0], np.cumsum(episodes["length"])[:-1]])
    return episodes


def _files(metas, episodes, columns: tuple[str, str], chunks_size: int) -> list[EditFile]:
    """The output files of one kind: runs of output episodes from the same input file."""
    ids = np.stack([episodes["source"], episodes[columns[0]], episodes[columns[1]]], axis=1)
    starts = [0, *(np.flatnonzero((ids[1:] != ids[:-1]).any(axis=1)) + 1).tolist()]
    stops = [*starts[1:], len(ids)]
    files, chunk, file = [], 0, 0
    for first, stop in zip(starts, stops, strict=True):
        source, src_chunk, src_file = (int(x) for x in ids[first])
        e = metas[source].episodes
        in_file = int(((e[columns[0]] == src_chunk) & (e[columns[1]] == src_file)).sum())
        files.append(EditFile(chunk, file, source, "", first, stop, whole=in_file == stop - first))
        chunk, file = next_chunk_file(chunk, file, chunks_size)
    return files


def _source_ids(metas, episodes, f: EditFile, kind: str) -> tuple[int, int]:
    prefix = "data" if kind == "data" else f"videos/{kind}"
    return int(episodes[f"{prefix}/chunk_index"][f.first]), int(
        episodes[f"{prefix}/file_index"][f.first]
    )


def _output_info(info: dict, episodes: dict[str, np.ndarray], tasks: list[str]) -> dict:
    n = len(episodes["source"])
    return {
        **info,
        "total_episodes": n,
        "total_frames": int(episodes["length"].sum()),
        "total_tasks": len(tasks),
        "splits": {"train": f"0:{n}"},
    }

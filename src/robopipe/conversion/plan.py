"""Plan a v2.1 -> v3.0 conversion: every episode's final files, and the shards.

The file assignment is lerobot 0.6.1's (``scripts/convert_dataset_v21_to_v30.py:232`` for data,
``:331`` for each camera): each stream (data, and each camera on its own) fills files in episode
order and rolls over *before* adding an episode when ``size + episode_size >= limit`` and the
file already holds an episode. Data sizes are the source parquet's uncompressed size
(``io_utils.get_parquet_file_size_in_mb``: sum of ``total_uncompressed_size`` over row groups
and columns), video sizes the mp4's size on disk, both in MiB. ``(chunk, file)`` advance with
:func:`robopipe.layout.next_chunk_file`.

Shards are sized by work: a shard takes consecutive episodes until their work reaches
``shard_size_in_mb``, holds at most ``episodes_per_shard`` episodes, and never straddles a final
data file, so each data file is made from whole shards (:func:`make_shards`). An episode's work
is what its shard job reads: its source parquet's uncompressed MiB (the measure of
``data_file_size_in_mb``) plus :data:`EPISODE_WORK_MB` for the per-file cost. Shards pack rows
only: each video file is remuxed straight from its episodes' mp4s, so a shard may span video
files (cutting shards at every 200 MB video file would start a process per video file for a few
hundred milliseconds of parquet work), and mp4 bytes are not a shard's work.

The plan reads only metadata (``meta/*.json*``, parquet footers, file sizes), so it is cheap
enough to compute while Snakemake builds the DAG.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from robopipe.atomic import write_json
from robopipe.formats.v21_reader import STATS_FIX, V21Source
from robopipe.formats.v21_repairs import repairs_of, undeclared_columns_to
from robopipe.layout import V21_EPISODES_STATS_PATH, data_path, next_chunk_file, video_path
from robopipe.options import ConversionOptions
from robopipe.source_cache import list_remote, load_v21
from robopipe.sources.base import tree_digest

MIB = 2**20
PLAN_VERSION = 4
EPISODE_WORK_MB = 0.05
"""The per-episode cost of a shard job, in MiB of parquet it would read in the same time.

Measured (shard job, in-process, 2-core dev machine): 0.5 ms per episode for opening its
parquet, the repairs and the timestamp check, and 9 ms per MiB read; so one episode costs about
as much as 0.05 MiB. Without it 20,000 tiny episodes of 4 KB would weigh 80 MiB, well under one
shard's target, although the job spends most of its time on the files, not the bytes."""


@dataclass(frozen=True, slots=True)
class PlannedEpisode:
    """One episode of the output and where it goes.

    Attributes:
        episode_index: the output (v3.0) index, ``0..N-1``.
        source_episode_index: the v2.1 index it comes from.
        length: frames (rows).
        dataset_from_index: global index of its first frame in the output.
        dataset_to_index: global index one past its last frame.
        data: ``(chunk, file)`` of the data file holding it.
        videos: camera (video key) -> ``(chunk, file)`` of the video file holding it.

    Episodes of the same files share their ``data`` tuple and ``videos`` dict (never
    mutated), and there are no per-instance dicts (slots): a plan of 76,000 episodes is
    held by every job and by Snakemake.
    """

    episode_index: int
    source_episode_index: int
    length: int
    dataset_from_index: int
    dataset_to_index: int
    data: tuple[int, int]
    videos: dict[str, tuple[int, int]]


@dataclass(frozen=True)
class Shard:
    """Consecutive output episodes ``first..stop-1`` packed by one shard job.

    Attributes:
        id: ``shard-NNNNNN``, in episode order.
        first: the first output episode index.
        stop: one past the last output episode index.
    """

    id: str
    first: int
    stop: int


@dataclass(frozen=True)
class PlannedFile:
    """One final data or video file: ``chunk-{chunk:03d}/file-{file:03d}`` and, for a data
    file, the shards whose rows it holds, in order (a video file has none: it is remuxed from
    the episode mp4s)."""

    chunk: int
    file: int
    shards: tuple[str, ...] = ()


@dataclass(frozen=True)
class Plan:
    """The conversion plan of one dataset (``results/{dataset}/plan.json``).

    Attributes:
        dataset: the dataset's name in the config.
        source: absolute path of the v2.1 source folder.
        fps: frames per second of every episode.
        video_keys: the cameras, in ``info.json`` order.
        options: the conversion's settings.
        total_frames: frames of all kept episodes.
        episodes: the kept episodes in output order.
        shards: the shard jobs, in episode order.
        data_files: the final data files, in order.
        video_files: camera -> its final video files, in order.
        version: the plan format, :data:`PLAN_VERSION`.
    """

    dataset: str
    source: str
    fps: int
    video_keys: list[str]
    options: ConversionOptions
    total_frames: int
    episodes: list[PlannedEpisode]
    shards: list[Shard]
    data_files: list[PlannedFile]
    video_files: dict[str, list[PlannedFile]]
    version: int = field(default=PLAN_VERSION)

    def shard(self, shard_id: str) -> Shard:
        """The shard with this id. Raises ``KeyError`` if the plan has none."""
        for shard in self.shards:
            if shard.id == shard_id:
                return shard
        raise KeyError(f"plan of dataset {self.dataset!r} has no shard {shard_id!r}")

    def shard_episodes(self, shard_id: str) -> list[PlannedEpisode]:
        """The episodes of one shard, in order."""
        shard = self.shard(shard_id)
        return self.episodes[shard.first : shard.stop]

    def data_file(self, chunk: int, file: int) -> PlannedFile:
        """The final data file ``(chunk, file)``. Raises ``KeyError`` if not planned."""
        for f in self.data_files:
            if (f.chunk, f.file) == (chunk, file):
                return f
        raise KeyError(f"plan of dataset {self.dataset!r} has no data file {chunk}/{file}")

    def file_paths(self) -> list[str]:
        """Relative paths of every data and video file the plan makes, data first."""
        paths = [data_path(f.chunk, f.file) for f in self.data_files]
        for key, files in self.video_files.items():
            paths += [video_path(key, f.chunk, f.file) for f in files]
        return paths

    def layout_digest(self) -> str:
        """SHA-256 hex digest of what the plan decided: each episode's indices, rows and files,
        and the shards. Computed an episode at a time (no :meth:`to_json` of every episode),
        for a short Snakemake param that changes when the layout does."""
        digest = hashlib.sha256()
        for e in self.episodes:
            fields = [e.episode_index, e.source_episode_index, e.length, e.dataset_from_index]
            fields += [e.data, sorted(e.videos.items())]
            digest.update(json.dumps(fields).encode())
        for s in self.shards:
            digest.update(json.dumps([s.id, s.first, s.stop]).encode())
        return digest.hexdigest()

    def to_json(self) -> dict:
        """A JSON-ready dict; :meth:`from_json` reads it back."""
        return {
            "version": self.version,
            "dataset": self.dataset,
            "source": self.source,
            "fps": self.fps,
            "video_keys": self.video_keys,
            "options": self.options.to_dict(),
            "total_frames": self.total_frames,
            # columns, each file a run of consecutive episodes: a job that reads the plan
            # parses a few numbers per episode, not a JSON object of each
            "episodes": {
                "source_episode_index": [e.source_episode_index for e in self.episodes],
                "length": [e.length for e in self.episodes],
                "data": _runs(e.data for e in self.episodes),
                "videos": {
                    key: _runs(e.videos[key] for e in self.episodes) for key in self.video_keys
                },
            },
            "shards": [{"id": s.id, "episodes": [s.first, s.stop]} for s in self.shards],
            "files": {
                "data": [_file_json(f) for f in self.data_files],
                "videos": {k: [_file_json(f) for f in fs] for k, fs in self.video_files.items()},
            },
        }

    @classmethod
    def from_json(cls, obj: dict) -> Plan:
        """The plan of a :meth:`to_json` dict. Raises ``ValueError`` for another plan version."""
        if obj.get("version") != PLAN_VERSION:
            raise ValueError(
                f"plan version {obj.get('version')} is not {PLAN_VERSION}: rerun the plan step"
            )
        columns = obj["episodes"]
        data = _unrun(columns["data"])
        videos = {key: _unrun(runs) for key, runs in columns["videos"].items()}
        episodes, start, shared = [], 0, {}
        for i, (src_index, length) in enumerate(
            zip(columns["source_episode_index"], columns["length"], strict=True)
        ):
            episodes.append(
                PlannedEpisode(
                    episode_index=i,
                    source_episode_index=src_index,
                    length=length,
                    dataset_from_index=start,
                    dataset_to_index=start + length,
                    data=_shared(shared, next(data)),
                    videos=_shared_videos(shared, {key: next(v) for key, v in videos.items()}),
                )
            )
            start += length
        return cls(
            dataset=obj["dataset"],
            source=obj["source"],
            fps=obj["fps"],
            video_keys=list(obj["video_keys"]),
            options=ConversionOptions.from_config(obj["options"]),
            total_frames=obj["total_frames"],
            episodes=episodes,
            shards=[Shard(s["id"], *s["episodes"]) for s in obj["shards"]],
            data_files=[_file_of(f) for f in obj["files"]["data"]],
            video_files={k: [_file_of(f) for f in fs] for k, fs in obj["files"]["videos"].items()},
        )

    def save(self, path: str | Path) -> None:
        """Write the plan as JSON to ``path`` atomically."""
        write_json(path, self.to_json(), indent=None)


def load_planned_source(root: str | Path, name: str, plan: Plan) -> V21Source:
    """The source of ``plan``, loaded with the ``template_placeholders`` repair if the plan's
    options turn it on."""
    return load_v21(root, name, template_placeholders=plan.options.template_placeholders)


def load_plan(path: str | Path) -> Plan:
    """Read a plan written by :meth:`Plan.save` (``results/{dataset}/plan.json``).

    Raises:
        ValueError: the file holds a plan of another version.
    """
    return Plan.from_json(json.loads(Path(path).read_text(encoding="utf-8")))


def save_parse_time_plan(plan: Plan, signature: str, path: str | Path) -> None:
    """Write ``plan``, made by the main Snakemake while it built the DAG from the files whose
    :func:`source_signature` was ``signature`` (taken before planning), to ``path``
    (atomically), for the plan job (:func:`reuse_plan`)."""
    write_json(path, {"signature": signature, "plan": plan.to_json()}, indent=None)


def source_signature(root: str | Path) -> str:
    """The digest of every file's path, size and mtime in the v2.1 source folder ``root``
    (:func:`robopipe.sources.base.tree_digest` with ``stat_every_file``; no file opened):
    every file :func:`make_plan` reads is there, so a plan made while the digest was this one
    still holds while it is unchanged."""
    return tree_digest(os.fspath(root), stat_every_file=True)


def reuse_plan(path: str | Path, source: V21Source, options: ConversionOptions) -> Plan | None:
    """The plan saved at ``path`` by :func:`save_parse_time_plan`, where it is the plan that
    :func:`make_plan` would make now: the same source folder, dataset and options, and no file
    of the source changed since (:func:`source_signature`); None where there is no such file,
    or it is unreadable, of another plan version or stale (then make the plan again).

    The plan job reuses the main Snakemake's parse-time plan this way instead of reading every
    parquet footer a second time (at 20,000 episodes on SLURM the plan stage took 35-44 s, 26 s
    of it the footers; now 18-23 s: docs/cluster.md). What the parse-time plan leaves out is
    done here: the check of ``episodes_stats.jsonl`` (make_plan's ``check_stats``).

    Raises:
        DatasetError: as make_plan's stats check.
    """
    try:
        saved = json.loads(Path(path).read_text(encoding="utf-8"))
        plan = Plan.from_json(saved["plan"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    same = (
        plan.dataset == source.name
        and plan.source == str(source.root.resolve())
        and plan.options == options
    )
    if not same or saved.get("signature") != source_signature(source.root):
        return None
    if not options.compute_missing_stats:
        _check_stats(source, [e.source_episode_index for e in plan.episodes])
    return plan


def _shared(cache: dict, value):
    """``value``, or the equal value met before (``cache``): one object for many episodes."""
    return cache.setdefault(value, value)


def _shared_videos(cache: dict, videos: dict[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
    """``videos``, or the equal mapping met before (``cache``), its tuples shared too."""
    key = ("videos", *((k, _shared(cache, v)) for k, v in videos.items()))
    return cache.setdefault(key, dict(key[1:]))


def _runs(files: Iterable[tuple[int, int]]) -> list[list[int]]:
    """``[chunk, file, episodes]`` for each run of consecutive episodes in one file."""
    runs: list[list[int]] = []
    for chunk, file in files:
        if runs and runs[-1][:2] == [chunk, file]:
            runs[-1][2] += 1
        else:
            runs.append([chunk, file, 1])
    return runs


def _unrun(runs: list[list[int]]) -> Iterator[tuple[int, int]]:
    """Each episode's ``(chunk, file)`` from :func:`_runs`' runs."""
    for chunk, file, count in runs:
        for _ in range(count):
            yield (chunk, file)


def _file_json(f: PlannedFile) -> dict:
    return {"chunk": f.chunk, "file": f.file, "shards": list(f.shards)}


def _file_of(obj: dict) -> PlannedFile:
    return PlannedFile(obj["chunk"], obj["file"], tuple(obj["shards"]))


def make_plan(source: V21Source, options: ConversionOptions, *, check_stats: bool = True) -> Plan:
    """Plan the conversion of ``source``: each kept episode's output index, frames and files,
    the shards, and the final files.

    With ``check_stats`` (the default) ``episodes_stats.jsonl`` is read too, so that a missing
    or incomplete file stops the run before any shard job; the workflow's parse-time plan of a
    local source leaves that to the ``plan`` job.

    Raises:
        DatasetError: a skipped episode does not exist, nothing is left to convert,
            ``episodes_stats.jsonl`` lacks an episode (with ``check_stats``), a data or
            video file is missing or its parquet footer is unreadable, or a parquet's row count
            differs from the episode's ``length`` in ``episodes.jsonl``.
    """
    skip = set(options.skip_episodes)
    unknown = sorted(skip - set(range(len(source.episodes))))
    if unknown:
        raise source.error(f"skip_episodes names episodes that do not exist: {unknown}")
    kept = [e["episode_index"] for e in source.episodes if e["episode_index"] not in skip]
    if not kept:
        raise source.error("no episodes left to convert")
    if check_stats and not options.compute_missing_stats:
        # a missing or incomplete file fails the plan, not the meta job
        _check_stats(source, kept)

    data_sizes, lengths = [], []
    video_sizes = {key: [] for key in source.video_keys}
    repairs = repairs_of(options)
    for src_index in kept:
        rows, size = _parquet_rows_and_size(source, src_index, repairs)
        expected = source.episodes[src_index]["length"]
        if rows != expected:
            raise source.error(
                f"parquet has {rows} rows but episodes.jsonl says length={expected}",
                episode=src_index,
                file=source.data_file(src_index),
            )
        lengths.append(rows)
        data_sizes.append(size)
        for key in source.video_keys:
            path = source.video_file(src_index, key)
            try:
                video_sizes[key].append(source.file_size(path) / MIB)
            except FileNotFoundError:
                raise source.error("video file is missing", episode=src_index, file=path) from None

    data_files = assign_files(data_sizes, options.data_file_size_in_mb, options.chunks_size)
    video_files = {
        key: assign_files(sizes, options.video_file_size_in_mb, options.chunks_size)
        for key, sizes in video_sizes.items()
    }
    episodes, start, shared = [], 0, {}
    for new_index, (src_index, length) in enumerate(zip(kept, lengths, strict=True)):
        episodes.append(
            PlannedEpisode(
                episode_index=new_index,
                source_episode_index=src_index,
                length=length,
                dataset_from_index=start,
                dataset_to_index=start + length,
                data=data_files[new_index],
                videos=_shared_videos(
                    shared, {key: files[new_index] for key, files in video_files.items()}
                ),
            )
        )
        start += length

    shards = make_shards(
        episodes,
        options.episodes_per_shard,
        sizes_mb=data_sizes,
        shard_size_in_mb=options.shard_size_in_mb,
    )
    return Plan(
        dataset=source.name,
        source=str(source.root.resolve()),
        fps=source.fps,
        video_keys=list(source.video_keys),
        options=options,
        total_frames=start,
        episodes=episodes,
        shards=shards,
        data_files=_data_files(episodes, shards),
        video_files={key: _video_files(episodes, key) for key in source.video_keys},
    )


def assign_files(sizes_mb: list[float], limit_mb: float, chunks_size: int) -> list[tuple[int, int]]:
    """``(chunk, file)`` of each episode of one stream, by lerobot 0.6.1's rollover rule.

    Args:
        sizes_mb: each episode's size in MiB, in episode order.
        limit_mb: the stream's file size threshold in MiB.
        chunks_size: files per chunk directory.

    A file rolls over before an episode when ``size + episode_size >= limit_mb`` and it already
    holds an episode, so a file exceeds the limit only when one episode alone does.
    """
    assignment, current, size, count = [], (0, 0), 0.0, 0
    for ep_size in sizes_mb:
        if size + ep_size >= limit_mb and count > 0:
            current = next_chunk_file(*current, chunks_size)
            size, count = 0.0, 0
        assignment.append(current)
        size += ep_size
        count += 1
    return assignment


def make_shards(
    episodes: list[PlannedEpisode],
    episodes_per_shard: int,
    *,
    sizes_mb: list[float] | None = None,
    shard_size_in_mb: float = math.inf,
) -> list[Shard]:
    """Cut the episodes into shards of consecutive episodes sized by work.

    Args:
        episodes: the planned episodes, in output order (their ``data`` files already assigned).
        episodes_per_shard: most episodes in one shard.
        sizes_mb: each episode's source parquet size in MiB (uncompressed, as the data files'
            rollover measures it), in the order of ``episodes``; ``None``: the shards are cut by
            ``episodes_per_shard`` and the data files only.
        shard_size_in_mb: a shard's target work, in MiB: each episode weighs its size plus
            :data:`EPISODE_WORK_MB`.

    A new shard starts before an episode when the data file changes (so no shard straddles a
    data file), when the shard already holds ``episodes_per_shard`` episodes, or when the
    episode's work would bring the shard's above ``shard_size_in_mb`` (a shard holds at least
    one episode, so one episode heavier than the target is a shard of its own). The data files
    are planned before and apart from the shards, so the shards never move an episode to
    another file. Shard ids are ``shard-NNNNNN`` in episode order.

    Raises:
        ValueError: ``episodes_per_shard`` is below 1, ``shard_size_in_mb`` is not above 0, or
            ``sizes_mb`` does not have one size per episode.
    """
    if episodes_per_shard < 1:
        raise ValueError(f"episodes_per_shard must be >= 1, got {episodes_per_shard}")
    if not shard_size_in_mb > 0:
        raise ValueError(f"shard_size_in_mb must be > 0, got {shard_size_in_mb}")
    if sizes_mb is None:
        sizes_mb = [0.0] * len(episodes)
        shard_size_in_mb = math.inf
    if len(sizes_mb) != len(episodes):
        raise ValueError(f"{len(sizes_mb)} sizes for {len(episodes)} episodes")
    bounds, first = [], 0
    work = sizes_mb[0] + EPISODE_WORK_MB
    for ep, size in zip(episodes[1:], sizes_mb[1:], strict=True):
        index = ep.episode_index
        ep_work = size + EPISODE_WORK_MB
        if (
            ep.data != episodes[index - 1].data
            or index - first >= episodes_per_shard
            or work + ep_work > shard_size_in_mb
        ):
            bounds.append((first, index))
            first, work = index, 0.0
        work += ep_work
    bounds.append((first, episodes[-1].episode_index + 1))
    return [Shard(f"shard-{i:06d}", lo, hi) for i, (lo, hi) in enumerate(bounds)]


def _data_files(episodes: list[PlannedEpisode], shards: list[Shard]) -> list[PlannedFile]:
    files: dict[tuple[int, int], list[str]] = {}
    for shard in shards:
        files.setdefault(episodes[shard.first].data, []).append(shard.id)
    return [PlannedFile(c, f, tuple(ids)) for (c, f), ids in files.items()]


def _video_files(episodes: list[PlannedEpisode], key: str) -> list[PlannedFile]:
    return [PlannedFile(c, f) for c, f in dict.fromkeys(e.videos[key] for e in episodes)]


def _check_stats(source: V21Source, kept: list[int]) -> None:
    """Raise the :attr:`V21Source.episodes_stats` error where ``episodes_stats.jsonl`` is
    missing or lacks a kept episode, reading it a line at a time (the stats are not kept:
    at 20,000 episodes the whole file is 400 MB of Python objects)."""
    have = source.stats_episodes()
    absent = [index for index in kept if index not in have]
    if absent:
        raise source.error(
            f"no stats for this episode; {STATS_FIX}",
            episode=absent[0],
            file=V21_EPISODES_STATS_PATH,
        )


def _parquet_rows_and_size(
    source: V21Source, episode_index: int, repairs: dict
) -> tuple[int, float]:
    """The episode's parquet rows, and its uncompressed MiB as lerobot measures them, less
    the columns that ``undeclared_columns: drop`` leaves out (so the rollover is that of
    the same dataset without them)."""
    path = source.data_file(episode_index)
    try:
        metadata = source.parquet_metadata(path)  # range reads of a remote source's footer
    except FileNotFoundError:
        raise source.error("data file is missing", episode=episode_index, file=path) from None
    except Exception as exc:  # pyarrow raises ArrowInvalid / OSError for corrupt footers
        raise source.error(f"unreadable parquet: {exc}", episode=episode_index, file=path) from None
    kept = None  # whether each leaf column (a column chunk of each row group) is kept
    if repairs.get("undeclared_columns") == "drop":
        schema = metadata.schema.to_arrow_schema()
        dropped = undeclared_columns_to("drop", schema.names, source.info["features"], repairs)
        kept = [f.name not in dropped for f in schema for _ in range(_leaf_count(f.type))]
    size = 0
    for rg in range(metadata.num_row_groups):
        row_group = metadata.row_group(rg)
        for col in range(row_group.num_columns):
            if kept is None or kept[col]:
                size += row_group.column(col).total_uncompressed_size
    return metadata.num_rows, size / MIB


def _leaf_count(arrow_type) -> int:
    """The parquet leaf columns of a column of ``arrow_type`` (1 for a primitive or a list
    of primitives, the sum of its fields' for a struct)."""
    if arrow_type.num_fields == 0:
        return 1
    return sum(_leaf_count(arrow_type.field(i).type) for i in range(arrow_type.num_fields))


def plan_remote(manifest: str | Path, name: str, options, *, url: str, cache: str, **listing):
    """List the remote v2.1 source at ``url`` into ``manifest``, then plan its conversion
    from its metadata alone: the meta files (fetched into the cache), sizes from the listing
    and parquet footers by range reads, read ahead in parallel. The plan's ``source`` is the
    manifest, from which every later job opens the source. ``listing``: keywords of
    :func:`robopipe.source_cache.list_remote` (``storage_options``).

    Returns:
        The :class:`Plan`.

    Raises:
        DatasetError: as :func:`robopipe.source_cache.list_remote`,
            :func:`robopipe.source_cache.load_v21` and :func:`make_plan`.
    """
    list_remote(name, cache, url=url, retry_budget=options.retry_budget, **listing).save(manifest)
    source = load_v21(manifest, name, template_placeholders=options.template_placeholders)
    skip = set(options.skip_episodes)
    source.remote.read_ahead(
        source.data_file(e["episode_index"]).relative_to(source.root).as_posix()
        for e in source.episodes
        if e["episode_index"] not in skip
    )
    plan = make_plan(source, options)
    return replace(plan, source=str(Path(manifest).resolve()))

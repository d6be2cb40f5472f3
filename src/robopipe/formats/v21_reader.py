"""Read and check a LeRobot v2.1 dataset folder (the converter's input).

The checks follow what lerobot 0.6.1's converter really requires
(``scripts/convert_dataset_v21_to_v30.py``): ``codebase_version == "v2.1"`` (:171-179);
``total_chunks``, ``total_videos`` and ``video_path`` present (:446-451); episodes contiguous
``0..N-1`` with a data file and one mp4 per camera each (:291-303, :397-410).
Unlike lerobot, episode files are looked up by their index (``data_path`` / ``video_path``
templates), so a missing file is reported by name instead of shifting every later episode.
"""

from __future__ import annotations

import functools
import json
import os
import string
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np

from robopipe.errors import DatasetError
from robopipe.layout import (
    V21_EPISODES_PATH,
    V21_EPISODES_STATS_PATH,
    V21_INFO_PATH,
    V21_TASKS_PATH,
)

# the meta files a v2.1 source may hold (episodes_stats.jsonl is optional)
V21_META_FILES = (V21_INFO_PATH, V21_EPISODES_PATH, V21_TASKS_PATH, V21_EPISODES_STATS_PATH)

REQUIRED_INFO_FIELDS = (
    "codebase_version",
    "fps",
    "features",
    "total_episodes",
    "total_frames",
    "total_tasks",
    "total_chunks",
    "total_videos",
    "chunks_size",
    "data_path",
    "video_path",
)

# the versions read as v2.1: a v2.0 dataset is one without episodes_stats.jsonl
# (robopipe.sources.v20)
CONVERTED_VERSIONS = ("v2.0", "v2.1")

STATS_FIX = "set `compute_missing_stats: true` to compute the missing stats"

# The placeholders lerobot 0.3.x fills in v2.1 path templates, per template.
DATA_PLACEHOLDERS = ("episode_chunk", "episode_index")
VIDEO_PLACEHOLDERS = ("episode_chunk", "episode_index", "video_key")
# Other names real exports use for them; accepted with the `template_placeholders` repair.
PLACEHOLDER_ALIASES = {
    "chunk": "episode_chunk",
    "chunk_index": "episode_chunk",
    "episode_chunk_index": "episode_chunk",
    "episode": "episode_index",
    "episode_id": "episode_index",
    "camera": "video_key",
    "image_key": "video_key",
    "video_name": "video_key",
}


@dataclass
class V21Source:
    """A v2.1 dataset folder, its metadata loaded and checked.

    Attributes:
        name: dataset name used in error messages.
        root: the folder holding ``meta/``, ``data/`` and ``videos/``.
        info: ``meta/info.json`` as a dict.
        episodes: ``meta/episodes.jsonl`` lines, sorted by ``episode_index``
            (:class:`EpisodeLines`, or a list of dicts).
        tasks: task strings by ``task_index``.
        video_keys: the cameras (features of dtype ``video``), sorted as lerobot sorts them.
        remote: where the files are when the source is remote
            (:class:`robopipe.source_cache.RemoteSource`; ``root`` is then its cache folder,
            which holds the meta files and whatever :meth:`fetch` has fetched), else None.
    """

    name: str
    root: Path
    info: dict
    episodes: Sequence[dict]
    tasks: list[str]
    video_keys: list[str] = field(default_factory=list)
    remote: object | None = None

    @functools.cached_property
    def available_stats(self) -> dict[int, dict]:
        """The ``stats`` dicts ``meta/episodes_stats.jsonl`` has, by episode index; ``{}``
        when the file is missing (real exports often lack it). Read on first use.

        Raises:
            DatasetError: the file is unreadable.
        """
        if not (self.root / V21_EPISODES_STATS_PATH).is_file():
            return {}
        lines = read_jsonl(self.root, V21_EPISODES_STATS_PATH, self.name)
        return {line["episode_index"]: line["stats"] for line in lines}

    def stats_episodes(self) -> set[int]:
        """The episodes ``episodes_stats.jsonl`` has stats for (none when the file is missing),
        read a line at a time: the stats themselves are not kept (at 20,000 episodes the whole
        file is 400 MB of Python objects).

        Raises:
            DatasetError: a line is not valid JSON (as :func:`read_jsonl` names it).
        """
        path = self.root / V21_EPISODES_STATS_PATH
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
                        self.name,
                        f"line {number} is not valid JSON: {exc}",
                        file=V21_EPISODES_STATS_PATH,
                    ) from None
                if "stats" in entry:
                    have.add(entry.get("episode_index"))
        return have

    @property
    def episodes_stats(self) -> dict[int, dict]:
        """``meta/episodes_stats.jsonl``: each episode's ``stats`` dict, by episode index.

        Read on first use (only the plan and meta jobs need it; it is the largest meta file).

        Raises:
            DatasetError: the file is missing or unreadable, or an episode has no stats; the
                message names the ``compute_missing_stats`` repair.
        """
        absent = sorted(set(range(len(self.episodes))) - set(self.available_stats))
        if absent:
            raise self.error(
                f"no stats for this episode; {STATS_FIX}",
                episode=absent[0],
                file=V21_EPISODES_STATS_PATH,
            )
        return self.available_stats

    @property
    def fps(self) -> int:
        """Frames per second of the dataset (``info["fps"]``, an int in v3.0)."""
        return int(self.info["fps"])

    @property
    def chunks_size(self) -> int:
        """Episodes per v2.1 chunk directory (``info["chunks_size"]``)."""
        return int(self.info["chunks_size"])

    def data_file(self, episode_index: int) -> Path:
        """Absolute path of an episode's v2.1 parquet file."""
        return self.root / self.info["data_path"].format(
            episode_chunk=episode_index // self.chunks_size, episode_index=episode_index
        )

    def video_file(self, episode_index: int, video_key: str) -> Path:
        """Absolute path of an episode's v2.1 mp4 for one camera."""
        return self.root / self.info["video_path"].format(
            episode_chunk=episode_index // self.chunks_size,
            episode_index=episode_index,
            video_key=video_key,
        )

    def file_size(self, path: Path) -> int:
        """Size in bytes of a source file (``path`` under :attr:`root`): from the listing of
        a remote source. Raises ``FileNotFoundError`` if there is no such file."""
        return self.file_signature(path)[0]

    def file_signature(self, path: Path) -> list[int]:
        """``[size in bytes, mtime in ns]`` of a source file (a remote source's listing has
        no mtime: 0). Raises ``FileNotFoundError`` if there is no such file."""
        if self.remote:
            return [self.remote.size(self._rel(path)), 0]
        stat = os.stat(path)
        return [stat.st_size, stat.st_mtime_ns]

    def parquet_metadata(self, path: Path):
        """The ``pyarrow.parquet.FileMetaData`` of a source parquet, from its footer alone
        (range reads of a remote source's file that is not cached).

        Raises:
            FileNotFoundError: there is no such file.
            OSError, pyarrow.ArrowInvalid, ValueError: the footer is unreadable.
        """
        if self.remote:
            return self.remote.parquet_metadata(self._rel(path))
        import pyarrow.parquet as pq

        return pq.read_metadata(path)

    def readable(self, path: Path):
        """What pyarrow or PyAV opens a source file from: its path, or a remote source's
        range-read file where it is not cached."""
        return self.remote.readable(self._rel(path)) if self.remote else str(path)

    def fetch(self, paths) -> None:
        """Make the source files ``paths`` (under :attr:`root`) local: a remote source fetches
        those its cache lacks (:meth:`robopipe.source_cache.RemoteSource.fetch`); a local
        one has them.

        Raises:
            DatasetError: a file is missing, or its download does not verify.
        """
        if self.remote:
            self.remote.fetch(self._rel(p) for p in paths)

    def _rel(self, path: Path) -> str:
        return Path(path).relative_to(self.root).as_posix()

    def error(self, message: str, *, episode: int | None = None, file=None) -> DatasetError:
        """A :class:`DatasetError` for this dataset, with ``file`` made relative to the root."""
        if file is not None and Path(file).is_relative_to(self.root):
            file = Path(file).relative_to(self.root)
        return DatasetError(self.name, message, episode=episode, file=file)


def declared_stream(info: dict, video_key: str) -> dict:
    """What ``info.json`` (v2.1 or v3.0: the features are the same) declares of camera
    ``video_key``'s stream: ``codec`` (FFmpeg's canonical name), ``width`` and ``height``
    (pixels), ``pix_fmt`` and ``fps`` (a Fraction), None where it says nothing. The size
    comes from ``video.width``/``video.height``, else from the shape, which may be
    channel-last ``[H, W, C]`` or channel-first ``[C, H, W]``."""
    spec = info["features"][video_key]
    video = spec.get("info") or {}
    shape = list(spec.get("shape") or [])
    channel_first = len(shape) == 3 and shape[0] in (1, 3, 4) and shape[2] not in (1, 3, 4)
    height, width = (shape[1], shape[2]) if channel_first else (shape[:2] + [None, None])[:2]
    return {
        "codec": video.get("video.codec"),
        "width": video.get("video.width", width),
        "height": video.get("video.height", height),
        "pix_fmt": video.get("video.pix_fmt"),
        "fps": Fraction(video.get("video.fps", info["fps"])),
    }


def load_source(
    root: str | Path, name: str, *, template_placeholders: bool = False, remote=None
) -> V21Source:
    """Load and check the metadata of the v2.1 dataset in folder ``root``; for a remote
    source, ``root`` is its cache folder holding the meta files and ``remote`` its
    :class:`robopipe.source_cache.RemoteSource` (:func:`robopipe.source_cache.load_v21`
    opens a remote source's manifest this way).

    Reads ``meta/info.json``, ``episodes.jsonl`` and ``tasks.jsonl``; ``episodes_stats.jsonl``
    is read on first use of :attr:`V21Source.episodes_stats`. It does not open data or video
    files (the plan and the shard jobs do; :func:`robopipe.checks.v21.check_source`
    checks everything at once). With ``template_placeholders`` the path templates may use the
    names of :data:`PLACEHOLDER_ALIASES`.

    Raises:
        DatasetError: the first problem found: the folder or a meta file is missing or
            unreadable; ``info.json`` is not v2.1 (a v3.0 dataset is named as such) or lacks a
            required field; a path template has unknown placeholders; episode indices are
            duplicated, missing or out of range; task indices are not ``0..K-1``.
    """
    root = Path(root)
    if not root.is_dir():
        raise DatasetError(name, f"source folder {root} does not exist")
    info = read_json(root, V21_INFO_PATH, name)
    problem = info_problem(info)
    if problem:
        raise DatasetError(name, problem, file=V21_INFO_PATH)
    for problem in template_problems(info, template_placeholders):
        raise DatasetError(name, problem, file=V21_INFO_PATH)
    if template_placeholders:
        info = {**info, **{k: normalise_template(info[k]) for k in ("data_path", "video_path")}}
    lines = read_episode_lines(root, V21_EPISODES_PATH, name)
    for episode, problem in episode_index_problems(lines.heads, info["total_episodes"]):
        raise DatasetError(name, problem, episode=episode, file=V21_EPISODES_PATH)
    episodes = lines.take(np.argsort([index for index, _ in lines.heads], kind="stable"))
    task_lines = sorted(read_jsonl(root, V21_TASKS_PATH, name), key=lambda t: t["task_index"])
    if [t["task_index"] for t in task_lines] != list(range(len(task_lines))):
        raise DatasetError(name, "task indices are not 0..K-1", file=V21_TASKS_PATH)
    video_keys = sorted(k for k, ft in info["features"].items() if ft["dtype"] == "video")
    if video_keys and not info["video_path"]:
        raise DatasetError(name, "video features but no video_path", file=V21_INFO_PATH)
    return V21Source(
        name=name,
        root=root,
        info=info,
        episodes=episodes,
        tasks=[t["task"] for t in task_lines],
        video_keys=video_keys,
        remote=remote,
    )


def info_problem(info: dict) -> str | None:
    """What makes ``info.json`` unconvertible (another version, missing fields), or None."""
    version = info.get("codebase_version")
    if version == "v3.0":
        return (
            "this dataset is already LeRobot v3.0, there is nothing to convert; robopipe's "
            "loaders and benchmarks read v3.0 as it is (robopipe.loading.MapDataset), and "
            "robopipe converts v2.1 sources only"
        )
    missing = [k for k in REQUIRED_INFO_FIELDS if k not in info]
    if "codebase_version" not in missing and version not in CONVERTED_VERSIONS:
        return (
            f"unknown codebase_version {version!r}: robopipe converts "
            f"{' and '.join(CONVERTED_VERSIONS)} datasets only"
        )
    if missing:
        return f"info.json lacks required field(s) {', '.join(missing)}"
    return None


def template_fields(template: str | None) -> list[str]:
    """The placeholder names of a ``str.format`` template, in order (``[]`` for None)."""
    if not template:
        return []
    return [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]


def normalise_template(template: str | None) -> str | None:
    """``template`` with the placeholders of :data:`PLACEHOLDER_ALIASES` renamed to lerobot's
    (``{chunk_index:03d}`` becomes ``{episode_chunk:03d}``; format specs are kept)."""
    if not template:
        return template
    parts = []
    for literal, placeholder, spec, conversion in string.Formatter().parse(template):
        parts.append(literal.replace("{", "{{").replace("}", "}}"))
        if placeholder is not None:
            placeholder = PLACEHOLDER_ALIASES.get(placeholder, placeholder)
            conversion = f"!{conversion}" if conversion else ""
            parts.append("{" + placeholder + conversion + (f":{spec}" if spec else "") + "}")
    return "".join(parts)


def template_problems(info: dict, template_placeholders: bool) -> list[str]:
    """One message per path template of ``info`` with placeholders lerobot does not fill.

    Names of :data:`PLACEHOLDER_ALIASES` are accepted with ``template_placeholders``;
    without it the message names that option.
    """
    problems = []
    for key, allowed in (("data_path", DATA_PLACEHOLDERS), ("video_path", VIDEO_PLACEHOLDERS)):
        unknown = [f for f in template_fields(info.get(key)) if f not in allowed]
        if template_placeholders:
            unknown = [f for f in unknown if PLACEHOLDER_ALIASES.get(f) not in allowed]
        if not unknown:
            continue
        fix = (
            "set `template_placeholders: true` to read them as "
            + ", ".join(f"{{{PLACEHOLDER_ALIASES[f]}}}" for f in unknown)
            if all(PLACEHOLDER_ALIASES.get(f) in allowed for f in unknown)
            else f"use only {', '.join('{' + a + '}' for a in allowed)}"
        )
        problems.append(
            f"{key} {info[key]!r} has unknown placeholder(s) "
            f"{', '.join('{' + f + '}' for f in unknown)}; {fix}"
        )
    return problems


def episode_index_problems(
    heads: Sequence[tuple], total_episodes: int
) -> list[tuple[int | None, str]]:
    """``(episode, message)`` for every line of ``episodes.jsonl`` that breaks ``0..N-1``.

    ``heads``: per line, ``(its "episode_index" value or None, whether it has a "length")``
    (:attr:`EpisodeLines.heads`). ``N`` is ``total_episodes`` from ``info.json``. Named as what
    they are: a line without an ``episode_index`` or ``length``, an index listed twice, out of
    range, or not listed.
    """
    problems: list[tuple[int | None, str]] = []
    fix = "v3.0 requires episodes 0..N-1, listed once each"
    counts = Counter(index for index, _ in heads)
    for number, (index, has_length) in enumerate(heads, start=1):
        if not isinstance(index, int) or not has_length:
            problems.append(
                (None, f"line {number} lacks an integer episode_index or a length; {fix}")
            )
    for index, count in sorted((i, c) for i, c in counts.items() if isinstance(i, int)):
        if count > 1:
            problems.append(
                (index, f"episode {index} is listed {count} times; remove the duplicate lines")
            )
        if not 0 <= index < total_episodes:
            problems.append(
                (
                    index,
                    f"episode {index} is out of range: info.json says total_episodes="
                    f"{total_episodes}; {fix}",
                )
            )
    for index in sorted(set(range(total_episodes)) - set(counts)):
        problems.append(
            (
                index,
                f"episode {index} is not listed (info.json says total_episodes="
                f"{total_episodes}); {fix}, leave episodes out with `skip_episodes` instead",
            )
        )
    return problems


def read_json(root: Path, rel: str, name: str) -> dict:
    """``root / rel`` parsed as JSON.

    Raises:
        DatasetError: the file is missing or not valid JSON (naming ``rel``).
    """
    path = root / rel
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DatasetError(name, "file is missing", file=rel) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DatasetError(name, f"not valid JSON: {exc}", file=rel) from None


def read_jsonl(root: Path, rel: str, name: str) -> list[dict]:
    """``root / rel`` parsed as JSON lines (blank lines skipped).

    Raises:
        DatasetError: the file is missing or a line is not valid JSON (naming the line).
    """
    path = root / rel
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DatasetError(name, "file is missing", file=rel) from None
    lines = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                lines.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise DatasetError(
                    name, f"line {number} is not valid JSON: {exc}", file=rel
                ) from None
    return lines


class EpisodeLines(Sequence[dict]):
    """``episodes.jsonl``'s lines held as the file's bytes, each parsed when asked for, not as
    one dict per episode (about 0.1 KB per episode instead of 0.8 KB).

    ``lines[i]`` is line ``i`` (blank lines not counted) as ``json.loads`` gives it: a new
    dict each time. :attr:`heads` holds what the episode-index checks need of every line.
    Build with :func:`read_episode_lines`.

    Attributes:
        heads: per line ``(its "episode_index" value or None, whether it has a "length")``.
    """

    def __init__(self, text: bytes, spans: np.ndarray, heads: list[tuple]) -> None:
        self._text = text
        self._spans = spans  # int64 (N, 2): each line's start and end in text
        self.heads = heads

    def __len__(self) -> int:
        return len(self._spans)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        start, end = self._spans[index]
        return json.loads(self._text[start:end])

    def __iter__(self) -> Iterator[dict]:
        return (self[i] for i in range(len(self)))

    def take(self, rows: Sequence[int]) -> EpisodeLines:
        """The lines at positions ``rows``, in that order."""
        rows = np.asarray(rows, np.int64)
        return EpisodeLines(self._text, self._spans[rows], [self.heads[i] for i in rows])


def read_episode_lines(root: Path, rel: str, name: str) -> EpisodeLines:
    """``root / rel`` (``episodes.jsonl``) as :class:`EpisodeLines` (blank lines skipped),
    each line parsed once to check it, without holding every line's dict.

    Raises:
        DatasetError: the file is missing, a line is not valid JSON or not an object.
    """
    try:
        text = (root / rel).read_bytes()
    except FileNotFoundError:
        raise DatasetError(name, "file is missing", file=rel) from None
    ends = np.flatnonzero(np.frombuffer(text, np.uint8) == ord("\n"))
    if not text.endswith(b"\n"):
        ends = np.append(ends, len(text))
    starts = np.concatenate([[0], ends[:-1] + 1]).astype(np.int64)
    spans, heads = [], []
    pairs = zip(starts.tolist(), ends.tolist(), strict=True)
    for number, (start, end) in enumerate(pairs, start=1):
        line = text[start:end]
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise DatasetError(name, f"line {number} is not valid JSON: {exc}", file=rel) from None
        if not isinstance(value, dict):
            raise DatasetError(name, f"line {number} is not a JSON object", file=rel)
        spans.append((start, end))
        heads.append((value.get("episode_index"), "length" in value))
    return EpisodeLines(text, np.array(spans, np.int64).reshape(-1, 2), heads)

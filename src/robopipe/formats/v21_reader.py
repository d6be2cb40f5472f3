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
from dataclasses import dataclass, field
from pathlib import Path

from robopipe.errors import DatasetError
from robopipe.layout import (
    V21_EPISODES_PATH,
    V21_EPISODES_STATS_PATH,
    V21_INFO_PATH,
    V21_TASKS_PATH,
)

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


@dataclass
class V21Source:
    """A v2.1 dataset folder, its metadata loaded and checked.

    Attributes:
        name: dataset name used in error messages.
        root: the folder holding ``meta/``, ``data/`` and ``videos/``.
        info: ``meta/info.json`` as a dict.
        episodes: ``meta/episodes.jsonl`` lines, sorted by ``episode_index``.
        tasks: task strings by ``task_index``.
        video_keys: the cameras (features of dtype ``video``), sorted as lerobot sorts them.
    """

    name: str
    root: Path
    info: dict
    episodes: list[dict]
    tasks: list[str]
    video_keys: list[str] = field(default_factory=list)

    @functools.cached_property
    def episodes_stats(self) -> dict[int, dict]:
        """``meta/episodes_stats.jsonl``: each episode's ``stats`` dict, by episode index.

        Read on first use (only the plan and meta jobs need it; it is the largest meta file).

        Raises:
            DatasetError: the file is missing or unreadable, or an episode has no stats.
        """
        lines = _read_jsonl(self.root, V21_EPISODES_STATS_PATH, self.name)
        stats = {line["episode_index"]: line["stats"] for line in lines}
        absent = sorted(set(range(len(self.episodes))) - set(stats))
        if absent:
            raise self.error(
                "no stats for this episode", episode=absent[0], file=V21_EPISODES_STATS_PATH
            )
        return stats

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

    def error(self, message: str, *, episode: int | None = None, file=None) -> DatasetError:
        """A :class:`DatasetError` for this dataset, with ``file`` made relative to the root."""
        if file is not None and Path(file).is_relative_to(self.root):
            file = Path(file).relative_to(self.root)
        return DatasetError(self.name, message, episode=episode, file=file)


def load_source(root: str | Path, name: str) -> V21Source:
    """Load and check the metadata of the v2.1 dataset in ``root``.

    Reads ``meta/info.json``, ``episodes.jsonl`` and ``tasks.jsonl``; ``episodes_stats.jsonl``
    is read on first use of :attr:`V21Source.episodes_stats`. It does not open data or video
    files (the plan and the shard jobs do).

    Raises:
        DatasetError: the folder or a meta file is missing or unreadable; ``info.json`` lacks a
            required field or has another ``codebase_version`` than ``v2.1``; episode indices
            are not contiguous from 0; the episode count disagrees with ``total_episodes``;
            task indices are not ``0..K-1``.
    """
    root = Path(root)
    if not root.is_dir():
        raise DatasetError(name, f"source folder {root} does not exist")
    info = _read_json(root, V21_INFO_PATH, name)
    missing = [k for k in REQUIRED_INFO_FIELDS if k not in info]
    if missing:
        raise DatasetError(
            name, f"info.json lacks required field(s) {', '.join(missing)}", file=V21_INFO_PATH
        )
    version = info["codebase_version"]
    if version != "v2.1":
        raise DatasetError(
            name,
            f"unknown codebase_version {version!r}: robopipe converts v2.1 datasets only",
            file=V21_INFO_PATH,
        )
    episodes = sorted(_read_jsonl(root, V21_EPISODES_PATH, name), key=lambda e: e["episode_index"])
    for position, episode in enumerate(episodes):
        if episode["episode_index"] != position:
            raise DatasetError(
                name,
                f"episode indices are not contiguous: episode {position} is not listed (the "
                f"next is {episode['episode_index']}); v3.0 requires episodes 0..N-1, leave "
                "episodes out with `skip_episodes` instead",
                episode=position,
                file=V21_EPISODES_PATH,
            )
    if len(episodes) != info["total_episodes"]:
        raise DatasetError(
            name,
            f"{len(episodes)} episodes listed but info.json says total_episodes="
            f"{info['total_episodes']}",
            file=V21_EPISODES_PATH,
        )
    task_lines = sorted(_read_jsonl(root, V21_TASKS_PATH, name), key=lambda t: t["task_index"])
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
    )


def _read_json(root: Path, rel: str, name: str) -> dict:
    path = root / rel
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DatasetError(name, "file is missing", file=rel) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DatasetError(name, f"not valid JSON: {exc}", file=rel) from None


def _read_jsonl(root: Path, rel: str, name: str) -> list[dict]:
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

"""lerobot 0.6.1's ``LeRobotDatasetMetadata``, read-only (:mod:`robopipe.loading.lerobot_dataset`).

Its attributes are what ``lerobot-train`` and the policies read (``lerobot/scripts/
lerobot_train.py``, ``datasets/factory.py``, ``policies/factory.py``, ``policies/
pretrained.py``): ``stats``, ``episodes``, ``tasks``, ``info``, ``features``, ``fps``,
``camera_keys``, ``video_keys``, ``image_keys``, ``depth_keys``, ``has_language_columns``,
``total_frames``, ``total_episodes``, ``total_tasks``, ``robot_type``, ``repo_id``, ``root``,
``revision``, with lerobot's types and values (``datasets/dataset_metadata.py``,
``datasets/io_utils.py``). Where a dataset is read from: :func:`dataset_url`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pyarrow as pa

from robopipe.formats.v30_reader import DatasetMeta, read_episodes_table, read_meta
from robopipe.layout import INFO_PATH, STATS_PATH

CODEBASE_VERSION = "v3.0"  # lerobot 0.6.1's default revision: the dataset's version tag
LANGUAGE_COLUMNS = ("language_persistent", "language_events")  # datasets/language.py


def lerobot_home() -> Path:
    """``$HF_LEROBOT_HOME``, else huggingface_hub's ``HF_HOME`` + ``/lerobot``
    (``~/.cache/huggingface/lerobot``): where lerobot 0.6.1 looks for a local copy of
    ``repo_id`` (``utils/constants.py``)."""
    if "HF_LEROBOT_HOME" in os.environ:
        return Path(os.environ["HF_LEROBOT_HOME"]).expanduser()
    from huggingface_hub.constants import HF_HOME  # only here: a Hub import costs 0.1 s

    return Path(HF_HOME).expanduser() / "lerobot"


def dataset_url(
    repo_id: str, root: str | Path | None, revision: str | None, repo_type: str = "dataset"
) -> str:
    """Where the dataset is read from, in lerobot 0.6.1's order of lookup, never downloading:

    - ``root`` given: that folder, or that fsspec URL (``s3://``, ``https://``, ``hf://``);
    - else ``$HF_LEROBOT_HOME/<repo_id>`` when it holds ``meta/info.json``;
    - else the Hub repo in place, ``hf://datasets/<repo_id>@<revision>`` (``HF_ENDPOINT``
      names the Hub or a stand-in), revision default ``v3.0``; ``repo_type="bucket"``:
      ``hf://buckets/<repo_id>``.

    Raises:
        ValueError: ``repo_type`` is neither ``dataset`` nor ``bucket``.
    """
    if repo_type not in ("dataset", "bucket"):
        raise ValueError(f"repo_type must be 'dataset' or 'bucket', got {repo_type!r}")
    if root is not None:
        return str(root)
    local = lerobot_home() / repo_id
    if (local / INFO_PATH).exists():
        return str(local)
    if repo_type == "bucket":
        return f"hf://buckets/{repo_id}"
    return f"hf://datasets/{repo_id}@{quote(revision or CODEBASE_VERSION, safe='')}"


class InfoDict(dict):
    """``meta/info.json`` as lerobot 0.6.1's ``DatasetInfo`` gives it: item and attribute
    access (``info["fps"]``, ``info.fps``), feature shapes as tuples."""

    def __getattr__(self, name: str):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class EpisodeTable:
    """``meta/episodes`` without its ``stats/*`` columns, indexed as lerobot's HF ``Dataset``
    (``io_utils.load_episodes``): ``table["dataset_from_index"]`` is a column (a list of
    Python values), ``table[i]`` the row of episode ``i`` (a dict), ``len(table)`` the number
    of episodes.

    Args:
        table: the episodes table (``robopipe.formats.v30_reader.read_episodes_table``).
    """

    def __init__(self, table: pa.Table) -> None:
        keep = [name for name in table.column_names if not name.startswith("stats/")]
        self.table = table.select(keep)
        self._columns: dict[str, list] = {}

    @property
    def column_names(self) -> list[str]:
        return self.table.column_names

    def __len__(self) -> int:
        return self.table.num_rows

    def __getitem__(self, key: str | int):
        if isinstance(key, str):
            if key not in self._columns:
                self._columns[key] = self.table.column(key).to_pylist()
            return self._columns[key]
        return self.table.slice(int(key), 1).to_pylist()[0]

    def to_pandas(self):
        """The table as a pandas ``DataFrame`` (lerobot's SARM processor reads it so)."""
        return self.table.to_pandas()


class LeRobotDatasetMetadata:
    """lerobot 0.6.1's ``LeRobotDatasetMetadata`` for reading (see the module docstring).

    Args:
        repo_id: the dataset's Hub id (also names the local copy and the Hub repo).
        root: a local folder or any fsspec URL of a v3.0 dataset; None: see
            :func:`dataset_url`.
        revision: the Hub revision read when the Hub is (default ``v3.0``, as lerobot).
        force_cache_sync, metadata_buffer_size: accepted, without effect (nothing is cached
            or written).
        repo_type: ``"dataset"`` or ``"bucket"``.
        token: the Hub token (``hf://`` URLs only; default: huggingface_hub's).
        storage_options: fsspec options of ``root`` (robopipe's; not lerobot's).

    Attributes:
        stats: ``meta/stats.json`` as ``{feature: {stat: np.ndarray}}``, every value
            ``np.atleast_1d(np.array(value))`` (float64, ``count`` int64), as lerobot's
            ``load_stats``; None without the file. Mutable (``lerobot-train`` puts ImageNet's
            statistics in it).
        episodes: :class:`EpisodeTable`.
        info: :class:`InfoDict` of ``meta/info.json``.

    Raises:
        robopipe.errors.DatasetError: not a v3.0 dataset, or missing metadata files.
        NotImplementedError: depth features or language columns (not read by robopipe).
    """

    def __init__(
        self,
        repo_id: str,
        root: str | Path | None = None,
        revision: str | None = None,
        force_cache_sync: bool = False,
        metadata_buffer_size: int = 10,
        *,
        repo_type: str = "dataset",
        token: str | bool | None = None,
        storage_options: dict | None = None,
    ) -> None:
        self.repo_id = repo_id
        self.repo_type = repo_type
        self.revision = revision or CODEBASE_VERSION
        url = dataset_url(repo_id, root, revision, repo_type)
        options = dict(storage_options or {})
        if token is not None and url.startswith("hf://"):
            options.setdefault("token", token)
        self.reader_meta: DatasetMeta = read_meta(
            url, name=repo_id, storage_options=options or None
        )
        self.root = Path(url) if "://" not in url else url
        info = json.loads(json.dumps(self.reader_meta.info))  # a deep copy
        for feature in info["features"].values():
            if isinstance(feature.get("shape"), list):
                feature["shape"] = tuple(feature["shape"])
        self.info = InfoDict(info)
        unsupported = [*self.depth_keys, *(c for c in LANGUAGE_COLUMNS if c in self.features)]
        if unsupported:
            raise NotImplementedError(
                f"dataset {repo_id!r}: robopipe's LeRobotDataset does not read depth maps or "
                f"language columns ({unsupported}); use lerobot's"
            )
        self.episodes = EpisodeTable(read_episodes_table(self.reader_meta))
        self.stats = _read_stats(self.reader_meta)
        self._tasks = None

    @property
    def tasks(self):
        """Tasks as lerobot's ``load_tasks`` gives them: a pandas ``DataFrame`` indexed by the
        task string (index name ``task``) with a ``task_index`` column."""
        if self._tasks is None:
            import pandas as pd  # only here: loading needs no pandas otherwise

            tasks = self.reader_meta.tasks
            self._tasks = pd.DataFrame(
                {"task_index": np.arange(len(tasks), dtype=np.int64)},
                index=pd.Index(tasks, name="task"),
            )
        return self._tasks

    @property
    def url_root(self) -> str:
        return self.reader_meta.url

    @property
    def features(self) -> dict[str, dict]:
        return self.info["features"]

    @property
    def fps(self) -> int:
        return self.info["fps"]

    @property
    def robot_type(self) -> str | None:
        return self.info.get("robot_type")

    @property
    def data_path(self) -> str:
        return self.info["data_path"]

    @property
    def video_path(self) -> str | None:
        return self.info.get("video_path")

    @property
    def image_keys(self) -> list[str]:
        return [key for key, ft in self.features.items() if ft["dtype"] == "image"]

    @property
    def video_keys(self) -> list[str]:
        return [key for key, ft in self.features.items() if ft["dtype"] == "video"]

    @property
    def camera_keys(self) -> list[str]:
        """Video and image features, in info.json order (lerobot's order)."""
        return [key for key, ft in self.features.items() if ft["dtype"] in ("video", "image")]

    @property
    def depth_keys(self) -> list[str]:
        """Features whose ``info`` (or ``video_info``) says ``is_depth_map``."""

        def is_depth(ft: dict) -> bool:
            info, video_info = ft.get("info") or {}, ft.get("video_info") or {}
            return bool(
                info.get("is_depth_map")
                or info.get("video.is_depth_map")
                or video_info.get("video.is_depth_map")
            )

        return [key for key, ft in self.features.items() if is_depth(ft)]

    @property
    def has_language_columns(self) -> bool:
        return any(column in self.features for column in LANGUAGE_COLUMNS)

    @property
    def names(self) -> dict:
        return {key: ft["names"] for key, ft in self.features.items()}

    @property
    def shapes(self) -> dict:
        return {key: tuple(ft["shape"]) for key, ft in self.features.items()}

    @property
    def total_episodes(self) -> int:
        return self.info["total_episodes"]

    @property
    def total_frames(self) -> int:
        return self.info["total_frames"]

    @property
    def total_tasks(self) -> int:
        return self.info["total_tasks"]

    @property
    def chunks_size(self) -> int:
        return self.info["chunks_size"]

    def get_data_file_path(self, ep_index: int) -> Path:
        """Relative path of the data file of episode ``ep_index``."""
        return Path(self.reader_meta.data_file(ep_index))

    def get_video_file_path(self, ep_index: int, vid_key: str) -> Path:
        """Relative path of the video file of ``vid_key`` for episode ``ep_index``."""
        return Path(self.reader_meta.video_file(vid_key, ep_index))

    def get_task_index(self, task: str) -> int | None:
        """The index of ``task``, or None."""
        tasks = self.reader_meta.tasks
        return tasks.index(task) if task in tasks else None

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}({{\n"
            f"    Repository ID: '{self.repo_id}',\n"
            f"    Total episodes: '{self.total_episodes}',\n"
            f"    Total frames: '{self.total_frames}',\n"
            f"    Features: '{list(self.features)}',\n"
            "})"
        )


def _read_stats(meta: DatasetMeta) -> dict[str, dict[str, np.ndarray]] | None:
    """``meta/stats.json`` as lerobot 0.6.1's ``load_stats`` (``io_utils.py``) returns it."""
    try:
        stats = json.loads(meta.fs.cat_file(meta.path(STATS_PATH)))
    except FileNotFoundError:
        return None
    return {
        key: {stat: np.atleast_1d(np.array(value)) for stat, value in values.items()}
        for key, values in stats.items()
    }

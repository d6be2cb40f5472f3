"""A read-only drop-in for lerobot 0.6.1's ``LeRobotDataset``, on robopipe's ``MapDataset``.

Same constructor arguments for reading, attributes and items (source: lerobot 0.6.1
``datasets/lerobot_dataset.py``, ``datasets/dataset_reader.py``), so training code switches
with one import::

    from robopipe.loading import LeRobotDataset  # instead of lerobot.datasets.lerobot_dataset

An item is lerobot's: every camera first (``(C, H, W)``, or ``(T, C, H, W)`` with
``delta_timestamps``; video frames uint8 with ``return_uint8=True``, else float32 in [0, 1];
frames stored in the parquet files (``image`` features) float32 in [0, 1] always, as
lerobot's ``hf_transform_to_torch`` gives them), then every other feature in info.json order
(features of shape [1] as 0-d tensors, windows ``(T, ...)``), then ``<key>_is_pad`` (T,) bool
per ``delta_timestamps`` key, then ``task`` (the string). ``image_transforms`` is applied to
each camera's frames after decoding.

How it differs (docs/loading.md lists it too):

- nothing is downloaded: a local folder or any fsspec URL is read in place, a Hub repo with
  range reads (:func:`robopipe.loading.lerobot_meta.dataset_url`); a ``root`` without the
  dataset is an error, where lerobot downloads into it;
- frames are decoded with torchcodec whatever ``video_backend`` says;
- ``episodes`` outside the dataset raise ``ValueError`` (lerobot warns, then fails later);
- ``hf_dataset`` is not an HF ``datasets.Dataset``: it has ``.data`` (a pyarrow ``Table``
  of the selected frames' data columns), ``column_names`` and ``len()``, what
  ``lerobot-train`` reads;
- writing (``create``, ``add_frame``, ``save_episode``, ``push_to_hub``), depth maps and
  language columns are not supported: their arguments raise ``NotImplementedError``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import torch.utils.data

from robopipe.layout import DEFAULT_TOLERANCE_S
from robopipe.loading.lerobot_meta import LeRobotDatasetMetadata
from robopipe.loading.map_dataset import MapDataset
from robopipe.loading.selection import selected_episodes

# the writer's constructor arguments and their defaults (lerobot 0.6.1): any other value is
# refused, this class being read-only
WRITE_DEFAULTS = {
    "batch_encoding_size": 1,
    "rgb_encoder": None,
    "depth_encoder": None,
    "encoder_threads": None,
    "streaming_encoding": False,
    "encoder_queue_maxsize": 30,
}


class LeRobotDataset(torch.utils.data.Dataset):
    """lerobot 0.6.1's ``LeRobotDataset`` for reading (see the module docstring).

    Args:
        repo_id: the dataset's Hub id.
        root: a local folder or any fsspec URL of the v3.0 dataset; None:
            ``$HF_LEROBOT_HOME/<repo_id>`` if it is there, else the Hub repo in place.
        episodes: the episodes read (item ``i`` is the ``i``-th of their frames, in index
            order); None: every episode.
        episode_filter: a predicate over episode rows (``meta.episodes[i]``), intersected
            with ``episodes``.
        image_transforms: a callable applied to each camera's frames (``(C, H, W)`` or
            ``(T, C, H, W)``) in ``__getitem__``.
        delta_timestamps: key -> offsets in seconds (multiples of ``1/fps`` within
            ``tolerance_s``).
        tolerance_s: largest gap, in seconds, between a decoded frame and its timestamp, and
            between a delta and a multiple of ``1/fps``.
        revision: the Hub revision read (default ``v3.0``, lerobot's tag).
        force_cache_sync: accepted, without effect (nothing is cached).
        download_videos: must be True (videos are read in place).
        video_backend: accepted, without effect (torchcodec decodes).
        return_uint8: video frames as uint8 instead of float32 in [0, 1].
        depth_output_unit: accepted (depth maps are not supported).
        batch_encoding_size, rgb_encoder, depth_encoder, encoder_threads, streaming_encoding,
            encoder_queue_maxsize: the writer's; only their defaults are accepted.
        token: the Hub token (``hf://`` only).
        storage_options: fsspec options of ``root`` (robopipe's; not lerobot's).

    Raises:
        NotImplementedError: a writer argument other than its default, ``download_videos``
            False, depth maps or language columns in the dataset.
        ValueError: an episode outside the dataset, an ``episode_filter`` that matches none,
            bad ``delta_timestamps``.
        TypeError: ``image_transforms`` not callable.
        robopipe.errors.DatasetError: not a v3.0 dataset, missing or inconsistent files.
    """

    def __init__(
        self,
        repo_id: str,
        root: str | Path | None = None,
        episodes: list[int] | None = None,
        episode_filter: Callable[[dict], bool] | None = None,
        image_transforms: Callable | None = None,
        delta_timestamps: dict[str, list[float]] | None = None,
        tolerance_s: float = DEFAULT_TOLERANCE_S,
        revision: str | None = None,
        force_cache_sync: bool = False,
        download_videos: bool = True,
        video_backend: str | None = None,
        return_uint8: bool = False,
        depth_output_unit: str = "mm",
        batch_encoding_size: int = 1,
        rgb_encoder=None,
        depth_encoder=None,
        encoder_threads: int | None = None,
        streaming_encoding: bool = False,
        encoder_queue_maxsize: int = 30,
        *,
        token: str | bool | None = None,
        storage_options: dict | None = None,
    ) -> None:
        given = dict(
            batch_encoding_size=batch_encoding_size,
            rgb_encoder=rgb_encoder,
            depth_encoder=depth_encoder,
            encoder_threads=encoder_threads,
            streaming_encoding=streaming_encoding,
            encoder_queue_maxsize=encoder_queue_maxsize,
        )
        for name, default in WRITE_DEFAULTS.items():
            if given[name] != default:
                raise NotImplementedError(
                    f"{name}={given[name]!r}: robopipe's LeRobotDataset is read-only "
                    "(record with lerobot's LeRobotDataset.create)"
                )
        if not download_videos:
            raise NotImplementedError(
                "download_videos=False: robopipe reads videos in place and downloads nothing"
            )
        if image_transforms is not None and not callable(image_transforms):
            raise TypeError("image_transforms must be callable or None.")
        self.repo_id = repo_id
        self.meta = LeRobotDatasetMetadata(
            repo_id, root, revision, token=token, storage_options=storage_options
        )
        self.root = self.meta.root
        self.revision = self.meta.revision
        self.delta_timestamps = delta_timestamps
        self.tolerance_s = tolerance_s
        self.image_transforms = image_transforms
        self.video_backend = video_backend
        self.depth_output_unit = depth_output_unit
        if episode_filter is not None:
            episodes = self._filter(episode_filter, episodes)
        self.episodes = episodes
        reader_meta = self.meta.reader_meta
        self._items = MapDataset(
            reader_meta.url,
            name=repo_id,
            storage_options=reader_meta.storage_options,
            episodes=episodes,
            delta_timestamps=delta_timestamps,
            image_dtype="uint8" if return_uint8 else "float32",
            tolerance_s=tolerance_s,
        )
        self._return_uint8 = return_uint8
        features = self.meta.features
        self._key_order = [
            *self.meta.video_keys,
            *(key for key, ft in features.items() if ft["dtype"] != "video"),
            *(f"{key}_is_pad" for key in delta_timestamps or {}),
            "task",
        ]
        self._hf_dataset = None

    def _filter(self, predicate: Callable[[dict], bool], episodes) -> list[int]:
        candidates = range(self.meta.total_episodes) if episodes is None else episodes
        chosen = sorted({int(e) for e in candidates if predicate(self.meta.episodes[int(e)])})
        if not chosen:
            raise ValueError(
                "The episode filter did not match any episode. Make sure the filter and "
                "episodes list are valid and compatible."
            )
        return chosen

    @property
    def fps(self) -> int:
        return self.meta.fps

    @property
    def features(self) -> dict[str, dict]:
        return self.meta.features

    @property
    def num_frames(self) -> int:
        """Frames of the selected episodes (``meta.total_frames`` for every episode)."""
        return self.meta.total_frames if self.episodes is None else len(self._items)

    @property
    def num_episodes(self) -> int:
        """``len(episodes)``, or ``meta.total_episodes``."""
        return self.meta.total_episodes if self.episodes is None else len(self.episodes)

    @property
    def absolute_to_relative_idx(self) -> dict[int, int] | None:
        """Global frame ``index`` -> item position, for an ``episodes`` selection (None
        without one); ``lerobot-train``'s ``EpisodeAwareSampler`` maps its indices with it."""
        if self.episodes is None:
            return None
        return {int(index): i for i, index in enumerate(self._items.frames)}

    @property
    def hf_dataset(self) -> HfDatasetView:
        """The selected frames' data columns (see :class:`HfDatasetView`)."""
        if self._hf_dataset is None:
            self._hf_dataset = HfDatasetView(self._selected_columns())
        return self._hf_dataset

    def _selected_columns(self) -> dict[str, np.ndarray]:
        items, meta = self._items, self.meta.reader_meta
        rows = []
        for e in selected_episodes(meta, self.episodes):
            first = int(items._first_row[e])
            rows.append(np.arange(first, first + int(meta.episodes["length"][e])))
        picked = np.concatenate(rows)
        return {key: column[picked] for key, column in items.columns.items()}

    def set_image_transforms(self, image_transforms: Callable | None) -> None:
        """Replace the transform applied to the cameras' frames."""
        if image_transforms is not None and not callable(image_transforms):
            raise TypeError("image_transforms must be callable or None.")
        self.image_transforms = image_transforms

    def clear_image_transforms(self) -> None:
        """Remove the transform applied to the cameras' frames."""
        self.image_transforms = None

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, idx: int | slice) -> dict | list[dict]:
        if isinstance(idx, slice):
            return [self[i] for i in range(*idx.indices(len(self)))]
        return self._lerobot_item(self._items[int(idx)])

    def __getitems__(self, indices: Sequence[int]) -> list[dict]:
        """The items at ``indices`` (a DataLoader's batch), the GOPs of a remote dataset's
        videos fetched at once (``MapDataset.__getitems__``)."""
        return [self._lerobot_item(item) for item in self._items.__getitems__(list(indices))]

    def _lerobot_item(self, item: dict) -> dict:
        for key in self.meta.image_keys:  # lerobot gives stored frames as float32 always
            if self._return_uint8:
                item[key] = item[key].float() / 255
        if self.image_transforms is not None:
            for cam in self.meta.camera_keys:
                item[cam] = self.image_transforms(item[cam])
        return {key: item[key] for key in self._key_order if key in item}

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}({{\n"
            f"    Repository ID: '{self.repo_id}',\n"
            f"    Number of selected episodes: '{self.num_episodes}',\n"
            f"    Number of selected samples: '{self.num_frames}',\n"
            f"    Features: '{list(self.features)}',\n"
            "})"
        )


class HfDatasetView:
    """What ``lerobot-train`` reads of ``LeRobotDataset.hf_dataset``: ``.data``, a pyarrow
    ``Table`` of the selected frames' data columns (no frames; a feature of shape (d,) as a
    fixed-size list of d values, of shape [1] as a scalar column), ``column_names`` and
    ``len()``.

    Args:
        columns: column name -> (rows, ...) numpy array.
    """

    def __init__(self, columns: dict[str, np.ndarray]) -> None:
        arrays = {}
        for key, values in columns.items():
            if values.ndim == 1:
                arrays[key] = pa.array(values)
            else:
                flat = values.reshape(len(values), -1)
                arrays[key] = pa.FixedSizeListArray.from_arrays(
                    pa.array(flat.reshape(-1)), flat.shape[1]
                )
        self.data = pa.table(arrays)

    @property
    def column_names(self) -> list[str]:
        return self.data.column_names

    def __len__(self) -> int:
        return self.data.num_rows

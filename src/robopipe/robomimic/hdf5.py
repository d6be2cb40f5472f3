"""Read a robomimic HDF5 file as LeRobot features: the converter's and the loader's shared view.

robomimic's dataset layout (robomimic ``docs/datasets/overview.md``; ``utils/file_utils.py``)::

    data                  attrs: env_args (JSON: env_name, env_kwargs, ...), total
    data/demo_N           attrs: num_samples
    data/demo_N/obs/<key> (T, ...) per observation key
    data/demo_N/actions   (T, A)
    data/demo_N/rewards   (T,)
    data/demo_N/dones     (T,)
    mask/<filter>         demo names (bytes), e.g. mask/train, mask/valid

How it becomes LeRobot features (:meth:`RobomimicFile.features`):

- observation keys of dtype uint8 and per-step shape (H, W, 3) are cameras, each a video
  feature ``observation.images.<key>``;
- every other observation key is low-dimensional (per-step shape () or (D,)): concatenated in
  key order into ``observation.state`` float32 (``state="concat"``), or one float32 feature
  ``observation.<key>`` per key (``state="per_key"``);
- ``actions`` -> ``action`` float32, ``rewards`` -> ``next.reward`` float32 (shape [1]),
  ``dones`` -> ``next.done`` bool (shape [1]), as lerobot names them (e.g. lerobot/pusht).

Numbers are cast to float32 (LeRobot's dtype for states and actions; robosuite stores many
observations as float64). Demos are ordered by their number (demo_0, demo_1, ..., demo_10);
episode ``i`` is the ``i``-th demo.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

from robopipe.errors import DatasetError

STATE_MODES = ("concat", "per_key")
STATE_KEY = "observation.state"
ACTION_KEY = "action"
REWARD_KEY = "next.reward"
DONE_KEY = "next.done"
IMAGE_PREFIX = "observation.images."
DEFAULT_FPS = 20  # robosuite's default control_freq (Hz), the rate robomimic demos are logged at
MASKS_COLUMN = "robomimic/masks"  # episodes.jsonl key: the mask/<filter> lists holding the demo
_DEMO_NAME = re.compile(r"^demo_(\d+)$")


@dataclass(frozen=True)
class Source:
    """Where one LeRobot feature comes from in a demo group.

    Attributes:
        feature: the LeRobot feature name.
        paths: HDF5 paths relative to ``data/demo_N`` whose values are concatenated (one for
            every feature but a concatenated ``observation.state``).
        dtype: the feature's numpy dtype name (``float32``, ``bool``, ``uint8`` for cameras).
    """

    feature: str
    paths: tuple[str, ...]
    dtype: str

    def read(self, group: h5py.Group, rows: slice | np.ndarray = slice(None)) -> np.ndarray:
        """The feature's values at ``rows`` of the demo ``group``.

        Returns (T, D) float32 for vectors, (T,) for shape-[1] features (float32 rewards,
        bool dones: ``dones != 0``), (T, H, W, 3) uint8 for cameras. ``rows`` is a slice or
        increasing row indices (h5py's fancy-indexing rule).
        """
        parts = [group[path][rows] for path in self.paths]
        if self.dtype == "bool":
            return parts[0] != 0
        if self.dtype == "uint8":
            return parts[0]
        if self.feature == REWARD_KEY:
            return parts[0].astype(np.float32)
        return np.concatenate([p.reshape(len(p), -1).astype(np.float32) for p in parts], axis=1)


class RobomimicFile:
    """A robomimic HDF5 file's demos, observation keys, masks and task, checked.

    Args:
        path: the ``.hdf5`` file.
        name: dataset name used in error messages (default: the file name).
        state: ``"concat"`` or ``"per_key"`` (see the module docstring).
        task: the task of every episode; default ``env_args["env_name"]``.
        fps: frames per second; default ``env_args["env_kwargs"]["control_freq"]``, else 20.

    Attributes:
        demos: demo names in numeric order; episode ``i`` is ``demos[i]``.
        lengths: int64 (num demos,) frames per demo (the length of ``actions``).
        image_keys, low_dim_keys: observation keys of each kind, sorted.
        masks: demo name -> sorted filter names of the ``mask/<filter>`` lists holding it
            (empty when the file has no masks).
        sources: the LeRobot features in order, see :class:`Source`.
        step_shapes: HDF5 path in a demo (``actions``, ``obs/<key>``, ...) -> per-step shape.

    Raises:
        DatasetError: unreadable file, no ``data`` group or demos, a demo name not
            ``demo_<N>``, demos without ``actions``/``rewards``/``dones``/``obs`` or whose keys,
            shapes or lengths disagree with the first demo's, an observation neither 1-D nor a
            uint8 (H, W, 3) image, no task, or an unknown ``state`` mode.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        name: str | None = None,
        state: str = "concat",
        task: str | None = None,
        fps: int | None = None,
    ) -> None:
        self.path = Path(path)
        self.name = name or self.path.name
        if state not in STATE_MODES:
            raise DatasetError(self.name, f"state must be one of {STATE_MODES}, not {state!r}")
        self.state = state
        try:
            h5 = h5py.File(self.path, "r")
        except OSError as exc:
            raise DatasetError(self.name, f"cannot open HDF5 file: {exc}", file=path) from None
        with h5:
            self._read(h5, task, fps)

    def error(self, message: str, *, episode: int | None = None) -> DatasetError:
        """A :class:`DatasetError` naming this dataset, the episode and the HDF5 file."""
        return DatasetError(self.name, message, episode=episode, file=self.path)

    def _read(self, h5: h5py.File, task: str | None, fps: int | None) -> None:
        if "data" not in h5 or not len(h5["data"]):
            raise self.error("no data/demo_N groups")
        data = h5["data"]
        numbers = {}
        for demo in data:
            match = _DEMO_NAME.match(demo)
            if not match:
                raise self.error(f"data/{demo}: demo groups must be named demo_<N>")
            numbers[demo] = int(match.group(1))
        self.demos = sorted(numbers, key=numbers.get)
        self.env_args = json.loads(data.attrs.get("env_args", "{}"))
        self.task = task or self.env_args.get("env_name")
        if not self.task:
            raise self.error("no env_args env_name in the file: give the task in the config")
        env_kwargs = self.env_args.get("env_kwargs", {})
        self.fps = int(fps or env_kwargs.get("control_freq") or DEFAULT_FPS)
        robots = env_kwargs.get("robots")
        self.robot_type = (robots[0] if isinstance(robots, list) else robots) or None
        first = data[self.demos[0]]
        self._require(first, 0)
        # per-step shape of every dataset of a demo, taken from the first demo
        self.step_shapes = {p: first[p].shape[1:] for p in ("actions", "rewards", "dones")}
        self.image_keys, self.low_dim_keys = [], []
        for key in sorted(first["obs"]):
            dataset = first["obs"][key]
            step = self.step_shapes[f"obs/{key}"] = dataset.shape[1:]
            if dataset.dtype == np.uint8 and len(step) == 3 and step[2] == 3:
                self.image_keys.append(key)
            elif len(step) <= 1:
                self.low_dim_keys.append(key)
            else:
                raise self.error(
                    f"obs/{key} has per-step shape {step} ({dataset.dtype}): only 1-D "
                    "observations and uint8 (H, W, 3) images are supported",
                    episode=0,
                )
        self.sources = self._sources()
        self.lengths = np.array([self._check_demo(data[d], i) for i, d in enumerate(self.demos)])
        self.masks = {demo: [] for demo in self.demos}
        for filter_name in sorted(h5.get("mask", {})):
            for demo in h5["mask"][filter_name][()]:
                demo = demo.decode() if isinstance(demo, bytes) else str(demo)
                if demo not in self.masks:
                    raise self.error(f"mask/{filter_name} lists {demo!r}, which is not a demo")
                self.masks[demo].append(filter_name)
        self.has_masks = "mask" in h5

    def _sources(self) -> list[Source]:
        obs = [f"obs/{key}" for key in self.low_dim_keys]
        if self.state == "concat":
            low_dim = [Source(STATE_KEY, tuple(obs), "float32")] if obs else []
        else:
            low_dim = [Source(f"observation.{p[4:]}", (p,), "float32") for p in obs]
        return [
            *low_dim,
            Source(ACTION_KEY, ("actions",), "float32"),
            Source(REWARD_KEY, ("rewards",), "float32"),
            Source(DONE_KEY, ("dones",), "bool"),
            *(Source(IMAGE_PREFIX + key, (f"obs/{key}",), "uint8") for key in self.image_keys),
        ]

    def _require(self, group: h5py.Group, episode: int) -> None:
        missing = [k for k in ("actions", "rewards", "dones", "obs") if k not in group]
        if missing:
            raise self.error(f"{group.name} lacks {missing}", episode=episode)

    def _check_demo(self, group: h5py.Group, episode: int) -> int:
        """Check a demo against the first one; return its number of steps."""
        self._require(group, episode)
        paths = sorted(["actions", "rewards", "dones", *(f"obs/{k}" for k in group["obs"])])
        if paths != sorted(self.step_shapes):
            raise self.error(
                f"{group.name} has datasets {paths}, {self.demos[0]} has "
                f"{sorted(self.step_shapes)}",
                episode=episode,
            )
        length = len(group["actions"])
        if length == 0:
            raise self.error(f"{group.name} has no steps", episode=episode)
        for path in paths:
            shape = group[path].shape
            if shape[0] != length or shape[1:] != self.step_shapes[path]:
                raise self.error(
                    f"{group.name}/{path} has shape {shape}, expected ({length}, "
                    f"*{self.step_shapes[path]}) like actions and {self.demos[0]}",
                    episode=episode,
                )
        return length

    def shape(self, source: Source) -> list[int]:
        """A feature's per-step LeRobot shape: ``[H, W, 3]``, ``[1]``, or ``[D]``."""
        if source.dtype == "uint8":
            return list(self.step_shapes[source.paths[0]])
        if source.feature in (REWARD_KEY, DONE_KEY):
            return [1]
        return [sum(self._width(p) for p in source.paths)]

    def _width(self, path: str) -> int:
        return int(np.prod(self.step_shapes[path]))

    def features(self) -> dict[str, dict]:
        """The LeRobot features (``V21Writer`` format): ``name -> {dtype, shape, names}``."""
        features = {}
        for source in self.sources:
            if source.dtype == "uint8":
                features[source.feature] = {"dtype": "video", "shape": self.shape(source)}
            else:
                features[source.feature] = {
                    "dtype": source.dtype,
                    "shape": self.shape(source),
                    "names": self._names(source),
                }
        return features

    def _names(self, source: Source) -> list[str] | None:
        if source.feature in (REWARD_KEY, DONE_KEY):
            return None
        names = []
        for path in source.paths:
            key, width = path.removeprefix("obs/"), self._width(path)
            names += [key] if width == 1 else [f"{key}_{i}" for i in range(width)]
        return names

    @property
    def video_keys(self) -> list[str]:
        """The camera features, ``observation.images.<key>``, in key order."""
        return [s.feature for s in self.sources if s.dtype == "uint8"]

    def episode_masks(self, episode: int) -> dict:
        """The extra ``episodes.jsonl`` keys of an episode: ``{"robomimic/masks": [...]}``
        (the ``mask/<filter>`` names listing its demo), or ``{}`` when the file has no masks."""
        return {MASKS_COLUMN: self.masks[self.demos[episode]]} if self.has_masks else {}

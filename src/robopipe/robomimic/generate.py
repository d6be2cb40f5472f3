"""A small synthetic robomimic HDF5 file with image observations, for demos, tests and benchmarks.

The layout is robomimic's (see :mod:`robopipe.robomimic.hdf5`) with robosuite-like keys and
dtypes: ``obs/robot0_eef_pos`` (T, 3), ``obs/robot0_eef_quat`` (T, 4),
``obs/robot0_gripper_qpos`` (T, 2) and ``obs/object`` (T, 10) float64; per camera
``obs/<camera>`` (T, H, W, 3) uint8; ``actions`` (T, 7) float64 in [-1, 1]; ``rewards`` (T,)
float64 (1 at the last step); ``dones`` (T,) int64 (1 at the last step). ``data`` carries
``env_args`` (env ``GeneratedReach``, ``control_freq`` 20, robot ``Panda``) and ``total``;
each demo ``num_samples``; ``mask/train`` and ``mask/valid`` split the demos 9:1 like
robomimic's ``split_train_val_from_hdf5``. With ``next_obs``, each demo also has
``next_obs/<key>`` (step ``t + 1`` of ``obs/<key>``, the last step repeated), as robomimic's
``dataset_states_to_obs`` writes. The file depends only on the arguments.

CLI: ``python -m robopipe.robomimic.generate OUT.hdf5 --demos 20 [--height 84 --width 84]
[--cameras agentview_image robot0_eye_in_hand_image] [--min-length 40 --max-length 80]
[--seed 0] [--next-obs]``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import h5py
import numpy as np

from robopipe.atomic import atomic_path
from robopipe.keyword_flags import add_keyword_flags, keyword_values

DEFAULT_CAMERAS = ("agentview_image", "robot0_eye_in_hand_image")
ENV_ARGS = {
    "env_name": "GeneratedReach",
    "type": 1,
    "env_kwargs": {"control_freq": 20, "robots": ["Panda"]},
}
VALID_FRACTION = 0.1  # robomimic split_train_val_from_hdf5(val_ratio=0.1)


def generate_robomimic(
    path: str | Path,
    *,
    demos: int = 20,
    cameras: Sequence[str] = DEFAULT_CAMERAS,
    height: int = 84,
    width: int = 84,
    min_length: int = 40,
    max_length: int = 80,
    seed: int = 0,
    next_obs: bool = False,
) -> Path:
    """Write a robomimic HDF5 file to ``path`` (atomically) and return ``path`` as a Path.

    Args:
        path: the ``.hdf5`` file to write; replaced if it exists.
        demos: number of demos (>= 1), ``demo_0`` .. ``demo_{demos-1}``.
        cameras: image observation keys (robomimic names them ``<camera>_image``).
        height, width: image size in pixels (even numbers, for yuv420p video).
        min_length, max_length: demo lengths in steps, drawn uniformly (inclusive).
        seed: seed of every random choice.
        next_obs: also write ``next_obs/<key>`` for every observation key.

    Raises:
        ValueError: ``demos < 1``, ``not 1 <= min_length <= max_length``, odd height/width.
    """
    if demos < 1 or not 1 <= min_length <= max_length:
        raise ValueError("need demos >= 1 and 1 <= min_length <= max_length")
    if height % 2 or width % 2:
        raise ValueError(f"height and width must be even, not {height}x{width}")
    path = Path(path)
    rng = np.random.default_rng(seed)
    names = [f"demo_{i}" for i in range(demos)]
    with atomic_path(path) as tmp, h5py.File(tmp, "w") as h5:
        data = h5.create_group("data")
        total = 0
        for i, name in enumerate(names):
            ep_rng = np.random.default_rng([seed, i])
            length = int(ep_rng.integers(min_length, max_length + 1))
            group = data.create_group(name)
            _write_demo(group, ep_rng, length, cameras, height, width)
            if next_obs:
                for key, values in group["obs"].items():
                    group[f"next_obs/{key}"] = np.concatenate([values[1:], values[-1:]])
            group.attrs["num_samples"] = length
            total += length
        data.attrs["total"] = total
        data.attrs["env_args"] = json.dumps(ENV_ARGS)
        order = rng.permutation(demos)
        valid = max(1, int(round(demos * VALID_FRACTION))) if demos > 1 else 0
        splits = {"valid": order[:valid], "train": order[valid:]}
        for split, members in splits.items():
            h5.create_dataset(
                f"mask/{split}", data=np.array([names[m] for m in sorted(members)], "S")
            )
    return path


def _write_demo(group, rng, length: int, cameras: Sequence[str], height: int, width: int):
    t = np.arange(length)[:, None]
    start, goal = rng.uniform(-0.3, 0.3, (2, 3))
    progress = 0.5 - 0.5 * np.cos(np.pi * t / max(1, length - 1))  # (T, 1), 0 -> 1
    eef = start + (goal - start) * progress  # (T, 3) metres
    quat = np.tile([0.0, 1.0, 0.0, 0.0], (length, 1)) + 0.01 * np.sin(t / 5 + rng.uniform(0, 6))
    gripper = np.concatenate([0.04 - 0.03 * progress, -0.04 + 0.03 * progress], axis=1)
    obj = np.concatenate([goal + np.zeros((length, 3)), np.tile([0, 0, 0, 1.0], (length, 1))], 1)
    obj = np.concatenate([obj, eef - goal], axis=1)  # (T, 10)
    velocity = np.diff(eef, axis=0, append=eef[-1:]) * 20  # m/s at 20 Hz
    actions = np.clip(np.concatenate([velocity, np.zeros((length, 3)), 2 * progress - 1], 1), -1, 1)
    obs = group.create_group("obs")
    obs["robot0_eef_pos"] = eef
    obs["robot0_eef_quat"] = quat
    obs["robot0_gripper_qpos"] = gripper
    obs["object"] = obj
    for c, camera in enumerate(cameras):
        obs[camera] = _render(eef, goal, c, height, width)
    group["actions"] = actions
    group["rewards"] = (t[:, 0] == length - 1).astype(np.float64)
    group["dones"] = (t[:, 0] == length - 1).astype(np.int64)


def _render(eef: np.ndarray, goal: np.ndarray, camera: int, height: int, width: int):
    """uint8 (T, H, W, 3): a gradient background with stripes that move one pixel per step,
    the goal as a green square and the end effector as a red disk, seen from above (camera 0)
    or from the side (others)."""
    axes = (0, 1) if camera == 0 else (0, 2)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    background = np.stack([x / width * 120 + 60, y / height * 120 + 60, np.full_like(x, 90)], -1)
    t = np.arange(len(eef), dtype=np.float32)[:, None, None, None]
    frames = background[None] + 30 * np.sin(2 * np.pi * (x[..., None] + t) / 16)

    def pixel(p):  # metres in [-0.4, 0.4] -> pixel (row, col)
        return (p[..., axes[1]] / 0.8 + 0.5) * height, (p[..., axes[0]] / 0.8 + 0.5) * width

    gy, gx = pixel(goal)
    size = min(height, width) / 10
    frames[:, (np.abs(y - gy) < size) & (np.abs(x - gx) < size)] = (40, 200, 60)
    ey, ex = pixel(eef)
    disk = (y[None] - ey[:, None, None]) ** 2 + (x[None] - ex[:, None, None]) ** 2 < size**2
    frames[disk] = (220, 40, 40)
    return frames.astype(np.uint8)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m robopipe.robomimic.generate OUT.hdf5 --demos N ...``: write a file."""
    parser = argparse.ArgumentParser(
        prog="python -m robopipe.robomimic.generate", description=__doc__.split("\n")[0]
    )
    parser.add_argument("out", type=Path)
    add_keyword_flags(parser, generate_robomimic)
    args = parser.parse_args(argv)
    path = generate_robomimic(args.out, **keyword_values(args, generate_robomimic))
    with h5py.File(path, "r") as h5:
        total = int(h5["data"].attrs["total"])
    print(f"wrote {args.demos} demos, {total} steps, cameras {args.cameras} to {path}")


if __name__ == "__main__":
    main()

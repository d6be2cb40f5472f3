"""A synthetic LeRobot v2.1 dataset for demos, tests and benchmarks, written by :class:`V21Writer`.

Every episode has a smooth 6-joint ``observation.state`` trajectory, an ``action`` (the next
state plus a gripper command), and per camera a textured background that pans one pixel per
frame and follows a joint, a shape placed by two other joints, and a little sensor noise, so
that AV1/H.264 compress it like a real recording rather than a still image. The output
depends only on the arguments (``seed`` included).

CLI: ``python -m robopipe.demo OUT_DIR --episodes 50 [--cameras 2] [--codec h264]
[--height 96 --width 128] [--fps 30] [--min-length 150 --max-length 250] [--seed 0] [--preset 12]``.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from robopipe.atomic import atomic_path
from robopipe.formats.v21_writer import V21Writer
from robopipe.keyword_flags import add_keyword_flags, keyword_values
from robopipe.layout import V21_INFO_PATH

DEFAULT_CAMERAS = ("observation.images.front", "observation.images.wrist")
DEFAULT_TASKS = (
    "pick up the red cube",
    "push the blue block to the goal",
    "open the top drawer",
    "stack the green cube on the yellow cube",
)
STATE_NAMES = [f"joint_{i}" for i in range(6)]
ACTION_NAMES = [*STATE_NAMES, "gripper"]
# Shape colour (RGB) per task, cycled.
TASK_COLOURS = np.array([[220, 40, 40], [40, 80, 220], [200, 160, 60], [40, 190, 80]], np.uint8)
NOISE_FRAMES = 8  # noise patterns per camera, cycled over frames
NOISE_AMPLITUDE = 3  # uint8 levels


def demo_cameras(count: int) -> tuple[str, ...]:
    """The video keys of a demo dataset with ``count`` cameras: the demo's own two
    (``observation.images.front``, ``observation.images.wrist``), then
    ``observation.images.cam2``, ``observation.images.cam3``, ..."""
    extra = tuple(f"observation.images.cam{i}" for i in range(2, count))
    return (DEFAULT_CAMERAS + extra)[:count]


def generate_demo(
    root: str | Path,
    *,
    episodes: int = 50,
    cameras: Sequence[str] = DEFAULT_CAMERAS,
    height: int = 96,
    width: int = 128,
    fps: int = 30,
    min_length: int = 150,
    max_length: int = 250,
    tasks: Sequence[str] = DEFAULT_TASKS,
    codec: str = "libsvtav1",
    seed: int = 0,
    preset: int | None = None,
) -> Path:
    """Write a demo v2.1 dataset to ``root`` and return ``root`` as a Path.

    Args:
        root: output folder. Written under a temporary name and renamed when complete; an
            existing folder of that name is replaced.
        episodes: number of episodes (>= 1).
        cameras: video keys; each camera gets its own texture and motion.
        height, width: frame size in pixels (even numbers: yuv420p halves chroma).
        fps: frames per second.
        min_length, max_length: episode lengths in frames, drawn uniformly (inclusive).
        tasks: task strings; episode ``i`` does ``tasks[i % len(tasks)]``.
        codec: ``"libsvtav1"`` (lerobot's default) or ``"h264"``; see :class:`V21Writer`.
        seed: seed of every random choice.
        preset: libsvtav1 preset, None for the encoder's default (as lerobot 0.3.x).

    Features: ``observation.state`` float32 (6,) in radians, ``action`` float32 (7,)
    (joint targets in radians, gripper in [0, 1]), then the cameras uint8 ``(H, W, 3)``.

    Raises:
        ValueError: ``episodes < 1``, ``min_length < 1`` or ``min_length > max_length``,
            odd ``height``/``width``, no tasks.
    """
    if episodes < 1 or not 1 <= min_length <= max_length or not tasks:
        raise ValueError("need episodes >= 1, 1 <= min_length <= max_length and some tasks")
    if height % 2 or width % 2:
        raise ValueError(f"height and width must be even for yuv420p, not {height}x{width}")
    root = Path(root)
    features = {
        "observation.state": {"dtype": "float32", "shape": [6], "names": STATE_NAMES},
        "action": {"dtype": "float32", "shape": [7], "names": ACTION_NAMES},
    } | {cam: {"dtype": "video", "shape": [height, width, 3]} for cam in cameras}
    rng = np.random.default_rng(seed)
    scenes = [_Camera(rng, height, width, i) for i in range(len(cameras))]
    with atomic_path(root) as tmp:
        writer = V21Writer(
            tmp,
            fps=fps,
            features=features,
            robot_type="demo",
            codec=codec,
            preset=preset,
            name=root.name,
        )
        for ep in range(episodes):
            ep_rng = np.random.default_rng([seed, ep])
            length = int(ep_rng.integers(min_length, max_length + 1))
            state, action = _trajectory(ep_rng, length, fps)
            colour = TASK_COLOURS[ep % len(tasks) % len(TASK_COLOURS)]
            frames = {
                cam: scene.render(state, colour, ep_rng)
                for cam, scene in zip(cameras, scenes, strict=True)
            }
            writer.add_episode(
                frames, {"observation.state": state, "action": action}, tasks[ep % len(tasks)]
            )
        writer.close()
    return root


def _trajectory(rng: np.random.Generator, length: int, fps: int) -> tuple[np.ndarray, np.ndarray]:
    """Smooth joint angles (T, 6) and actions (T, 7), float32: sums of slow sinusoids."""
    t = np.arange(length + 1) / fps  # one extra step: the action is the next state
    amplitude = rng.uniform(0.2, 0.8, size=(2, 6))
    freq = rng.uniform(0.05, 0.4, size=(2, 6))  # Hz
    phase = rng.uniform(0, 2 * np.pi, size=(2, 6))
    offset = rng.uniform(-0.5, 0.5, size=6)
    waves = amplitude[:, None] * np.sin(
        2 * np.pi * freq[:, None] * t[None, :, None] + phase[:, None]
    )
    joints = offset + waves.sum(axis=0)  # (T + 1, 6)
    close_at = rng.uniform(0.3, 0.6) * length / fps
    gripper = 1.0 / (1.0 + np.exp(-8.0 * (t[1:] - close_at)))
    action = np.concatenate([joints[1:], gripper[:, None]], axis=1)
    return joints[:-1].astype(np.float32), action.astype(np.float32)


class _Camera:
    """One camera's scene: a tileable texture, scrolled and overlaid per frame."""

    def __init__(self, rng: np.random.Generator, height: int, width: int, index: int) -> None:
        self.height, self.width, self.index = height, width, index
        self.period = (2 * height, 2 * width)  # the texture repeats every period pixels
        self.texture = np.tile(_texture(rng, *self.period), (2, 2, 1))  # uint8 (4H, 4W, 3)
        noise = rng.integers(
            -NOISE_AMPLITUDE, NOISE_AMPLITUDE + 1, (NOISE_FRAMES, height, width, 3)
        )
        # Stored modulo 256: uint8 addition then wraps to the exact sum, since every pixel
        # value it is added to lies in [NOISE_AMPLITUDE, 255 - NOISE_AMPLITUDE].
        self.noise = noise.astype(np.uint8)

    def render(self, state: np.ndarray, colour: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Frames uint8 (T, H, W, 3) for a state trajectory (T, 6)."""
        h, w = self.height, self.width
        even = self.index % 2 == 0
        j = 0 if even else 3  # joint j moves the background, joints j+1, j+2 the shape
        # Background: a window into the texture that pans one pixel per frame along one axis
        # (x for even cameras, y for odd ones) and follows a joint along the other.
        pan = np.arange(len(state))
        follow = np.round((state[:, j] + 2) * min(h, w) / 2).astype(int)
        y0, x0 = (follow, pan) if even else (pan, follow)
        y0, x0 = y0 % self.period[0], x0 % self.period[1]
        frames = np.empty((len(state), h, w, 3), dtype=np.uint8)
        for t, (y, x) in enumerate(zip(y0, x0, strict=True)):
            frames[t] = self.texture[y : y + h, x : x + w]
        # Shape: a disk (even cameras) or a square (odd cameras) placed by two other joints.
        cy = h / 2 + np.tanh(state[:, j + 1]) * h / 3
        cx = w / 2 + np.tanh(state[:, j + 2]) * w / 3
        size = np.float32(min(h, w) / 6)
        dy = np.arange(h, dtype=np.float32)[None, :] - cy[:, None]  # (T, H)
        dx = np.arange(w, dtype=np.float32)[None, :] - cx[:, None]  # (T, W)
        if even:
            inside = dy[:, :, None] ** 2 + dx[:, None, :] ** 2 < size**2
        else:
            inside = (np.abs(dy) < size)[:, :, None] & (np.abs(dx) < size)[:, None, :]
        frames[inside] = colour
        start = int(rng.integers(NOISE_FRAMES))
        frames += self.noise[(start + np.arange(len(state))) % NOISE_FRAMES]
        return frames


def _texture(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """A smooth, tileable colour texture uint8 (height, width, 3): bilinear-upsampled noise
    plus vertical stripes, values in [NOISE_AMPLITUDE, 255 - NOISE_AMPLITUDE]."""
    rows = max(2, height // max(4, height // 8))
    cols = max(2, width // max(4, width // 16))
    grid = rng.uniform(30, 225, size=(rows + 1, cols + 1, 3))
    grid[-1], grid[:, -1] = grid[0], grid[:, 0]  # wrap around so that scrolling has no seam
    y = np.arange(height) * rows / height
    x = np.arange(width) * cols / width
    y0, x0 = y.astype(int), x.astype(int)
    fy, fx = (y - y0)[:, None, None], (x - x0)[None, :, None]
    top = grid[y0][:, x0] * (1 - fx) + grid[y0][:, x0 + 1] * fx
    bottom = grid[y0 + 1][:, x0] * (1 - fx) + grid[y0 + 1][:, x0 + 1] * fx
    stripes = 20 * np.sin(2 * np.pi * np.arange(width) / (width / 4))[None, :, None]
    texture = top * (1 - fy) + bottom * fy + stripes
    return np.clip(texture, NOISE_AMPLITUDE, 255 - NOISE_AMPLITUDE).astype(np.uint8)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m robopipe.demo OUT_DIR --episodes N ...``: write a demo dataset, print timing."""
    parser = argparse.ArgumentParser(
        prog="python -m robopipe.demo", description=__doc__.split("\n")[0]
    )
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--cameras", type=int, default=2, help="number of cameras")
    add_keyword_flags(parser, generate_demo, skip=("cameras", "tasks"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    start = time.perf_counter()
    options = keyword_values(args, generate_demo) | {"cameras": demo_cameras(args.cameras)}
    root = generate_demo(args.out_dir, **options)
    seconds = time.perf_counter() - start
    info = json.loads((root / V21_INFO_PATH).read_text())
    codecs = sorted({ft["info"]["video.codec"] for ft in info["features"].values() if "info" in ft})
    print(
        f"wrote {info['total_episodes']} episodes, {info['total_frames']} frames "
        f"({'/'.join(codecs)}) to {root} in {seconds:.1f} s"
    )


if __name__ == "__main__":
    main()

"""``delta_timestamps`` windows and frame modes, with LeRobot 0.6.1's semantics.

- ``check_delta_timestamps``: ``feature_utils.py:160``, every ``d`` must satisfy
  ``|d*fps - round(d*fps)| / fps <= tolerance_s``.
- ``delta_indices``: ``feature_utils.py:204``, ``round(d*fps)``.
- ``window_rows``: ``dataset_reader.py:215-232``, query rows clamped to the episode
  ``[dataset_from_index, dataset_to_index - 1]`` plus a ``<key>_is_pad`` mask of the rows that
  fell outside it.
"""

from __future__ import annotations

import numpy as np

SARM_STEPS = 8  # the "sarm" mode: 8 timesteps 1 s apart (upstream's streaming benchmark)
STATE_KEY = "observation.state"


def check_delta_timestamps(
    delta_timestamps: dict[str, list[float]], fps: int, tolerance_s: float
) -> None:
    """Raise ``ValueError`` if a delta is not a whole number of frames (within tolerance_s)."""
    for key, deltas in delta_timestamps.items():
        for d in deltas:
            if abs(d * fps - round(d * fps)) / fps > tolerance_s:
                raise ValueError(
                    f"delta_timestamps[{key!r}] = {d} s is not a multiple of 1/fps = {1 / fps} s "
                    f"(tolerance_s = {tolerance_s})"
                )


def delta_indices(delta_timestamps: dict[str, list[float]], fps: int) -> dict[str, np.ndarray]:
    """Frame offsets ``round(d*fps)`` per key, as int64 arrays of shape (T,)."""
    return {
        key: np.array([round(d * fps) for d in deltas], dtype=np.int64)
        for key, deltas in delta_timestamps.items()
    }


def window_rows(position: int, length: int, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Episode-relative rows of a window and its pad mask.

    Args:
        position: the item's row in its episode, 0 <= position < length.
        length: the episode's frame count.
        offsets: (T,) int64 frame offsets.

    Returns:
        rows (T,) int64 clamped to [0, length-1], and is_pad (T,) bool, True where the
        unclamped row was outside the episode.
    """
    rows = position + offsets
    is_pad = (rows < 0) | (rows >= length)
    return np.clip(rows, 0, length - 1), is_pad


def mode_delta_timestamps(
    mode: str,
    video_keys: list[str],
    fps: int,
    windows: dict[str, dict[str, list[float]]] | None = None,
) -> dict[str, list[float]] | None:
    """The ``delta_timestamps`` of a frame mode.

    - ``single``: None (one timestep, every camera);
    - ``sarm``: every camera and ``observation.state`` at ``[-7, -6, ..., 0]`` seconds;
    - any other name: ``windows[mode]``, a mapping key -> deltas in seconds, where the key
      ``cameras`` stands for every camera.

    Raises:
        ValueError: an unknown mode.
    """
    if mode == "single":
        return None
    if mode == "sarm":
        deltas = [float(s) for s in range(-(SARM_STEPS - 1), 1)]
        return {key: deltas for key in [*video_keys, STATE_KEY]}
    if windows and mode in windows:
        out = {}
        for key, deltas in windows[mode].items():
            for k in video_keys if key == "cameras" else [key]:
                out[k] = [float(d) for d in deltas]
        return out
    raise ValueError(f"unknown frame mode {mode!r}: use single, sarm or a window from config")

"""LeRobot's rules that the checks of both versions, and the conversion's validation, apply to
a data file: every column declared in ``info.json``, timestamps on ``frame_index / fps``, and
the values that point into another file (``task_index`` into the tasks file) found there."""

from __future__ import annotations

import numpy as np


def undeclared_column_message(column: str, holder: str = "the data files hold") -> str:
    """What is wrong with an undeclared ``column`` and the fix; ``holder`` names the files."""
    return (
        f"{holder} a column {column!r} that info.json's features do not declare, and "
        "lerobot's loader reads only declared columns; set `undeclared_columns: drop` to "
        "leave it out, or `undeclared_columns: declare` to declare it from its parquet type, "
        "or declare it in info.json (dtype, shape, names)"
    )


def timestamp_error(timestamps: np.ndarray, frame_index: np.ndarray, fps: int) -> tuple[float, int]:
    """Largest ``|timestamp - frame_index / fps|`` in seconds, and the frame index where it is.

    Both arrays have shape ``(T,)``; timestamps are float seconds (float32 in LeRobot). A NaN
    timestamp is infinitely far off (``inf``), like an infinite one, so that ``error >
    tolerance_s`` refuses it (a NaN error would compare as within any tolerance).
    """
    if len(timestamps) == 0:
        return 0.0, 0
    error = np.abs(timestamps.astype(np.float64) - frame_index / fps)
    error[np.isnan(error)] = np.inf
    at = int(np.argmax(error))
    return float(error[at]), int(frame_index[at])


FRAME_INDEX_MESSAGE = "frame_index does not count 0..length-1"


def unknown_task_indices(task_index: np.ndarray, tasks: int) -> list[int]:
    """The distinct values of a data file's ``task_index`` column (shape ``(T,)``, integers)
    that name no task of the dataset's ``tasks`` tasks (indices ``0..tasks-1``), sorted."""
    used = np.unique(task_index)
    return used[(used < 0) | (used >= tasks)].tolist()


def unknown_task_message(unknown: list[int], tasks_file: str, tasks: int) -> str:
    """What is wrong when a data file's ``task_index`` values ``unknown`` have no task in
    ``tasks_file`` (which holds ``tasks`` tasks)."""
    return f"task_index {unknown} has no task in {tasks_file} ({tasks} task(s))"

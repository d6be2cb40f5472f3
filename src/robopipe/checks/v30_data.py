"""The v3.0 check of one data file against the ``meta/episodes`` rows that name it: each
episode's rows in the file, ``index`` the row position, ``frame_index`` counting from 0,
timestamps, and every ``episode_index`` and ``task_index`` found in ``meta/``."""

from __future__ import annotations

import numpy as np

from robopipe.checks.report import Problem
from robopipe.checks.rules import (
    FRAME_INDEX_MESSAGE,
    timestamp_error,
    unknown_task_indices,
    unknown_task_message,
)
from robopipe.checks.v30_episodes import FIX, Episodes
from robopipe.layout import (
    DEFAULT_FEATURES,
    TASKS_PATH,
)
from robopipe.retry import RemoteReadError


class DataFileCheck:
    """One data file against the episode rows that name it (thread-safe: each call returns
    its own problems).

    ``checker`` is the v3.0 check's state (:mod:`robopipe.checks.v30`): its ``info``,
    ``tasks``, ``tolerance_s``, ``report`` and ``open(rel)``."""

    def __init__(self, checker, episodes: Episodes) -> None:
        self.checker = checker
        self.episodes = episodes
        self.fps = checker.info["fps"]

    def check(self, rel: str, offset: int, rows: int, owners: list[int]) -> list[Problem]:
        import pyarrow.parquet as pq

        problems: list[Problem] = []
        episodes = self.episodes
        index = episodes["episode_index"]
        owner_eps = [int(index[r]) for r in owners]
        try:
            with self.checker.open(rel) as source:
                parquet = pq.ParquetFile(source, pre_buffer=True)
                names = parquet.schema_arrow.names
                small = [c for c in DEFAULT_FEATURES if c in names]
                table = parquet.read(columns=small, use_threads=False)
            cols = {c: table.column(c).to_numpy() for c in small}
        except RemoteReadError:
            raise  # a network give-up says nothing of the file
        except Exception as exc:  # ArrowInvalid / OSError: a damaged column chunk
            return problems + [
                Problem("unreadable_file", f"unreadable parquet ({exc}); {FIX}", ep, rel)
                for ep in owner_eps
            ]
        needed = [k for k, f in self.checker.info["features"].items() if f["dtype"] != "video"]
        absent = [c for c in dict.fromkeys([*DEFAULT_FEATURES, *needed]) if c not in names]
        for ep in owner_eps:
            if absent:
                problems.append(
                    Problem("columns", f"column(s) {', '.join(absent)} missing", ep, rel)
                )
        problems += self._row_problems(rel, offset, rows, owners, cols)
        problems += self._foreign_episodes(rel, owner_eps, cols)
        return problems

    def _row_problems(self, rel, offset, rows, owners, cols) -> list[Problem]:
        """Each episode's rows in this file: found by ``episode_index``, their ``index``
        values exactly ``dataset_from_index..dataset_to_index-1`` (lerobot maps those to
        rows by the ``index`` column), in one run, ``frame_index`` from 0, the timestamps,
        the task indices."""
        problems = []
        episodes = self.episodes
        if "index" in cols and not np.array_equal(cols["index"], np.arange(offset, offset + rows)):
            for row in owners:
                problems.append(
                    Problem(
                        "index_column",
                        f"the index column is not the row position {offset}..{offset + rows} "
                        "(data files concatenated in path order)",
                        int(episodes["episode_index"][row]),
                        rel,
                    )
                )
        if "episode_index" not in cols:
            return problems
        order = np.argsort(cols["episode_index"], kind="stable")
        sorted_eps = cols["episode_index"][order]
        for row in owners:
            ep = int(episodes["episode_index"][row])
            start = int(episodes["dataset_from_index"][row])
            stop = int(episodes["dataset_to_index"][row])
            lo, hi = np.searchsorted(sorted_eps, [ep, ep + 1])
            positions = order[lo:hi]
            where = f"dataset_from_index={start}, dataset_to_index={stop}"
            if not positions.size:
                problems.append(
                    Problem(
                        "episode_rows", f"{where} but no row of this file is this episode", ep, rel
                    )
                )
                continue
            found = cols["index"][positions] if "index" in cols else positions + offset
            if not np.array_equal(found, np.arange(start, stop)):
                problems.append(
                    Problem(
                        "episode_range",
                        f"{where} but the file's {positions.size} rows of this episode have "
                        f"index {int(found.min())}..{int(found.max()) + 1} (this file holds "
                        f"rows {offset}..{offset + rows})",
                        ep,
                        rel,
                    )
                )
            if positions[-1] - positions[0] + 1 != positions.size:
                problems.append(
                    Problem("episode_rows", "the episode's rows are not in one run", ep, rel)
                )
            problems += self._frame_problems(rel, ep, positions, cols)
        return problems

    def _frame_problems(self, rel, ep, positions, cols) -> list[Problem]:
        problems, tol = [], self.checker.tolerance_s
        frames = np.arange(positions.size)
        if "frame_index" in cols and not np.array_equal(cols["frame_index"][positions], frames):
            problems.append(Problem("frame_index", FRAME_INDEX_MESSAGE, ep, rel))
        elif "timestamp" in cols:
            worst, at = timestamp_error(cols["timestamp"][positions], frames, self.fps)
            if worst > tol:
                problems.append(
                    Problem(
                        "timestamps",
                        f"timestamp differs from frame_index / fps by {worst:.6f} s at "
                        f"frame {at} (tolerance_s={tol})",
                        ep,
                        rel,
                    )
                )
        if "task_index" in cols and self.checker.tasks is not None:
            tasks = len(self.checker.tasks)
            unknown = unknown_task_indices(cols["task_index"][positions], tasks)
            if unknown:
                message = unknown_task_message(unknown, TASKS_PATH, tasks)
                problems.append(Problem("task_index", message, ep, rel))
        return problems

    def _foreign_episodes(self, rel, owner_eps, cols) -> list[Problem]:
        """Episodes whose rows are in this file although meta/episodes does not put them here."""
        if "episode_index" not in cols:
            return []
        index = self.episodes["episode_index"]
        listed = set(index.tolist())
        problems = []
        for ep in sorted(set(np.unique(cols["episode_index"]).tolist()) - set(owner_eps)):
            where = (
                "has no row in meta/episodes"
                if ep not in listed
                else "is placed in another data file by meta/episodes"
            )
            problems.append(
                Problem(
                    "episode_index",
                    f"rows of episode {ep} are in this file but it {where}",
                    ep,
                    rel,
                )
            )
        return problems

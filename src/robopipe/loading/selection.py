"""Episode selection: the episodes a loader reads, as LeRobotDataset's ``episodes=``.

lerobot 0.6.1 (``LeRobotDataset.__init__(episodes=...)``, ``datasets/lerobot_dataset.py``)
loads the frames of the listed episodes only; item ``i`` is then the ``i``-th of those frames,
and each item keeps its global ``index`` and ``episode_index``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from robopipe.formats.v30_reader import DatasetMeta


def selected_episodes(meta: DatasetMeta, episodes: Sequence[int] | None) -> list[int]:
    """The episode indices read: ``episodes`` sorted and once each, or every episode (None).

    Raises:
        ValueError: an episode outside ``0..num_episodes-1``, or an empty selection.
    """
    if episodes is None:
        return list(range(meta.num_episodes))
    chosen = sorted({int(e) for e in episodes})
    outside = [e for e in chosen if not 0 <= e < meta.num_episodes]
    if outside or not chosen:
        raise ValueError(
            f"dataset {meta.name!r}: episodes {outside or '[]'} not in 0..{meta.num_episodes - 1}"
        )
    return chosen


def episode_frames(meta: DatasetMeta, episodes: Sequence[int] | None) -> np.ndarray | None:
    """The global frame indices (int64, ascending) of ``episodes``; None for every episode.

    Raises:
        ValueError: as :func:`selected_episodes`.
    """
    if episodes is None:
        return None
    starts = meta.episodes["dataset_from_index"]
    ends = meta.episodes["dataset_to_index"]
    return np.concatenate(
        [np.arange(starts[e], ends[e], dtype=np.int64) for e in selected_episodes(meta, episodes)]
    )

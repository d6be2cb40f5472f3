"""Split episodes over ranks and DataLoader workers: disjoint, non-empty, balanced by frames;
where a rank is, and which worker's batch a DataLoader returns next.

``group_episodes_by_files`` and ``partition_episodes`` follow lerobot main's
``src/lerobot/datasets/partition.py`` (after 0.6.1): connected components of episodes sharing a
file, and greedy LPT (longest first to the least-loaded bin; ties to the lower episode and the
lower bin; bins sorted).
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Hashable, Sequence


def world_from_env(rank: int | None, world_size: int | None) -> tuple[int, int]:
    """(rank, world_size) from the arguments, else from RANK / WORLD_SIZE, else (0, 1)."""
    rank = int(os.environ.get("RANK", 0)) if rank is None else rank
    world_size = int(os.environ.get("WORLD_SIZE", 1)) if world_size is None else world_size
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} outside world_size {world_size}")
    return rank, world_size


def group_episodes_by_files(file_ids: Sequence[Sequence[Hashable]]) -> list[list[int]]:
    """Connected components of episodes that share any file id, in episode order.

    Args:
        file_ids: per episode, the ids of the files it lives in (e.g. ``("data", 0, 3)``).

    Returns:
        groups of episode indices; each group sorted, groups ordered by their first episode.
    """
    parent = list(range(len(file_ids)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[Hashable, int] = {}
    for episode, ids in enumerate(file_ids):
        for fid in ids:
            if fid in owner:
                a, b = find(owner[fid]), find(episode)
                parent[max(a, b)] = min(a, b)
            else:
                owner[fid] = episode
    groups: dict[int, list[int]] = {}
    for episode in range(len(file_ids)):
        groups.setdefault(find(episode), []).append(episode)
    return list(groups.values())


def partition_episodes(episode_lengths: Sequence[int], num_partitions: int) -> list[list[int]]:
    """Greedy LPT partition of items (episodes or groups) by length into ``num_partitions`` bins.

    Returns:
        ``num_partitions`` sorted lists of item indices, each non-empty.

    Raises:
        ValueError: num_partitions < 1, fewer items than bins, or a length <= 0.
    """
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be >= 1, got {num_partitions}")
    if len(episode_lengths) < num_partitions:
        raise ValueError(f"{len(episode_lengths)} episodes cannot fill {num_partitions} partitions")
    if any(length <= 0 for length in episode_lengths):
        raise ValueError("every episode length must be > 0")
    order = sorted(range(len(episode_lengths)), key=lambda i: (-episode_lengths[i], i))
    heap = [(0, b) for b in range(num_partitions)]
    bins: list[list[int]] = [[] for _ in range(num_partitions)]
    for i in order:
        load, b = heapq.heappop(heap)
        bins[b].append(i)
        heapq.heappush(heap, (load + episode_lengths[i], b))
    return [sorted(b) for b in bins]


def assign_episodes(
    episode_lengths: Sequence[int],
    file_ids: Sequence[Sequence[Hashable]],
    world_size: int,
    num_workers: int,
) -> list[list[int]]:
    """Episodes of every (rank, worker) slot; slot = rank * num_workers + worker.

    Episodes that share a file stay together (each file is then read by one stream only)
    when that leaves at least one group per slot; otherwise episodes are grouped by their
    video files only (ids whose kind is not ``"data"``: data files are small and read whole),
    and failing that, single episodes are partitioned. Groups are balanced by frame count.

    Raises:
        ValueError: fewer episodes than slots (some worker would get no work).
    """
    slots = world_size * max(num_workers, 1)
    if len(episode_lengths) < slots:
        raise ValueError(
            f"{len(episode_lengths)} episodes cannot give each of {world_size} rank(s) x "
            f"{max(num_workers, 1)} worker(s) = {slots} streams disjoint non-empty work: "
            "use fewer workers or ranks"
        )
    video_ids = [[i for i in ids if i[0] != "data"] for ids in file_ids]
    for ids in (file_ids, video_ids, [[e] for e in range(len(episode_lengths))]):
        groups = group_episodes_by_files(ids)
        if len(groups) >= slots:
            break
    bins = partition_episodes([sum(episode_lengths[e] for e in g) for g in groups], slots)
    return [sorted(e for g in b for e in groups[g]) for b in bins]


def round_robin_taken(batches: Sequence[int], consumed: int) -> tuple[list[int], int]:
    """How many batches of each stream the first ``consumed`` batches of a round robin hold.

    A DataLoader with ``num_workers = len(batches)`` (``in_order=True``, its default) returns
    an ``IterableDataset``'s batches in rounds: worker 0's k-th batch, worker 1's k-th, ...,
    skipping workers that have run out (``torch.utils.data.dataloader``'s
    ``_worker_queue_idx_cycle``; a worker's batches come out in the order it yields them).

    Args:
        batches: batches each stream yields in the whole epoch.
        consumed: batches returned so far (beyond the total: all of them).

    Returns:
        (batches taken from each stream, the stream whose turn comes next): the rest of the
        round robin is the round robin of the streams' remaining batches started at that
        stream (``(next + j) % len(batches)`` in place of worker ``j``).
    """
    taken = [0] * len(batches)
    last = -1
    left = min(consumed, sum(batches))
    while left:
        for stream, total in enumerate(batches):
            if left and taken[stream] < total:
                taken[stream] += 1
                left -= 1
                last = stream
    return taken, (last + 1) % max(len(batches), 1)

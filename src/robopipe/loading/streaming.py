"""Streaming (iterable) dataset over a v3.0 dataset at any fsspec URL.

Work is split by ``robopipe.loading.partition.assign_episodes`` over every (rank, DataLoader
worker) stream, so with R ranks and W workers the R*W streams are disjoint, non-empty and
together cover every frame once per epoch. Each stream's order is a pure function of
(seed, epoch, slot): episode groups in shuffled order, then a shuffle buffer of *frame indices*
(never decoded frames, so memory stays bounded); frames are decoded only when an index leaves
the buffer. Video time comes from the episode's ``from_timestamp`` plus the row's timestamp, so
videos that span several files work (lerobot 0.6.1's ``StreamingLeRobotDataset`` uses
``index / fps`` and fails there, ``streaming_dataset.py:540``).
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict

import numpy as np
import torch.utils.data

from robopipe.formats.v30_reader import read_data_file
from robopipe.loading.items import ItemReader
from robopipe.loading.partition import assign_episodes, group_episodes_by_files

DATA_FILES_KEPT = 2  # data files held per stream (LRU), parsed to numpy


def world_from_env(rank: int | None, world_size: int | None) -> tuple[int, int]:
    """(rank, world_size) from the arguments, else from RANK / WORLD_SIZE, else (0, 1)."""
    rank = int(os.environ.get("RANK", 0)) if rank is None else rank
    world_size = int(os.environ.get("WORLD_SIZE", 1)) if world_size is None else world_size
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} outside world_size {world_size}")
    return rank, world_size


class StreamingDataset(torch.utils.data.IterableDataset):
    """A v3.0 dataset streamed from ``url`` (local path, ``http(s)://``, ``s3://``,
    ``hf://datasets/<repo>``, ``hf://buckets/<name>``, any fsspec URL).

    Items are those of ``MapDataset`` (LeRobotDataset's keys and shapes).

    Args:
        url: dataset root.
        rank, world_size: this process's place among the ranks (default: RANK / WORLD_SIZE
            environment variables, else 0 of 1).
        shuffle: shuffle episode order and frames (through the buffer); False gives frames in
            index order per stream.
        shuffle_buffer: frame indices held in the buffer.
        seed: base seed; the order of an epoch depends on (seed, epoch, rank, worker).
        name, storage_options, **item_options: as ``MapDataset`` (``item_options`` are
            ``ItemReader``'s keywords).

    Position: ``state_dict()`` / ``load_state_dict()`` save and restore the epoch and the
    frames already consumed; iterating a restored dataset yields exactly the frames not yet
    consumed, in the same order. Iterated in this process (``num_workers=0``) the dataset
    records what it yields; with DataLoader workers, call ``mark_consumed(batch["index"])``
    in the training loop. ``set_epoch(e)`` starts a new epoch (new order, nothing consumed).

    Raises:
        ValueError: fewer episodes than ranks x workers (raised when iteration starts).
    """

    def __init__(
        self,
        url: str,
        *,
        name: str | None = None,
        storage_options: dict | None = None,
        rank: int | None = None,
        world_size: int | None = None,
        shuffle: bool = True,
        shuffle_buffer: int = 1000,
        seed: int = 0,
        **item_options,
    ) -> None:
        self.reader = ItemReader.from_url(
            url, name=name, storage_options=storage_options, **item_options
        )
        self.meta = self.reader.meta
        self.rank, self.world_size = world_from_env(rank, world_size)
        self.shuffle = shuffle
        self.shuffle_buffer = max(1, shuffle_buffer)
        self.seed = seed
        self.epoch = 0
        self._consumed = np.zeros(self.meta.num_frames, dtype=bool)
        lengths = self.meta.episodes["length"]
        self._file_ids = [self.meta.file_ids(e) for e in range(self.meta.num_episodes)]
        self._lengths = [int(n) for n in lengths]

    @property
    def counters(self):
        """Shared loader counters (``robopipe.loading.decoder.Counters``)."""
        return self.reader.counters

    def streams(self, num_workers: int) -> list[list[int]]:
        """Episodes of every (rank, worker) stream, slot = rank * num_workers + worker."""
        return assign_episodes(self._lengths, self._file_ids, self.world_size, num_workers)

    def order(self, episodes: list[int], slot: int) -> np.ndarray:
        """The global frame indices one stream yields in this epoch, in order (int64)."""
        meta = self.meta
        starts = meta.episodes["dataset_from_index"]
        ends = meta.episodes["dataset_to_index"]
        groups = group_episodes_by_files([self._file_ids[e] for e in episodes])
        if not self.shuffle:
            return np.concatenate([np.arange(starts[e], ends[e]) for e in episodes])
        rng = np.random.default_rng([self.seed, self.epoch, slot])
        out, buffer = [], []
        for g in rng.permutation(len(groups)):
            for i in rng.permutation(len(groups[g])):
                e = episodes[groups[g][i]]
                for index in range(starts[e], ends[e]):
                    if len(buffer) < self.shuffle_buffer:
                        buffer.append(index)
                        continue
                    j = int(rng.integers(len(buffer)))
                    out.append(buffer[j])
                    buffer[j] = index
        out.extend(buffer[k] for k in rng.permutation(len(buffer)))
        return np.asarray(out, dtype=np.int64)

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        num_workers, worker = (1, 0) if info is None else (info.num_workers, info.id)
        slot = self.rank * num_workers + worker
        episodes = self.streams(num_workers)[slot]
        order = self.order(episodes, slot)
        order = order[~self._consumed[order]]
        rows = _DataFiles(self.meta, self.reader)
        for index in order:
            episode = int(self.meta.episode_of(index))
            item = self.reader.item(episode, rows.episode(episode), index - rows.start(episode))
            if info is None:
                self._consumed[index] = True
            yield item
        if info is None:
            self.set_epoch(self.epoch + 1)  # a full pass in this process ends the epoch

    def mark_consumed(self, indices) -> None:
        """Record frames (global ``index`` values) the training loop has consumed."""
        self._consumed[np.asarray(indices, dtype=np.int64)] = True

    def set_epoch(self, epoch: int) -> None:
        """Start ``epoch``: a new order, nothing consumed."""
        self.epoch = epoch
        self._consumed[:] = False

    def state_dict(self) -> dict:
        """{"epoch", "seed", "consumed": sorted global frame indices consumed this epoch}."""
        return {
            "epoch": self.epoch,
            "seed": self.seed,
            "consumed": np.flatnonzero(self._consumed).tolist(),
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore a position saved by ``state_dict()``."""
        self.epoch, self.seed = int(state["epoch"]), int(state["seed"])
        self._consumed[:] = False
        self._consumed[np.asarray(state["consumed"], dtype=np.int64)] = True


class _DataFiles:
    """The data rows of episodes, read a whole data file at a time (LRU of parsed files)."""

    def __init__(self, meta, reader: ItemReader) -> None:
        self.meta = meta
        self.reader = reader
        self._files: OrderedDict[str, dict[str, np.ndarray]] = OrderedDict()

    def start(self, episode: int) -> int:
        return int(self.meta.episodes["dataset_from_index"][episode])

    def episode(self, episode: int) -> dict[str, np.ndarray]:
        """Columns of ``episode``'s rows (views into its data file)."""
        relative = self.meta.data_file(episode)
        if relative in self._files:
            self._files.move_to_end(relative)
        else:
            start = time.perf_counter()
            self._files[relative] = read_data_file(self.meta, relative)
            if len(self._files) > DATA_FILES_KEPT:
                self._files.popitem(last=False)
            self.reader.counters.add(fetch_s=time.perf_counter() - start)
        columns = self._files[relative]
        first = np.searchsorted(columns["index"], self.start(episode))
        n = int(self.meta.episodes["length"][episode])
        return {key: column[first : first + n] for key, column in columns.items()}

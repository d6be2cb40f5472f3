"""A resumable batch sampler for ``MapDataset``: epochs from (seed, epoch), split over ranks."""

from __future__ import annotations

import numpy as np
import torch.utils.data

from robopipe.loading.epoch import EpochPosition
from robopipe.loading.partition import world_from_env


class EpochSampler(EpochPosition, torch.utils.data.Sampler[list[int]]):
    """Batches of item indices for ``DataLoader(dataset, batch_sampler=sampler)``; an epoch's
    order is a pure function of (``seed``, epoch), and its position can be saved and restored.

    Each epoch draws one permutation of ``range(length)`` (numpy's ``default_rng([seed,
    epoch])``; ``shuffle=False``: index order), split over ranks as torch's
    ``DistributedSampler`` does (padded with its own first indices to a multiple of
    ``world_size``, rank ``r`` taking positions ``r, r + world_size, ...``), then cut into
    batches of ``batch_size``.

    Position: the sampler cannot see what the training loop has consumed (a DataLoader draws
    batches ahead, ``prefetch_factor`` per worker), so the loop calls ``advance()`` after each
    batch it consumes. ``state_dict()`` then holds the epoch and the batches consumed, and a
    new sampler given it by ``load_state_dict()`` yields exactly the epoch's remaining
    batches; an epoch whose batches were all consumed yields none. ``set_epoch(e)`` with a
    new ``e`` starts that epoch from its first batch; with the current epoch it keeps the
    position (so a restored run's loop may call it).

    Look-ahead: with ``ahead=k``, each batch is a :class:`Batch` whose ``ahead`` holds the
    ``k`` batches after it in this epoch, so that ``MapDataset`` can fetch a remote source's
    GOPs before they are asked for (its workers' own: every ``num_workers``-th). The batches
    are the same as without.

    Args:
        length: the dataset's length (items ``0 .. length - 1``).
        batch_size: items per batch.
        shuffle: a new permutation each epoch; False: index order.
        seed: base seed of every epoch's permutation.
        drop_last: drop the rank's last batch when it is shorter than ``batch_size``.
        rank, world_size: this process's place among the ranks (default: RANK / WORLD_SIZE
            environment variables, else 0 of 1).
        ahead: batches after each one that it names (``Batch.ahead``); 0: plain lists.

    Raises:
        ValueError: ``length`` < 1, ``batch_size`` < 1, ``ahead`` < 0, or ``rank`` outside
            ``world_size``.
    """

    def __init__(
        self,
        length: int,
        batch_size: int,
        *,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
        rank: int | None = None,
        world_size: int | None = None,
        ahead: int = 0,
    ) -> None:
        if length < 1 or batch_size < 1:
            raise ValueError(f"length and batch_size must be >= 1, got {length}, {batch_size}")
        if ahead < 0:
            raise ValueError(f"ahead must be >= 0, got {ahead}")
        self.ahead = ahead
        self.rank, self.world_size = world_from_env(rank, world_size)
        self.length = length
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.epoch = 0
        self.consumed = 0  # batches of this epoch the training loop has consumed

    def indices(self) -> np.ndarray:
        """This rank's item indices of the current epoch, in order (int64)."""
        if self.shuffle:
            order = np.random.default_rng([self.seed, self.epoch]).permutation(self.length)
        else:
            order = np.arange(self.length)
        padded = -(-self.length // self.world_size) * self.world_size
        order = np.resize(order, padded)  # repeats the first indices, as DistributedSampler
        return order[self.rank :: self.world_size].astype(np.int64)

    def __len__(self) -> int:
        """Batches of this rank in a whole epoch."""
        items = -(-self.length // self.world_size)
        return items // self.batch_size if self.drop_last else -(-items // self.batch_size)

    def __iter__(self):
        """The epoch's batches after the ``consumed`` ones (lists of int), fixed when called."""
        indices, size = self.indices().tolist(), self.batch_size
        starts = range(self.consumed * size, len(self) * size, size)
        batches = [indices[start : start + size] for start in starts]
        if self.ahead:
            batches = [Batch(b, batches[n + 1 : n + 1 + self.ahead]) for n, b in enumerate(batches)]
        return iter(batches)


class Batch(list):
    """A batch's item indices (a list of int) that also names the batches after it.

    Attributes:
        ahead: the next batches of the epoch, in order (lists of int).
    """

    def __init__(self, indices: list[int], ahead: list[list[int]]) -> None:
        super().__init__(indices)
        self.ahead = ahead

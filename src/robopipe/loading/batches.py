"""Batches whose frames are written once, into shared memory reused from batch to batch.

PyTorch's ``default_collate`` stacks a DataLoader worker's frames into shared memory newly
allocated for every batch, which the kernel zeroes page by page: on cr5 (640x480 RGB, 921 KB a
frame) that cost 0.9 CPU ms per sample, a quarter to a half of a random AV1 decode.
``MapDataset(..., batch_buffers=k)`` instead copies each frame, as soon as it is decoded, into
one of ``k`` batch buffers that each process allocates in shared memory on first use and then
reuses in turn (``BatchBuffers``), and :func:`collate` hands those buffers on as the batch's
frames. A decoded frame is dropped once copied, so a worker holds one item's decoded frames,
not a batch's, and it gives the freed heap pages back after each batch
(:func:`release_free_heap`).

Memory: a process keeps at most ``batch_buffer_mb`` MiB of buffers. A camera whose ``k``
buffers do not fit in it gets new shared memory for each batch instead (freed when the batch
is dropped, as ``default_collate``'s), so large batches (sarm windows: 32 x 8 frames of cr5,
236 MB) pay the zeroing again instead of keeping ``k`` of them per worker: the DataLoader
then holds only the batches in flight (about ``prefetch_factor`` per worker, plus the one
the loop holds), not ``k`` per worker all the time.

Ownership: a worker reuses a buffer ``k`` of its own batches later, while the main process may
still hold the batch that used it. The DataLoader holds at most ``prefetch_factor`` batches of
a worker that the training loop has not taken yet (with ``in_order=True``, its default: tasks go
to the workers in turn and come back in order), so with ``k >= prefetch_factor + 2`` the
batch the loop works on and the one before it stay intact; a loop that keeps older batches
(a list of batches, a queue) must ``clone()`` their frames, or leave ``batch_buffers`` at 0.
With ``pin_memory=True`` the DataLoader copies each batch into pinned memory as it arrives.

Batches in flight: a DataLoader with ``W`` workers holds up to ``W x prefetch_factor`` batches
the loop has not taken, and the loop holds the batch it works on and, while the next one
arrives, the one before. :func:`prefetch_factor_within` picks the largest ``prefetch_factor``
(1 or PyTorch's default 2) whose batches fit a memory budget, from a batch's frame bytes
(:func:`batch_frame_mb`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch.utils.data import default_collate, get_worker_info

from robopipe.transport import InlineTensors

if TYPE_CHECKING:
    from robopipe.formats.v30_reader import DatasetMeta


class FrameBatch(list):
    """The items of one batch (a list, as ``__getitems__`` returns), plus ``frames``:
    camera key -> the batch's frames, (B, C, H, W) or (B, T, C, H, W), whose rows the items'
    camera entries are views of."""

    def __init__(self, items: list[dict], frames: dict[str, torch.Tensor]) -> None:
        super().__init__(items)
        self.frames = frames


class BatchBuffers:
    """Per-process rings of ``count`` shared-memory buffers, one ring per camera key, holding
    at most ``budget_mb`` MiB in all.

    A camera gets a ring when ``count`` buffers of its batch fit in what the budget leaves;
    otherwise each of its batches gets new shared memory. Frames are stored as decoded,
    channels last ((B, [T,] H, W, C) memory; torchcodec's and Pillow's frames are (H, W, C)
    arrays seen as (C, H, W)), so a frame is copied with one ``memcpy``. A forked or spawned
    DataLoader worker starts with empty rings (buffers are never shared between writers).

    Args:
        count: buffers per ring (see the module docstring for the reuse rule).
        budget_mb: MiB of ring buffers a process keeps, all cameras together.

    Raises:
        ValueError: ``count`` < 1 or ``budget_mb`` < 0.
    """

    def __init__(self, count: int, budget_mb: float = 512.0) -> None:
        if count < 1:
            raise ValueError(f"batch_buffers must be >= 1 to use BatchBuffers, got {count}")
        if budget_mb < 0:
            raise ValueError(f"batch_buffer_mb must be >= 0, got {budget_mb}")
        self.count = count
        self.budget = int(budget_mb * 2**20)
        self._pid: int | None = None
        self._rings: dict[str, _Ring] = {}

    def __getstate__(self):
        return {**self.__dict__, "_pid": None, "_rings": {}}

    def take(self, key: str, size: int, frame: torch.Tensor) -> torch.Tensor:
        """A buffer for a batch of ``size`` frames of camera ``key`` shaped and typed as
        ``frame`` ((C, H, W) or (T, C, H, W), on the CPU): a (size, [T,] H, W, C) tensor in
        shared memory, the next of ``key``'s ring or new; fill it with :meth:`put`, see it
        with :func:`frames_view`. Its contents are undefined."""
        if self._pid != os.getpid():
            self._rings, self._pid = {}, os.getpid()
        shape = (size, *frame.movedim(-3, -1).shape)
        ring = self._rings.get(key)
        if ring is None or not ring.holds(shape, frame.dtype):
            self._rings.pop(key, None)
            nbytes = math.prod(shape) * frame.element_size()
            kept = sum(r.nbytes for r in self._rings.values())
            if kept + self.count * nbytes > self.budget:
                return _shared_empty(shape, frame.dtype)
            ring = self._rings[key] = _Ring(self.count, shape, frame.dtype, self.count * nbytes)
        return ring.next()[:size]

    @staticmethod
    def put(buffer: torch.Tensor, row: int, frame: torch.Tensor) -> None:
        """Copy ``frame`` ((C, H, W) or (T, C, H, W)) into row ``row`` of a :meth:`take`
        buffer."""
        buffer[row].copy_(frame.movedim(-3, -1))


class _Ring:
    """``count`` buffers of one shape and dtype (allocated on first use), taken in turn."""

    def __init__(self, count: int, shape: tuple[int, ...], dtype: torch.dtype, nbytes: int):
        self.shape, self.dtype, self.nbytes = shape, dtype, nbytes
        self.buffers: list[torch.Tensor | None] = [None] * count
        self.turn = 0

    def holds(self, shape: tuple[int, ...], dtype: torch.dtype) -> bool:
        return dtype == self.dtype and shape[1:] == self.shape[1:] and shape[0] <= self.shape[0]

    def next(self) -> torch.Tensor:
        slot = self.turn
        self.turn = (slot + 1) % len(self.buffers)
        if self.buffers[slot] is None:
            self.buffers[slot] = _shared_empty(self.shape, self.dtype)
        return self.buffers[slot]


def fill_batch(
    items: Iterable[dict],
    size: int,
    cameras: list[str],
    buffers: BatchBuffers,
    rows: Iterable[int] | None = None,
) -> FrameBatch:
    """A batch of up to ``size`` items, built as they come: each item's frames of
    ``cameras`` ((C, H, W) or (T, C, H, W) tensors) are copied into its row of the batch's
    buffer (:meth:`BatchBuffers.take`) and dropped at once, and the item's entries become
    views of that row; the heap they used is given back at the end
    (:func:`release_free_heap`). ``rows``: each item's row, in turn (a permutation of
    ``range(size)``, for items decoded out of order); None: 0, 1, ... Fewer than ``size``
    items give a batch of that many rows; none, an empty batch. ``MapDataset.__getitems__``
    and ``StreamingDataset`` (with ``batch_size``) build their batches with it."""
    placed, taken = {}, {}
    for row, item in zip(range(size) if rows is None else rows, items, strict=False):
        for cam in cameras:
            if cam not in taken:
                taken[cam] = buffers.take(cam, size, item[cam])
            buffers.put(taken[cam], row, item[cam])
            item[cam] = None  # the decoded frames go now; the view is set below
        placed[row] = item
    out = [placed[row] for row in range(len(placed))]
    frames = {cam: frames_view(buffer[: len(out)]) for cam, buffer in taken.items()}
    for row, item in enumerate(out):
        for cam, batch in frames.items():
            item[cam] = batch[row]
    release_free_heap()
    return FrameBatch(out, frames)


def release_free_heap() -> None:
    """Give the heap's free pages back to the kernel (glibc's ``malloc_trim(0)``; nothing
    elsewhere). After a batch, a DataLoader worker's decoded frames are freed, but glibc keeps
    the pages: 200 MiB per worker on cr5's sarm windows, 10-100 MiB once trimmed; a call
    takes about 0.4 CPU ms."""
    if _malloc_trim is not None:
        _malloc_trim(0)


def _load_malloc_trim():
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


_malloc_trim = _load_malloc_trim()


def batch_frame_mb(
    meta: DatasetMeta,
    delta_timestamps: dict[str, list[float]] | None,
    batch_size: int,
    image_dtype: str,
) -> float:
    """MiB of decoded frames in one batch: every camera of ``meta`` (a
    :class:`~robopipe.formats.v30_reader.DatasetMeta`) at its ``info.json`` shape
    (H, W, C), times its timesteps (``len(delta_timestamps[key])``, 1 without), times
    ``batch_size``, at 1 byte a value for ``uint8`` and 4 for ``float32``.

    cr5 (one 640x480 RGB camera), batch 32, uint8: 28.1 MiB for single frames, 225 MiB for
    sarm windows (8 timesteps).
    """
    value_bytes = 1 if image_dtype == "uint8" else 4
    values = 0
    for key in meta.camera_keys:
        steps = len((delta_timestamps or {}).get(key) or [0])
        values += math.prod(meta.info["features"][key]["shape"]) * steps
    return batch_size * values * value_bytes / 2**20


def prefetch_factor_within(budget_mb: float, batch_mb: float, workers: int) -> int:
    """The DataLoader ``prefetch_factor`` whose batches in flight fit ``budget_mb`` MiB:
    PyTorch's default 2 where ``(workers x 2 + 2) x batch_mb <= budget_mb`` (the 2 added: the
    batch the loop holds and the one before it), else 1, the least a DataLoader with workers
    takes.

    cr5, 2 workers, budget 1024 MiB: 2 for single frames (28.1 MiB a batch), 1 for sarm
    windows (225 MiB: 6 batches would be 1.35 GiB).

    Raises:
        ValueError: ``workers`` < 1 (without workers there is no prefetch), or ``budget_mb``
            or ``batch_mb`` < 0.
    """
    if workers < 1:
        raise ValueError(f"prefetch_factor needs DataLoader workers, got {workers}")
    if budget_mb < 0 or batch_mb < 0:
        raise ValueError(f"budget_mb and batch_mb must be >= 0, got {budget_mb}, {batch_mb}")
    return 2 if (workers * 2 + 2) * batch_mb <= budget_mb else 1


def frames_view(buffer: torch.Tensor) -> torch.Tensor:
    """A :meth:`BatchBuffers.take` buffer seen as (B, [T,] C, H, W) frames (in
    ``torch.channels_last`` memory format for 4-d batches)."""
    return buffer.movedim(-1, -3)


def _shared_empty(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """An uninitialised tensor in new shared memory (as ``default_collate`` allocates a
    worker's batch), without a private copy first."""
    size = math.prod(shape) * torch.empty(0, dtype=dtype).element_size()
    return torch.empty(0, dtype=dtype).set_(torch.UntypedStorage._new_shared(size), 0, shape)


def collate(batch: list[dict]) -> dict:
    """``torch.utils.data.default_collate``, except for a ``FrameBatch``
    (``MapDataset(..., batch_buffers=k).__getitems__``, ``StreamingDataset(...,
    batch_size=b, batch_buffers=k)``'s items): its frames are its buffers, not a new
    stack, and in a DataLoader worker the batch is an :class:`~robopipe.transport.InlineTensors`,
    so its small tensors travel to the main process inside the pickled batch (a few KB), not as
    one new shared-memory segment per key (each a file descriptor passed over a socket: 5 ms
    per batch of cr5's 7 keys).

    Pass it as the DataLoader's ``collate_fn``; on any other batch it is ``default_collate``.
    The batch is a dict with the items' keys in their order, tensors (B, ...) of the items'
    dtypes (as ``default_collate``), other values collated by ``default_collate``.
    """
    frames = getattr(batch, "frames", None)
    if not frames:
        return default_collate(batch)
    out = {}
    for key in batch[0]:
        if key in frames:
            out[key] = frames[key]
            continue
        values = [item[key] for item in batch]
        if torch.is_tensor(values[0]):
            out[key] = torch.from_numpy(np.stack([v.numpy() for v in values]))
        else:
            out[key] = default_collate(values)
    return out if get_worker_info() is None else InlineTensors(out)

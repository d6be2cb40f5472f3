"""Batches whose frames are written once, into shared memory reused from batch to batch.

PyTorch's ``default_collate`` stacks a DataLoader worker's frames into shared memory newly
allocated for every batch, which the kernel zeroes page by page: on cr5 (640x480 RGB, 921 KB a
frame) that cost 0.9 CPU ms per sample, a quarter to a half of a random AV1 decode.
``MapDataset(..., batch_buffers=k)`` instead copies each decoded frame once into one of ``k``
batch buffers that each process allocates in shared memory on first use and then reuses in
turn (``BatchBuffers``), and :func:`collate` hands those buffers on as the batch's frames.

Ownership: a worker reuses a buffer ``k`` of its own batches later, while the main process may
still hold the batch that used it. The DataLoader holds at most ``prefetch_factor`` batches of
a worker that the training loop has not taken yet (with ``in_order=True``, its default: tasks go
to the workers in turn and come back in order), so with ``k >= prefetch_factor + 2`` the
batch the loop works on and the one before it stay intact; a loop that keeps older batches
(a list of batches, a queue) must ``clone()`` their frames, or leave ``batch_buffers`` at 0.
With ``pin_memory=True`` the DataLoader copies each batch into pinned memory as it arrives.
"""

from __future__ import annotations

import os

import numpy as np
import torch
from torch.utils.data import default_collate, get_worker_info

from robopipe.transport import InlineTensors


class FrameBatch(list):
    """The items of one batch (a list, as ``__getitems__`` returns), plus ``frames``:
    camera key -> the batch's frames, (B, C, H, W) or (B, T, C, H, W), whose rows the items'
    camera entries are views of."""

    def __init__(self, items: list[dict], frames: dict[str, torch.Tensor]) -> None:
        super().__init__(items)
        self.frames = frames


class BatchBuffers:
    """Per-process rings of ``count`` shared-memory buffers, one ring per camera key.

    Frames are stored as decoded, channels last ((B, [T,] H, W, C) memory; torchcodec's
    and Pillow's frames are (H, W, C) arrays seen as (C, H, W)), so a frame is copied with one
    ``memcpy``; :meth:`put` returns the (B, [T,] C, H, W) view, in ``torch.channels_last``
    memory format for 4-d batches. A forked or spawned DataLoader worker starts with empty
    rings (buffers are never shared between writers).

    Args:
        count: buffers per ring (see the module docstring for the reuse rule).
    """

    def __init__(self, count: int) -> None:
        if count < 1:
            raise ValueError(f"batch_buffers must be >= 1 to use BatchBuffers, got {count}")
        self.count = count
        self._pid: int | None = None
        self._rings: dict[str, tuple[list[torch.Tensor | None], list[int]]] = {}

    def __getstate__(self):
        return {**self.__dict__, "_pid": None, "_rings": {}}

    def put(self, key: str, frames: list[torch.Tensor]) -> torch.Tensor:
        """Copy ``frames`` (each (C, H, W) or (T, C, H, W), on the CPU, one shape and dtype)
        into the next buffer of ``key``'s ring; return the buffer's (B, [T,] C, H, W) view."""
        if self._pid != os.getpid():
            self._rings, self._pid = {}, os.getpid()
        buffers, turn = self._rings.setdefault(key, ([None] * self.count, [0]))
        slot = turn[0]
        turn[0] = (slot + 1) % self.count
        shape = (len(frames), *frames[0].movedim(-3, -1).shape)
        buffer = buffers[slot]
        if (
            buffer is None
            or buffer.shape[0] < shape[0]
            or buffer.shape[1:] != shape[1:]
            or buffer.dtype != frames[0].dtype
        ):
            buffer = buffers[slot] = torch.empty(shape, dtype=frames[0].dtype).share_memory_()
        rows = buffer[: len(frames)]
        for row, frame in zip(rows, frames, strict=True):
            row.copy_(frame.movedim(-3, -1))
        return rows.movedim(-1, -3)


def collate(batch: list[dict]) -> dict:
    """``torch.utils.data.default_collate``, except for a ``FrameBatch``
    (``MapDataset(..., batch_buffers=k).__getitems__``): its frames are its buffers, not a new
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

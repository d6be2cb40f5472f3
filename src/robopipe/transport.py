"""How a DataLoader worker's batch travels to the main process: small tensors inside the pickle.

PyTorch pickles every CPU tensor a worker puts on its result queue by moving its storage into a
shared-memory segment and passing the segment's file descriptor, which the main process fetches
over a Unix socket from the worker (``torch.multiprocessing.reductions.reduce_storage``, file
descriptor strategy, the default on Linux). That costs the main process a round trip per
tensor, whatever its size: on robomimic's Lift file (batches of 64 windows of 10 steps, 4
tensors: actions, rewards, dones, state) it capped robomimic's and robopipe's loaders alike at
about 17,000 samples/s on 2 workers (3.7 ms per batch), while one process alone gathered
100,000 samples/s.

:class:`InlineTensors` is a dict whose tensors of at most :data:`INLINE_BYTES` are pickled as
numpy arrays, inside the pickled bytes; larger ones (frames) keep the shared-memory path,
which copies nothing. Unpickled, it is a plain ``dict`` (nested dicts too) of tensors with the
same values, dtypes and shapes.
"""

from __future__ import annotations

import numpy as np
import torch

INLINE_BYTES = 256 * 1024
"""Largest tensor (bytes) pickled inline; a 256 KiB copy through the worker's pipe costs
about what the main process spends fetching one file descriptor."""


class InlineTensors(dict):
    """A dict (e.g. one item of a batch that ``default_collate`` will stack: it copies the
    first item's type for the batch) that pickles its small tensors inline and unpickles as a
    plain ``dict``; see the module docstring. Nested dicts and lists are walked; other values
    pickle as usual."""

    def __copy__(self) -> InlineTensors:
        return type(self)(self)

    def __reduce__(self):
        return dict, (_inline(dict(self)),)


def _inline(value):
    if isinstance(value, dict):
        return {key: _inline(v) for key, v in value.items()}
    if isinstance(value, list):
        return [_inline(v) for v in value]
    if (
        isinstance(value, torch.Tensor)
        and value.device.type == "cpu"
        and value.dtype != torch.bfloat16  # numpy has no bfloat16
        and not value.requires_grad
        and value.nbytes <= INLINE_BYTES
    ):
        return _Inline(value.numpy())
    return value


class _Inline:
    """A small tensor's numpy array on its way through a pickle; unpickles as the tensor."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __reduce__(self):
        return torch.from_numpy, (self.array,)

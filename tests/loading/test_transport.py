"""InlineTensors: a worker's small tensors travel inside the pickle, and arrive as plain dicts."""

import copy
import pickle
from multiprocessing.reduction import ForkingPickler

import torch
import torch.multiprocessing  # noqa: F401 (registers its tensor reducers with ForkingPickler)

from robopipe.transport import INLINE_BYTES, InlineTensors


def _batch():
    return InlineTensors(
        actions=torch.arange(12, dtype=torch.float32).reshape(3, 4),
        obs={
            "state": torch.ones(3, 2, dtype=torch.float64),
            "image": torch.zeros(INLINE_BYTES + 1, dtype=torch.uint8),
        },
        names=["a", "b", "c"],
    )


def test_small_tensors_skip_shared_memory_and_arrive_as_plain_dicts():
    batch = _batch()
    data = ForkingPickler.dumps(batch)
    assert not batch["actions"].is_shared()  # a plain dict's tensor is moved to shared memory
    assert batch["obs"]["image"].is_shared()  # large ones keep PyTorch's shared-memory path
    out = pickle.loads(data)
    assert type(out) is dict and type(out["obs"]) is dict
    assert out["actions"].dtype == torch.float32 and torch.equal(out["actions"], batch["actions"])
    assert out["obs"]["state"].dtype == torch.float64 and torch.equal(
        out["obs"]["state"], batch["obs"]["state"]
    )
    assert torch.equal(out["obs"]["image"], batch["obs"]["image"]) and out["names"] == [
        "a",
        "b",
        "c",
    ]


def test_plain_dict_tensors_do_go_through_shared_memory():
    plain = dict(_batch())
    ForkingPickler.dumps(plain)
    assert plain["actions"].is_shared()


def test_copy_keeps_the_type_so_default_collate_batches_are_inline_too():
    items = [InlineTensors(x=torch.tensor([i])) for i in range(4)]
    assert type(copy.copy(items[0])) is InlineTensors
    batch = torch.utils.data.default_collate(items)
    assert type(batch) is InlineTensors and torch.equal(batch["x"], torch.arange(4)[:, None])

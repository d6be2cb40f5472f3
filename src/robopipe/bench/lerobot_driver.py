"""Measure a peer's loader (lerobot 0.6.1's, lerobot-lancedb's); run by the peer interpreter.

    <peer python> lerobot_driver.py '<JSON arguments>'

It imports lerobot, lerobot-lancedb and torch from that interpreter and nothing from robopipe
except the numpy-only ``measure.py`` next to it (loaded by path), so every loader is measured
by the same code. Arguments: root (a local v3.0 folder, or the local Lance layout), url (what
the loader reads: ``root``, an ``s3://`` URI of a Lance layout, or ``hf://datasets/<repo>``),
storage_options (LanceDBDataset's object-store options), revision (of an ``hf`` repo),
dataset (``module:class``, the loader's ``robopipe.bench.registry.LoaderSpec.dataset``),
stream (an iterable dataset), delta_timestamps, video_keys, batch_size, workers, image_dtype,
warmup_batches, steady_s, probe_samples, tolerance_s, seed, episodes (the episodes read,
each loader's ``episodes=``; None: all), check_items (items kept for the
equality check), start_barrier (optional: ``{"folder", "rank", "world_size"}`` of
``measure.wait_for_ranks``, where the ranks of a multi-node scenario wait for each other before
measuring), out (the JSON file written: the measurements of
``measure.measure_throughput`` and ``measure.measure_latency``), items_out (``torch.save``
of the kept items: a list of dicts of tensors, strings and numbers).
"""

import functools
import importlib
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import measure  # noqa: E402  (numpy only)
import numpy as np  # noqa: E402
import torch  # noqa: E402

REPO_ID = "local/robopipe-bench"
LANCE = "lerobot_lancedb:LanceDBDataset"


def make_dataset(args: dict):
    """The peer's dataset: ``LanceDBDataset(root=url)``; ``StreamingLeRobotDataset`` of a
    local root, or of an ``hf://datasets/<repo>`` url (through ``HF_ENDPOINT``);
    ``LeRobotDataset`` of a local root (torchcodec); each given ``episodes=``."""
    module, name = args["dataset"].split(":")
    dataset_cls = getattr(importlib.import_module(module), name)
    common = dict(
        delta_timestamps=args["delta_timestamps"],
        tolerance_s=args["tolerance_s"],
        return_uint8=args["image_dtype"] == "uint8",
        episodes=args["episodes"],
    )
    if args["dataset"] == LANCE:
        return dataset_cls(root=args["url"], storage_options=args["storage_options"], **common)
    if args["stream"]:
        if args["url"].startswith("hf://datasets/"):
            repo_id = args["url"].removeprefix("hf://datasets/").split("@")[0]
            return dataset_cls(repo_id, revision=args["revision"], seed=args["seed"], **common)
        return dataset_cls(REPO_ID, root=args["root"], seed=args["seed"], **common)
    return dataset_cls(REPO_ID, root=args["root"], video_backend="torchcodec", **common)


def data_loader(ds, args: dict):
    """A DataLoader of ``ds`` as a training loop would build it (shuffled map-style; Lance's
    workers started by ``lance_mp_context()``, as lerobot-lancedb's README says)."""
    stream, workers = args["stream"], args["workers"]
    context = None
    if args["dataset"] == LANCE and workers:
        from lerobot_lancedb import lance_mp_context

        context = lance_mp_context()
    return torch.utils.data.DataLoader(
        ds,
        batch_size=args["batch_size"],
        shuffle=not stream,
        generator=None if stream else torch.Generator().manual_seed(args["seed"]),
        num_workers=workers,
        persistent_workers=workers > 0,
        multiprocessing_context=context,
    )


def kept(item: dict) -> dict:
    """An item as saved for the equality check: tensors detached to CPU, others as they are."""
    return {k: v.detach().cpu() if isinstance(v, torch.Tensor) else v for k, v in item.items()}


def main() -> None:
    args = json.loads(sys.argv[1])
    ds = make_dataset(args)
    stream = args["stream"]
    loader = data_loader(ds, args)
    barrier = args.get("start_barrier")
    result = measure.measure_throughput(
        lambda loader=loader: loader,
        video_keys=args["video_keys"],
        warmup_batches=args["warmup_batches"],
        steady_s=args["steady_s"],
        start_barrier=functools.partial(measure.wait_for_ranks, **barrier) if barrier else None,
    )
    del loader
    probe = make_dataset(args)
    if stream:
        items = iter(probe)
    else:
        indices = np.random.default_rng(args["seed"]).integers(0, len(probe), len(probe))
        items = (probe[int(i)] for i in indices)
    samples = []

    def keeping(items):
        for item in items:
            if len(samples) < args["check_items"]:
                samples.append(kept(item))
            yield item

    result.update(measure.measure_latency(keeping(items), args["probe_samples"]))
    torch.save(samples, args["items_out"])
    Path(args["out"]).write_text(json.dumps(result))


if __name__ == "__main__":
    main()
    # the results are written; lancedb's native threads can crash the interpreter's shutdown
    # (as in robopipe/copies/lance_verify.py): exit without finalising
    sys.stdout.flush()
    os._exit(0)

"""Measure lerobot 0.6.1's loaders; run by the interpreter that has lerobot installed.

    <lerobot python> lerobot_driver.py '<JSON arguments>'

It imports lerobot and torch from that interpreter and nothing from robopipe except the
standard-library-only ``measure.py`` next to it (loaded by path), so both loaders are measured by
the same code. Arguments: root, dataset (``module:class``, the loader's
``robopipe.bench.registry.LoaderSpec.dataset``), stream (an iterable dataset),
delta_timestamps, video_keys, batch_size, workers, image_dtype, warmup_batches, steady_s,
probe_samples, tolerance_s, seed, out (the JSON file written: the measurements of
``measure.measure_throughput`` and ``measure.measure_latency``).
"""

import importlib
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import measure  # noqa: E402  (standard library only)
import numpy as np  # noqa: E402
import torch  # noqa: E402

REPO_ID = "local/robopipe-bench"


def make_dataset(args: dict):
    """lerobot's dataset of ``args["root"]``: the class ``args["dataset"]`` names
    (``LeRobotDataset``, or ``StreamingLeRobotDataset`` when ``args["stream"]``)."""
    module, name = args["dataset"].split(":")
    dataset_cls = getattr(importlib.import_module(module), name)
    common = dict(
        root=args["root"],
        delta_timestamps=args["delta_timestamps"],
        tolerance_s=args["tolerance_s"],
        return_uint8=args["image_dtype"] == "uint8",
    )
    if args["stream"]:
        return dataset_cls(REPO_ID, seed=args["seed"], **common)
    return dataset_cls(REPO_ID, video_backend="torchcodec", **common)


def main() -> None:
    args = json.loads(sys.argv[1])
    ds = make_dataset(args)
    stream = args["stream"]
    loader = torch.utils.data.DataLoader(
        ds,
        batch_size=args["batch_size"],
        shuffle=not stream,
        generator=None if stream else torch.Generator().manual_seed(args["seed"]),
        num_workers=args["workers"],
        persistent_workers=args["workers"] > 0,
    )
    result = measure.measure_throughput(
        lambda loader=loader: loader,
        video_keys=args["video_keys"],
        warmup_batches=args["warmup_batches"],
        steady_s=args["steady_s"],
    )
    del loader
    probe = make_dataset(args)
    if stream:
        items = iter(probe)
    else:
        indices = np.random.default_rng(args["seed"]).integers(0, len(probe), len(probe))
        items = (probe[int(i)] for i in indices)
    result.update(measure.measure_latency(items, args["probe_samples"]))
    Path(args["out"]).write_text(json.dumps(result))


if __name__ == "__main__":
    main()

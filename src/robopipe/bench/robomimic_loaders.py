"""Benchmark the robomimic HDF5 loader like the v3.0 loaders (``robopipe.bench.runner``).

Scenario loaders ``robomimic_hdf5_none``, ``robomimic_hdf5_low_dim`` and
``robomimic_hdf5_all`` read the dataset's robomimic file with that cache mode
(:class:`~robopipe.robomimic.dataset.RobomimicDataset`); the frame mode gives the same
``delta_timestamps`` as for the v3.0 loaders. The file and its conversion options come from
the robomimic plan next to the converted dataset (``results/{dataset}/robomimic/plan.json``
for ``results/{dataset}/v3.0``), so items have the features of the converted dataset.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, DistributedSampler, RandomSampler

from robopipe.bench.measure import measure_latency, measure_throughput
from robopipe.bench.registry import get_loader
from robopipe.layout import RESULTS_DIR, ROBO_FILE
from robopipe.loading.windows import mode_delta_timestamps
from robopipe.robomimic.dataset import RobomimicDataset
from robopipe.robomimic.hdf5 import RobomimicFile

PLAN_PATH = "robomimic/plan.json"  # relative to results/{dataset}, next to v3.0/
ROBO_PATH = ROBO_FILE.removeprefix(RESULTS_DIR + "/")  # relative to results/{dataset}


def plan_path(root: str | Path) -> Path:
    """The robomimic plan of the converted dataset at ``root`` (``results/{dataset}/v3.0``).

    Raises:
        ValueError: there is none (the dataset was not converted from a robomimic file).
    """
    path = Path(root).parent / PLAN_PATH
    if not path.is_file():
        raise ValueError(f"no robomimic plan {path}: the dataset has no robomimic source")
    return path


def hdf5_path(root: str | Path) -> str:
    """The robomimic file of the converted dataset at ``root`` (from its plan).

    Raises:
        ValueError: there is no robomimic plan (see :func:`plan_path`).
    """
    return json.loads(plan_path(root).read_text(encoding="utf-8"))["hdf5"]


def robo_path(root: str | Path) -> Path:
    """The robo archive (:mod:`robopipe.robomimic.robo`) of the robomimic file of the
    converted dataset at ``root`` (``results/{dataset}/v3.0``); it may not exist yet."""
    return Path(root).parent / ROBO_PATH


def open_dataset(plan_file: str | Path, cache_mode: str, settings, mode: str) -> RobomimicDataset:
    """The loader of a robomimic plan's file, with a scenario's frame mode and settings
    (``robopipe.bench.runner.Settings``: ``windows``, ``image_dtype``, ``tolerance_s``)."""
    plan = json.loads(Path(plan_file).read_text(encoding="utf-8"))
    options = plan["options"]
    source = RobomimicFile(
        plan["hdf5"], name=plan["dataset"], state=options["state"], task=options["task"],
        fps=options["fps"],
    )  # fmt: skip
    delta = mode_delta_timestamps(mode, source.video_keys, source.fps, settings.windows)
    return RobomimicDataset(
        plan["hdf5"],
        cache_mode=cache_mode,
        delta_timestamps=delta,
        name=plan["dataset"],
        state=options["state"],
        task=options["task"],
        fps=options["fps"],
        image_dtype=settings.image_dtype,
        tolerance_s=settings.tolerance_s,
    )


def run_robomimic(
    scenario,
    root: str | Path,
    settings,
    rank: int,
    world_size: int,
    start_barrier: Callable[[], object] | None = None,
) -> dict:
    """Measure a ``robomimic_hdf5_<cache mode>`` scenario of the dataset converted to ``root``
    (its robomimic file: :func:`plan_path`); return the runner's measured dict.
    ``start_barrier``: called before measuring (the ranks' barrier,
    :func:`robopipe.bench.measure.measure_throughput`).

    Throughput over the steady window and per-sample latency are measured with
    ``robopipe.bench.measure`` as for the v3.0 loaders; ``frames`` counts camera frames
    read. Nothing is decoded, so ``fetch_share``, ``decode_share``, ``decoder_cache`` and
    ``cpu_fallback`` are None.

    Raises:
        ValueError: decode ``cuda`` (there is no video to decode), a remote source
            (:meth:`~robopipe.bench.registry.LoaderSpec.check`), an unknown loader, or no
            robomimic plan.
    """
    spec = get_loader(scenario.loader)
    if not spec.robomimic_only or spec.sequence:
        raise ValueError(f"{scenario.name}: {spec.name} is not a robomimic HDF5 loader")
    spec.check(scenario)
    ds = open_dataset(plan_path(root), spec.cache_mode, settings, scenario.mode)
    if world_size > 1:
        sampler = DistributedSampler(
            ds, num_replicas=world_size, rank=rank, shuffle=True, seed=settings.seed
        )
    else:
        sampler = RandomSampler(ds, generator=torch.Generator().manual_seed(settings.seed))
    loader = DataLoader(
        ds,
        batch_size=settings.batch_size,
        sampler=sampler,
        num_workers=scenario.workers,
        persistent_workers=scenario.workers > 0,
    )
    measured = measure_throughput(
        lambda loader=loader: loader,
        video_keys=ds.file.video_keys,
        warmup_batches=settings.warmup_batches,
        steady_s=settings.steady_s,
        start_barrier=start_barrier,
    )
    del loader
    indices = np.random.default_rng(settings.seed).integers(0, len(ds), len(ds))
    measured.update(measure_latency((ds[int(i)] for i in indices), settings.probe_samples))
    measured.update(
        fetch_share=None, decode_share=None, decoder_cache=None, cpu_fallback=None, device="cpu"
    )
    return measured

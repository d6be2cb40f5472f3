"""Benchmark robomimic's ``SequenceDataset`` and robopipe's drop-in side by side.

Scenario loaders ``robomimic_seq_<mode>`` run robomimic 0.3.0's own class (installed with
``pip install --no-deps robomimic==0.3.0 termcolor``; ``tools/install.sh --test`` does it),
``robopipe_seq_<mode>`` :class:`robopipe.robomimic.SequenceDataset`, on the dataset's
robomimic file (its plan, :func:`robopipe.bench.robomimic_loaders.plan_path`), with
``hdf5_cache_mode`` ``<mode>`` (``none`` is robomimic's None); ``robopipe_seq_lru`` and
``robopipe_seq_compressed`` run the paper's caches (:mod:`robopipe.robomimic.strategies`;
its LRU cache holds the ``robomimic_lru_mb`` setting), and ``robopipe_seq_tar`` streams the
paper's robo archive of the file (:mod:`robopipe.robomimic.robo`; rule ``robomimic_robo``
writes it to ``results/{dataset}/robomimic/robo.tar``) through a shuffle buffer of
``shuffle_buffer`` items. All get the same arguments: every observation key of the file,
``actions``/``rewards``/``dones``, ``load_next_obs`` when the file has ``next_obs``, and from
the scenario's frame mode (:func:`robopipe.bench.scenarios.parse_sequence_mode`) a sequence
length, optionally a batch size and an image size the robopipe loaders downscale images to
(e.g. ``robomimic_seq_all_local_seq10_cpu_w2_n1``, ``robopipe_seq_tar_local_seq50b1r28_cpu_w0_n1``).
"""

from __future__ import annotations

import contextlib
import io
import itertools
from pathlib import Path

import h5py
import numpy as np
from torch.utils.data import DataLoader, Sampler

from robopipe.bench.measure import measure_latency, measure_throughput, random_items
from robopipe.bench.registry import LOADERS as REGISTRY
from robopipe.bench.registry import LoaderSpec, get_loader
from robopipe.bench.robomimic_loaders import hdf5_path, robo_path
from robopipe.bench.scenarios import parse_sequence_mode
from robopipe.robomimic.images import is_image
from robopipe.robomimic.robo import RoboTarDataset
from robopipe.robomimic.sequence import SequenceDataset

LOADERS = tuple(name for name, spec in REGISTRY.items() if spec.sequence)
DATASET_KEYS = ("actions", "rewards", "dones")


def file_keys(hdf5: str | Path) -> tuple[list[str], list[str], bool]:
    """(low-dimensional observation keys, image keys, has next_obs) of the file's first demo;
    images are uint8 observations of per-step shape (H, W, C)."""
    with h5py.File(hdf5, "r") as h5:
        demo = h5["data"][next(iter(h5["data"]))]
        images = [k for k, v in demo["obs"].items() if is_image(v.dtype, v.shape[1:])]
        low_dim = [k for k in demo["obs"] if k not in images]
        return low_dim, images, "next_obs" in demo


def open_sequence_dataset(
    loader: str, hdf5: str | Path, seq_length: int, *, robo: str | Path | None = None,
    image_size: int | None = None, cache_size_mb: float | None = None, **kwargs,
):  # fmt: skip
    """The ``*_seq_*`` loader's dataset of ``hdf5`` (arguments in the module docstring;
    ``kwargs`` override them, e.g. ``load_next_obs``, or add ``RoboTarDataset``'s, e.g.
    ``shuffle_buffer``).

    Args:
        robo: the robo archive of ``hdf5`` (``robopipe_seq_tar`` only, which needs it).
        image_size: downscale images to ``image_size`` x ``image_size`` (robopipe loaders).
        cache_size_mb: the LRU cache's size (``robopipe_seq_lru``; default 256).

    Raises:
        ValueError: an unknown loader, robomimic 0.3.0 is not installed, an image size for
            robomimic's own loader, or ``robopipe_seq_tar`` without ``robo``.
    """
    spec = _sequence_loader(loader)
    low_dim, images, next_obs = file_keys(hdf5)
    arguments = dict(
        obs_keys=low_dim + images,
        dataset_keys=DATASET_KEYS,
        seq_length=seq_length,
        load_next_obs=next_obs,
    )
    arguments.update(kwargs)
    if spec.cache_mode is not None:
        arguments.setdefault(
            "hdf5_cache_mode", None if spec.cache_mode == "none" else spec.cache_mode
        )
    if spec.peer:
        return _robomimic_dataset(spec, hdf5, low_dim, images, arguments, image_size)
    if image_size is not None:
        arguments["image_size"] = (image_size, image_size)
    if spec.sized_cache:
        arguments["cache_size_mb"] = cache_size_mb or 256
    if spec.robo_archive:
        if robo is None:
            raise ValueError(f"{loader} reads the file's robo archive: give its path")
        return spec.dataset_class()(robo, **arguments)
    return spec.dataset_class()(hdf5, **arguments)


def _sequence_loader(loader: str) -> LoaderSpec:
    if loader not in LOADERS:
        raise ValueError(f"loader {loader!r} is not one of {LOADERS}")
    return get_loader(loader)


def _robomimic_dataset(spec, hdf5, low_dim, images, arguments, image_size):
    # robomimic 0.3.0's own SequenceDataset, after its global observation specs are set
    if image_size is not None:
        raise ValueError(f"{spec.name}: robomimic's own SequenceDataset cannot downscale images")
    try:
        from robomimic.utils import obs_utils

        dataset_cls = spec.dataset_class()
    except ImportError as exc:
        raise ValueError(
            f"{spec.name} needs robomimic 0.3.0: pip install --no-deps robomimic==0.3.0 "
            f"termcolor ({exc})"
        ) from None
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        obs_utils.initialize_obs_utils_with_obs_specs({"obs": {"low_dim": low_dim, "rgb": images}})
        return dataset_cls(str(hdf5), **arguments)


def item_demos(dataset) -> np.ndarray:
    """int64 (len(dataset),): the demo (position in ``dataset.demos``) of every item."""
    if isinstance(dataset, SequenceDataset):
        return dataset.item_demos
    position = {demo: i for i, demo in enumerate(dataset.demos)}
    return np.array([position[dataset._index_to_demo_id[i]] for i in range(len(dataset))])


class Permutation(Sampler):
    """A new random permutation of ``range(size)`` each epoch, kept as ``order``."""

    def __init__(self, size: int, seed: int) -> None:
        self.size, self.rng, self.order = size, np.random.default_rng(seed), np.arange(size)

    def __iter__(self):
        self.order = self.rng.permutation(self.size)
        return iter(self.order.tolist())

    def __len__(self) -> int:
        return self.size


def batches(dataset, *, batch_size: int, workers: int, seed: int, image_keys: list[str]):
    """``make_loader()`` for :func:`~robopipe.bench.measure.measure_throughput`: each call a
    shuffled epoch of one DataLoader over ``dataset`` (persistent workers), whose batches
    carry ``index`` and ``episode_index`` (from the epoch's permutation, or a
    ``RoboTarDataset``'s ``with_index`` keys) and ``obs/<camera>`` (B, T, H, W, C) next to
    robomimic's batch under ``batch``."""
    if isinstance(dataset, RoboTarDataset):
        if not dataset.with_index:
            raise ValueError("a RoboTarDataset benchmark needs with_index=True")
        sampler, demos = None, None
    else:
        sampler, demos = Permutation(len(dataset), seed), item_demos(dataset)
    loader = DataLoader(
        dataset, batch_size=batch_size, sampler=sampler, num_workers=workers,
        persistent_workers=workers > 0,
    )  # fmt: skip

    def make_loader():
        epoch = iter(loader)  # draws the epoch's permutation
        for start, batch in zip(itertools.count(0, batch_size), epoch):
            if sampler is None:
                index, episodes = batch.pop("index").numpy(), batch.pop("demo").numpy()
            else:
                index = sampler.order[start : start + batch_size]
                episodes = demos[index]
            yield {
                "index": index,
                "episode_index": episodes,
                **{f"obs/{key}": batch["obs"][key] for key in image_keys},
                "batch": batch,
            }

    return make_loader


def run_sequence(scenario, root: str | Path, settings) -> dict:
    """Measure a ``*_seq_*`` scenario of the dataset converted to ``root`` (its robomimic
    file and robo archive: :func:`~robopipe.bench.robomimic_loaders.hdf5_path`,
    :func:`~robopipe.bench.robomimic_loaders.robo_path`); return the runner's measured dict
    (``frames`` counts image observations of ``obs``; nothing is decoded, so the decode fields
    are None; ``batch_size`` is the frame mode's, else ``settings.batch_size``).

    Raises:
        ValueError: a remote source, decode ``cuda``, more than one node
            (:meth:`~robopipe.bench.registry.LoaderSpec.check`), or see
            :func:`open_sequence_dataset` and :func:`~robopipe.bench.scenarios.parse_sequence_mode`.
    """
    spec = _sequence_loader(scenario.loader)
    spec.check(scenario)
    mode = parse_sequence_mode(scenario.mode)
    batch_size = mode.batch_size or settings.batch_size
    hdf5 = hdf5_path(root)
    tar = spec.robo_archive
    extra = {"shuffle_buffer": settings.shuffle_buffer, "seed": settings.seed, "with_index": True}
    dataset = open_sequence_dataset(
        scenario.loader, hdf5, mode.seq_length, robo=robo_path(root) if tar else None,
        image_size=mode.image_size, cache_size_mb=settings.robomimic_lru_mb,
        **(extra if tar else {}),
    )  # fmt: skip
    image_keys = file_keys(hdf5)[1]
    measured = measure_throughput(
        batches(
            dataset, batch_size=batch_size, workers=scenario.workers,
            seed=settings.seed, image_keys=image_keys,
        ),
        video_keys=[f"obs/{key}" for key in image_keys],
        warmup_batches=settings.warmup_batches,
        steady_s=settings.steady_s,
    )  # fmt: skip
    items = iter(dataset) if spec.stream else random_items(dataset, settings.seed)
    measured.update(measure_latency(items, settings.probe_samples))
    measured.update(
        fetch_share=None, decode_share=None, decoder_cache=None, cpu_fallback=None, device="cpu",
        batch_size=batch_size,
    )  # fmt: skip
    return measured

"""Benchmark robomimic's ``SequenceDataset`` and robopipe's drop-in side by side.

Scenario loaders ``robomimic_seq_<mode>`` run robomimic 0.3.0's own class (installed with
``pip install --no-deps robomimic==0.3.0 termcolor``; ``tools/install.sh --test`` does it),
``robopipe_seq_<mode>`` :class:`robopipe.robomimic.SequenceDataset`, on the dataset's
robomimic file (its plan, :func:`robopipe.bench.robomimic_loaders.plan_path`), with
``hdf5_cache_mode`` ``<mode>`` (``none`` is robomimic's None); ``robopipe_seq_lru`` and
``robopipe_seq_compressed`` run the paper's caches (:mod:`robopipe.robomimic.strategies`;
its LRU cache holds the ``robomimic_lru_mb`` setting). All get the same arguments: every
observation key of the file, ``actions``/``rewards``/``dones``, ``load_next_obs`` when
the file has ``next_obs``, and a sequence length from the scenario's frame mode: ``single`` is
1, ``seq<N>`` is N (e.g. ``robomimic_seq_all_local_seq10_cpu_w2_n1``).
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import h5py
import numpy as np
from torch.utils.data import DataLoader, Sampler

from robopipe.bench.measure import measure_latency, measure_throughput
from robopipe.robomimic.sequence import SequenceDataset
from robopipe.robomimic.strategies import CompressedSequenceDataset, LruSequenceDataset

KINDS = ("robomimic_seq_", "robopipe_seq_")
MODES = ("none", "low_dim", "all")
STRATEGIES = ("lru", "compressed")  # robopipe.robomimic.strategies, robopipe only
LOADERS = (
    *(kind + mode for kind in KINDS for mode in MODES),
    *("robopipe_seq_" + strategy for strategy in STRATEGIES),
)
DATASET_KEYS = ("actions", "rewards", "dones")


def seq_length_of(mode: str) -> int:
    """The sequence length of a frame mode: ``single`` -> 1, ``seq<N>`` -> N.

    Raises:
        ValueError: any other mode.
    """
    if mode == "single":
        return 1
    if mode.startswith("seq") and mode[3:].isdigit() and int(mode[3:]) >= 1:
        return int(mode[3:])
    raise ValueError(f"frame mode {mode!r}: robomimic loaders take single or seq<N>")


def file_keys(hdf5: str | Path) -> tuple[list[str], list[str], bool]:
    """(low-dimensional observation keys, image keys, has next_obs) of the file's first demo;
    images are uint8 observations of per-step shape (H, W, C)."""
    with h5py.File(hdf5, "r") as h5:
        demo = h5["data"][next(iter(h5["data"]))]
        images = [k for k, v in demo["obs"].items() if v.dtype == np.uint8 and v.ndim == 4]
        low_dim = [k for k in demo["obs"] if k not in images]
        return low_dim, images, "next_obs" in demo


def open_sequence_dataset(loader: str, hdf5: str | Path, seq_length: int, **kwargs):
    """The ``robomimic_seq_<mode>`` or ``robopipe_seq_<mode>`` dataset of ``hdf5`` (arguments
    in the module docstring; ``kwargs`` override them, e.g. ``load_next_obs``;
    ``cache_size_mb`` is used by ``robopipe_seq_lru`` only).

    Raises:
        ValueError: an unknown loader, or robomimic 0.3.0 is not installed.
    """
    if loader not in LOADERS:
        raise ValueError(f"loader {loader!r} is not one of {LOADERS}")
    mode = loader.rsplit("_seq_", 1)[1]
    low_dim, images, next_obs = file_keys(hdf5)
    arguments = dict(
        hdf5_path=str(hdf5),
        obs_keys=low_dim + images,
        dataset_keys=DATASET_KEYS,
        seq_length=seq_length,
        load_next_obs=next_obs,
    )
    arguments.update(kwargs)
    cache_size_mb = arguments.pop("cache_size_mb", None)
    if mode == "lru":
        return LruSequenceDataset(**arguments, cache_size_mb=cache_size_mb or 256)
    if mode == "compressed":
        return CompressedSequenceDataset(**arguments)
    arguments.setdefault("hdf5_cache_mode", None if mode == "none" else mode)
    if loader.startswith("robopipe_"):
        return SequenceDataset(**arguments)
    try:
        from robomimic.utils import obs_utils
        from robomimic.utils.dataset import SequenceDataset as RobomimicSequenceDataset
    except ImportError as exc:
        raise ValueError(
            f"{loader} needs robomimic 0.3.0: pip install --no-deps robomimic==0.3.0 "
            f"termcolor ({exc})"
        ) from None
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        obs_utils.initialize_obs_utils_with_obs_specs({"obs": {"low_dim": low_dim, "rgb": images}})
        return RobomimicSequenceDataset(**arguments)


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
    carry ``index`` and ``episode_index`` (from the epoch's permutation) and ``obs/<camera>``
    (B, T, H, W, C) next to robomimic's batch under ``batch``."""
    demos = item_demos(dataset)
    sampler = Permutation(len(dataset), seed)
    loader = DataLoader(
        dataset, batch_size=batch_size, sampler=sampler, num_workers=workers,
        persistent_workers=workers > 0,
    )  # fmt: skip

    def make_loader():
        epoch = iter(loader)  # draws the epoch's permutation
        order = sampler.order
        for start, batch in zip(range(0, len(order), batch_size), epoch, strict=True):
            index = order[start : start + batch_size]
            yield {
                "index": index,
                "episode_index": demos[index],
                **{f"obs/{key}": batch["obs"][key] for key in image_keys},
                "batch": batch,
            }

    return make_loader


def run_sequence(scenario, hdf5: str | Path, settings) -> dict:
    """Measure a ``robomimic_seq_*`` / ``robopipe_seq_*`` scenario on ``hdf5``; return the
    runner's measured dict (``frames`` counts image observations of ``obs``; nothing is
    decoded, so the decode fields are None).

    Raises:
        ValueError: a remote source, decode ``cuda``, more than one rank, or see
            :func:`open_sequence_dataset` and :func:`seq_length_of`.
    """
    if scenario.decode != "cpu" or scenario.source != "local" or scenario.nodes != 1:
        raise ValueError(f"{scenario.name}: robomimic loaders read a local file, cpu, one node")
    dataset = open_sequence_dataset(
        scenario.loader, hdf5, seq_length_of(scenario.mode), cache_size_mb=settings.robomimic_lru_mb
    )
    image_keys = file_keys(hdf5)[1]
    measured = measure_throughput(
        batches(
            dataset, batch_size=settings.batch_size, workers=scenario.workers,
            seed=settings.seed, image_keys=image_keys,
        ),
        video_keys=[f"obs/{key}" for key in image_keys],
        warmup_batches=settings.warmup_batches,
        steady_s=settings.steady_s,
    )  # fmt: skip
    indices = np.random.default_rng(settings.seed).integers(0, len(dataset), len(dataset))
    measured.update(measure_latency((dataset[int(i)] for i in indices), settings.probe_samples))
    measured.update(
        fetch_share=None, decode_share=None, decoder_cache=None, cpu_fallback=None, device="cpu"
    )
    return measured

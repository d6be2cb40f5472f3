"""The benchmark's loaders by name: what each one reads with, whose it is, what it needs.

A scenario's ``{loader}`` (:mod:`robopipe.bench.scenarios`) is a key of :data:`LOADERS`. The
runner (:mod:`robopipe.bench.runner`) chooses how to measure a loader from its
:class:`LoaderSpec`, the workflow which scenarios run for a dataset (:meth:`LoaderSpec.applies`)
and the report which rows are sequence loaders and in which order loaders are coloured (the
order of :data:`LOADERS`, which the schemas' loader enums repeat).

Importing this module imports nothing heavy: dataset classes are named ``module:attribute``
and imported by :meth:`LoaderSpec.dataset_class` (torch, h5py, lerobot and robomimic stay out
of Snakemake's parse time).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Protocol


class _Scenario(Protocol):
    name: str
    source: str
    decode: str
    nodes: int


@dataclass(frozen=True)
class LoaderSpec:
    """One benchmark loader.

    Attributes:
        name: the loader's name, the ``{loader}`` of a scenario name.
        dataset: ``module:attribute`` of the dataset class the loader reads with; imported
            by :meth:`dataset_class` only (lerobot's only in ``bench.lerobot_python``).
        peer: someone else's loader (lerobot's, robomimic's), measured for comparison;
            False for robopipe's own.
        needs_lerobot_python: runs in the interpreter ``bench.lerobot_python`` names
            (:mod:`robopipe.bench.lerobot_driver`).
        robomimic_only: reads the dataset's robomimic source file (through its robomimic
            plan), so it runs only for a dataset converted from one.
        sequence: a robomimic-style ``SequenceDataset`` (:mod:`robopipe.bench.sequence_loaders`),
            whose frame mode is ``single`` or ``seq<N>[b<B>][r<S>]``.
        stream: an iterable dataset (items come through a shuffle buffer); otherwise a
            map-style dataset sampled at random.
        cache_mode: robomimic's HDF5 cache mode (``none``, ``low_dim`` or ``all``), or None
            for a loader that takes none.
        robo_archive: reads the robo archive of the robomimic file (rule ``robomimic_robo``)
            instead of the file.
        sized_cache: keeps a demo cache sized by the ``robomimic_lru_mb`` setting.
        remote: reads remote sources (http, s3, hf); otherwise local files only.
        cuda: can decode on cuda; otherwise cpu only.
        multi_node: can run as one rank per node; otherwise on one node only.
    """

    name: str
    dataset: str
    peer: bool
    needs_lerobot_python: bool = False
    robomimic_only: bool = False
    sequence: bool = False
    stream: bool = False
    cache_mode: str | None = None
    robo_archive: bool = False
    sized_cache: bool = False
    remote: bool = False
    cuda: bool = False
    multi_node: bool = True

    def applies(self, *, robomimic_source: bool, lerobot_python: bool) -> bool:
        """Whether a scenario of this loader runs for a dataset: lerobot's loaders only when
        a lerobot interpreter is configured (``lerobot_python``), loaders that read a
        robomimic file only for a dataset whose source is one (``robomimic_source``)."""
        if self.needs_lerobot_python and not lerobot_python:
            return False
        return robomimic_source or not self.robomimic_only

    def check(self, scenario: _Scenario) -> None:
        """Check that this loader can run ``scenario`` (a
        :class:`~robopipe.bench.scenarios.Scenario` of it): its source, decode device and
        node count.

        Raises:
            ValueError: naming the scenario and what this loader cannot do.
        """
        if scenario.source != "local" and not self.remote:
            raise ValueError(f"{scenario.name}: {self.name} reads local files only")
        if scenario.decode != "cpu" and not self.cuda:
            raise ValueError(f"{scenario.name}: {self.name} runs on cpu only")
        if scenario.nodes != 1 and not self.multi_node:
            raise ValueError(f"{scenario.name}: {self.name} runs on one node only")

    def dataset_class(self) -> type:
        """The dataset class (:attr:`dataset`), imported now.

        Raises:
            ImportError: its package is not installed in this interpreter.
        """
        module, attribute = self.dataset.split(":")
        return getattr(importlib.import_module(module), attribute)


def _hdf5(mode: str) -> LoaderSpec:
    # robopipe's LeRobot-style loader of a robomimic file (robopipe.bench.robomimic_loaders)
    return LoaderSpec(
        f"robomimic_hdf5_{mode}", "robopipe.robomimic.dataset:RobomimicDataset", peer=False,
        robomimic_only=True, cache_mode=mode,
    )  # fmt: skip


def _sequence(name: str, dataset: str, *, peer: bool = False, **flags) -> LoaderSpec:
    # a SequenceDataset of a robomimic file (robopipe.bench.sequence_loaders), one node
    return LoaderSpec(
        name, dataset, peer=peer, robomimic_only=True, sequence=True, multi_node=False, **flags
    )


_ROBOMIMIC_SEQUENCE = "robomimic.utils.dataset:SequenceDataset"
_ROBOPIPE_SEQUENCE = "robopipe.robomimic.sequence:SequenceDataset"

LOADERS: dict[str, LoaderSpec] = {
    spec.name: spec
    for spec in (
        LoaderSpec(
            "robopipe_map", "robopipe.loading:MapDataset", peer=False, remote=True, cuda=True
        ),
        LoaderSpec(
            "robopipe_stream",
            "robopipe.loading:StreamingDataset",
            peer=False,
            stream=True,
            remote=True,
            cuda=True,
        ),
        LoaderSpec(
            "lerobot_map",
            "lerobot.datasets.lerobot_dataset:LeRobotDataset",
            peer=True,
            needs_lerobot_python=True,
        ),
        LoaderSpec(
            "lerobot_stream",
            "lerobot.datasets.streaming_dataset:StreamingLeRobotDataset",
            peer=True,
            needs_lerobot_python=True,
            stream=True,
        ),
        _hdf5("none"),
        _hdf5("low_dim"),
        _hdf5("all"),
        # robomimic 0.3.0's SequenceDataset, then robopipe's drop-in and the paper's caches
        _sequence("robomimic_seq_none", _ROBOMIMIC_SEQUENCE, peer=True, cache_mode="none"),
        _sequence("robomimic_seq_low_dim", _ROBOMIMIC_SEQUENCE, peer=True, cache_mode="low_dim"),
        _sequence("robomimic_seq_all", _ROBOMIMIC_SEQUENCE, peer=True, cache_mode="all"),
        _sequence("robopipe_seq_none", _ROBOPIPE_SEQUENCE, cache_mode="none"),
        _sequence("robopipe_seq_low_dim", _ROBOPIPE_SEQUENCE, cache_mode="low_dim"),
        _sequence("robopipe_seq_all", _ROBOPIPE_SEQUENCE, cache_mode="all"),
        _sequence(
            "robopipe_seq_lru",
            "robopipe.robomimic.strategies:LruSequenceDataset",
            sized_cache=True,
        ),
        _sequence(
            "robopipe_seq_compressed", "robopipe.robomimic.strategies:CompressedSequenceDataset"
        ),
        # the paper's robo format (robopipe.robomimic.robo), streamed
        _sequence(
            "robopipe_seq_tar",
            "robopipe.robomimic.robo:RoboTarDataset",
            robo_archive=True,
            stream=True,
        ),
    )
}


def get_loader(name: str) -> LoaderSpec:
    """The loader called ``name``.

    Raises:
        ValueError: no loader has that name (the message lists the valid names).
    """
    try:
        return LOADERS[name]
    except KeyError:
        raise ValueError(
            f"unknown loader {name!r}: valid loaders are {', '.join(LOADERS)}"
        ) from None

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
from collections.abc import Collection
from dataclasses import dataclass
from typing import Protocol


class _Scenario(Protocol):
    name: str
    source: str
    encoding: str | None
    decode: str
    nodes: int


@dataclass(frozen=True)
class LoaderSpec:
    """One benchmark loader.

    Attributes:
        name: the loader's name, the ``{loader}`` of a scenario name.
        dataset: ``module:attribute`` of the dataset class the loader reads with; imported
            by :meth:`dataset_class` only (lerobot's and lerobot-lancedb's only in the peer
            interpreter, :mod:`robopipe.bench.peers`).
        peer: someone else's loader (lerobot's, lerobot-lancedb's, robomimic's), measured for
            comparison; False for robopipe's own.
        peer_package: the distribution whose version names a peer (``lerobot``,
            ``lerobot-lancedb``, ``robomimic``); a loader that ``needs_lerobot_python`` runs
            only where the peer interpreter has it.
        needs_lerobot_python: runs in the peer interpreter (``bench.lerobot_python``, default
            ``.venv-lerobot/bin/python``; :mod:`robopipe.bench.lerobot_driver`).
        encoding: the one training copy the loader reads (``lance``: the Lance layout, which no
            other loader reads); None: the converted dataset and the v3.0 copies.
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
        remote: reads remote sources (:attr:`remote_sources`); otherwise local files only.
        remote_sources: the remote sources it reads, when :attr:`remote`.
        cuda: can decode on cuda; otherwise cpu only.
        multi_node: can run as one rank per node; otherwise on one node only.
        selects_episodes: reads only the episodes it is given (``episodes=``, as
            LeRobotDataset's); a loader that cannot does not run on a dataset with an episode
            selection, since it would read episodes the check left out.
    """

    name: str
    dataset: str
    peer: bool
    peer_package: str | None = None
    needs_lerobot_python: bool = False
    encoding: str | None = None
    robomimic_only: bool = False
    sequence: bool = False
    stream: bool = False
    cache_mode: str | None = None
    robo_archive: bool = False
    sized_cache: bool = False
    remote: bool = False
    remote_sources: tuple[str, ...] = ("http", "s3", "hf")
    cuda: bool = False
    multi_node: bool = True
    selects_episodes: bool = True

    def applies(
        self, *, robomimic_source: bool, peers: Collection[str], episodes_selected: bool = False
    ) -> bool:
        """Whether a scenario of this loader runs for a dataset: a loader of the peer
        interpreter only when that has its :attr:`peer_package` (``peers``: the distributions
        installed there, :func:`robopipe.peer_env.peer_packages`), loaders that read a
        robomimic file only for a dataset whose source is one (``robomimic_source``), and
        only a loader that :attr:`selects_episodes` for a dataset whose episodes are
        selected (``episodes_selected``: a v3.0 dataset's ``episodes:``/``skip_episodes``)."""
        if self.needs_lerobot_python and self.peer_package not in peers:
            return False
        if episodes_selected and not self.selects_episodes:
            return False
        return robomimic_source or not self.robomimic_only

    def reads(self, encoding: str | None) -> bool:
        """Whether the loader reads copy ``encoding`` (None: the converted dataset): a loader
        with an :attr:`encoding` reads that copy only, the others any but those."""
        if self.encoding:
            return encoding == self.encoding
        return encoding not in LOADER_ONLY_ENCODINGS

    def check(self, scenario: _Scenario) -> None:
        """Check that this loader can run ``scenario`` (a
        :class:`~robopipe.bench.scenarios.Scenario` of it): its source, decode device and
        node count.

        Raises:
            ValueError: naming the scenario and what this loader cannot do (also a copy it
                does not read, :meth:`reads`).
        """
        if scenario.source != "local" and not self.remote:
            raise ValueError(f"{scenario.name}: {self.name} reads local files only")
        if scenario.source != "local" and scenario.source not in self.remote_sources:
            raise ValueError(
                f"{scenario.name}: {self.name} reads local files and "
                f"{', '.join(self.remote_sources)} only"
            )
        if not self.reads(scenario.encoding):
            reads = (
                f"the {self.encoding} copy only"
                if self.encoding
                else f"no {scenario.encoding} copy"
            )
            raise ValueError(f"{scenario.name}: {self.name} reads {reads}")
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
        name, dataset, peer=peer, robomimic_only=True, sequence=True, multi_node=False,
        peer_package="robomimic" if peer else None, **flags,
    )  # fmt: skip


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
            peer_package="lerobot",
            needs_lerobot_python=True,
        ),
        LoaderSpec(
            "lerobot_stream",
            "lerobot.datasets.streaming_dataset:StreamingLeRobotDataset",
            peer=True,
            peer_package="lerobot",
            needs_lerobot_python=True,
            stream=True,
            remote=True,
            remote_sources=("hf",),  # hf://datasets/ (or hf://buckets/) only, not s3 or http
            selects_episodes=False,  # 0.6.1 keeps episodes= but streams every data file
        ),
        LoaderSpec(
            "lancedb_map",
            "lerobot_lancedb:LanceDBDataset",
            peer=True,
            peer_package="lerobot-lancedb",
            needs_lerobot_python=True,
            encoding="lance",
            remote=True,
            remote_sources=("s3",),
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


# copies that only the loader naming them reads (LoaderSpec.encoding)
LOADER_ONLY_ENCODINGS = frozenset(spec.encoding for spec in LOADERS.values() if spec.encoding)


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

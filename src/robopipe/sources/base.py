"""The interface every kind of source answers: what the workflow's rules ask of a dataset's
source, so that no rule asks which kind it is.

A source is one configured dataset (``datasets: <name>: <entry>``). Two families share most
answers: a :class:`ConvertedSource` (LeRobot v2.x: checked, planned, converted to
``results/<name>/v3.0``) and a :class:`V30Source` (LeRobot v3.0: checked, then read where it
is). Each kind is one class of its own module; :func:`robopipe.sources.open_source` picks it
from the entry.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping

from robopipe.formats.v21_reader import V21_META_FILES
from robopipe.formats.v21_repairs import shards_compute_stats
from robopipe.layout import (
    CHECK_FILE,
    CHECK_PART_FILE,
    INFO_PATH,
    PUBLISHED_INFO,
    VALIDATION_FILE,
)
from robopipe.options import ConversionOptions


def digest(value) -> str:
    """SHA-256 hex digest of ``value`` as sorted-key JSON: a short, stable Snakemake param
    (Snakemake keeps params in its metadata, so long lists are passed as digests)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def read_local_info(root: str) -> dict:
    """A local folder's ``meta/info.json``, or ``{}`` where it is missing, unreadable or not
    a JSON object (the check names that problem)."""
    try:
        with open(os.path.join(root, INFO_PATH), encoding="utf-8") as f:
            info = json.load(f)
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


class Local:
    """Mixin of a local folder source's ``folder`` (the configured ``path``) and its
    ``info.json`` (for a :class:`Source` subclass: uses its ``entry`` and ``_info``)."""

    @property
    def folder(self) -> str:
        """The configured ``path``."""
        return self.entry["path"]

    @property
    def info(self) -> dict:
        """Its ``meta/info.json``, read once; ``{}`` where missing or unreadable."""
        if self._info is None:
            self._info = read_local_info(self.folder)
        return self._info


def tree_digest(root: str, *, stat_every_file: bool = False) -> str:
    """A SHA-256 digest of the ``[size, mtime_ns]`` of the v2.1 meta files in folder ``root``
    that exist (of a v3.0 folder: its info.json) and of every file's path relative to ``root``
    (names only, listed without a stat): an added, removed or renamed file, or a changed meta
    file, changes it. With ``stat_every_file``, every file's ``[size, mtime_ns]`` too (one stat
    a file: 0.4 s for 80,000 files here), so that a file rewritten in place changes it as well.
    """
    hashed = hashlib.sha256()
    for rel in V21_META_FILES:
        try:
            stat = os.stat(os.path.join(root, rel))
        except OSError:
            continue
        hashed.update(f"{rel}: {stat.st_size} {stat.st_mtime_ns}\n".encode())
    for folder, dirs, file_names in os.walk(root):
        dirs.sort()
        names = sorted(file_names)
        hashed.update(f"{os.path.relpath(folder, root)}\n{'/'.join(names)}\n".encode())
        if stat_every_file:
            folder_fd = os.open(folder, os.O_RDONLY)  # stat by name: a third faster than paths
            try:
                stats = [os.stat(name, dir_fd=folder_fd) for name in names]
            finally:
                os.close(folder_fd)
            hashed.update("".join(f"{s.st_size} {s.st_mtime_ns}\n" for s in stats).encode())
    return hashed.hexdigest()


class Source(ABC):
    """One configured dataset's source.

    Args:
        name: the dataset's name (``datasets:`` key).
        entry: its config entry (validated by workflow/schemas/config.schema.yaml).
        conversion: the config's ``conversion:`` defaults (None: none).
        info: its ``meta/info.json`` where it was read to tell its version (None: read on
            first use, where it is read at all).

    Class attributes a kind sets:
        version: the LeRobot codebase version it is read as (``v2.0``, ``v2.1``, ``v3.0``).
        converted: whether it is converted here (else read where it is).
        parse_time_plan: whether its conversion is planned while the DAG is built (a local
            folder: every shard and file job is listed by ``snakemake -n``; such a source has
            ``v21``, its metadata, and signs its files), else by the ``plan`` checkpoint.
        plan_stage: the SLURM group stage of its ``plan`` job for a small dataset
            (robopipe.workflow.groups).
    """

    version: str
    converted: bool
    parse_time_plan = False
    plan_stage = "source"

    def __init__(
        self,
        name: str,
        entry: Mapping,
        conversion: Mapping | None = None,
        info: dict | None = None,
    ):
        self.name = name
        self.entry = entry
        self._conversion = conversion
        self._info = info

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    @functools.cached_property
    def options(self) -> ConversionOptions:
        """The dataset's ConversionOptions: defaults < config ``conversion`` < its own.

        Raises:
            ValueError: an unknown key or a value out of range (ConversionOptions.from_config).
        """
        return ConversionOptions.from_config(self._conversion, self.entry.get("conversion"))

    @property
    @abstractmethod
    def folder(self) -> str:
        """The folder its files are read from on this machine (for a remote v2.1 source: the
        manifest the ``plan`` job lists it into)."""

    # --- the check (rules source_check, source_check_part) ---

    @abstractmethod
    def check_inputs(self) -> list[str]:
        """input of the check jobs: what must exist before the source is checked."""

    def check_location(self) -> str:
        """Where the check reads the source (a folder, a manifest or a URL)."""
        return self.folder

    def check_ranges(self) -> list[tuple[int, int | None]]:
        """The source episode indices each check part job reads, ``[first, stop)`` (``stop``
        None: every index above); one range (no part jobs) unless the source says more."""
        return [(0, None)]

    def check_parts(self) -> list[str]:
        """input of source_check: the part jobs' findings where there are several, else
        none (the check job checks every episode itself)."""
        ranges = self.check_ranges()
        if len(ranges) == 1:
            return []
        return [
            CHECK_PART_FILE.format(dataset=self.name, part=f"{i:03d}") for i in range(len(ranges))
        ]

    def check_signatures(self) -> str:
        """params of source_check: a digest of what it reads that Snakemake does not see as
        an input (a changed one reruns the check); ``""`` for none."""
        return ""

    def check_part_signatures(self, first: int, stop: int | None) -> str:
        """params of a check part job over ``[first, stop)``: as :meth:`check_signatures`."""
        return ""

    def quality_location(self) -> str:
        """Where the quality jobs read its episodes' content (robopipe.quality): its own v2.x
        or v3.0 files, in its folder on this machine (a remote source: at its URL)."""
        return self.folder

    def storage_options(self) -> dict:
        """The fsspec options of a remote source (its ``storage_options:``)."""
        return dict(self.entry.get("storage_options") or {})

    def read_episodes(self) -> list[int] | None:
        """The episodes that are checked and read where a selection applies to the dataset
        as it is read (a v3.0 source's ``episodes:`` less ``skip_episodes``); None for every
        episode (a converted source is renumbered instead)."""
        return None

    # --- the conversion (rules plan, shard, aggregate_*, meta, publish) ---

    def plan_inputs(self) -> list[str]:
        """input of the ``plan`` job: the files it reads that a change replans."""
        return [self.folder]

    def remote_listing(self) -> dict:
        """The ``plan`` job's keywords of a remote source (robopipe.conversion.plan.plan_remote:
        ``url``, ``cache``, ``storage_options``); ``{}`` for a local folder."""
        return {}

    def data_signatures(self, episodes: Iterable[int]) -> str:
        """params of a shard job: a digest of the size and mtime of each source parquet of
        ``episodes`` (source episode indices); ``""`` where the jobs fetch or make them."""
        return ""

    def video_signatures(self, episodes: Iterable[int], key: str) -> str:
        """params of an aggregate_video job: as :meth:`data_signatures`, of camera ``key``'s
        mp4s."""
        return ""

    def meta_inputs(self) -> list[str]:
        """input of the meta job: the source's meta files it reads, where Snakemake can see
        them (a local folder's)."""
        return []

    @property
    def computes_stats(self) -> bool:
        """Whether the shard jobs compute episode stats (``stats.json`` beside their rows) for
        the meta job: the ``compute_missing_stats`` repair, or ``undeclared_columns: declare``
        (:func:`robopipe.formats.v21_repairs.shards_compute_stats`)."""
        return shards_compute_stats(self.options)

    def cache_to_remove(self) -> str:
        """The cache folder the ``publish`` job removes; ``""`` for none."""
        return ""

    def known_episodes(self) -> int | None:
        """Its episode count where the config or the DAG's build tells it, else None (the
        SLURM groups' size; a parse-time plan's count: :meth:`robopipe.workflow.sources.
        Datasets.known_episodes`)."""
        return None

    # --- the v3.0 dataset that loaders, copies, push and report read ---

    @abstractmethod
    def dataset_info(self) -> str:
        """The ``meta/info.json`` of its v3.0 dataset on this machine."""

    @abstractmethod
    def ready(self) -> list[str]:
        """What must exist before its v3.0 dataset is read."""

    @abstractmethod
    def validation(self) -> str:
        """The report that vouches for its v3.0 dataset's files (push compares with it)."""

    def remote_url(self) -> str | None:
        """The URL its v3.0 dataset is read at where it is remote, else None."""
        return None

    def push_options(self) -> dict:
        """Its ``push:`` section (robopipe.conversion.push.PushTarget keywords).

        Raises:
            ValueError: it has no ``push:`` section.
        """
        if "push" not in self.entry:
            raise ValueError(f"dataset {self.name!r} has no push: section")
        return self.entry["push"]

    def bench_source(self) -> str | None:
        """The benchmark source (``hf``, ``s3``, ``http``) that reads its v3.0 dataset where
        it is remote, else None."""
        return None

    def hdf5(self) -> str | None:
        """The robomimic HDF5 file it is made from (read by the robomimic loaders), or None."""
        return None


class ConvertedSource(Source):
    """A LeRobot v2.x source: checked, planned and converted to ``results/<name>/v3.0``."""

    converted = True
    version = "v2.1"

    def dataset_info(self) -> str:
        """The published conversion's ``meta/info.json``."""
        return PUBLISHED_INFO.format(dataset=self.name)

    def ready(self) -> list[str]:
        """The published conversion (which needs the check and the validation)."""
        return [self.dataset_info()]

    def validation(self) -> str:
        """The conversion's validation report."""
        return VALIDATION_FILE.format(dataset=self.name)


class V30Source(Source):
    """A LeRobot v3.0 source: checked, then read where it is, never converted."""

    converted = False
    version = "v3.0"

    def ready(self) -> list[str]:
        """Its check report: no loader runs on a dataset that fails the check."""
        return [CHECK_FILE.format(dataset=self.name)]

    def validation(self) -> str:
        """Its check report."""
        return CHECK_FILE.format(dataset=self.name)

    def dataset_info(self) -> str:
        """Its folder's ``meta/info.json``."""
        return os.path.join(self.folder, INFO_PATH)

    def check_location(self) -> str:
        """Where it is checked: its URL where it is remote (by range reads), else its
        folder."""
        return self.remote_url() or self.folder

    @property
    @abstractmethod
    def info(self) -> dict:
        """Its ``meta/info.json`` (read once; ``{}`` for a local one that is missing).

        Raises:
            DatasetError: a remote one cannot be read.
        """

    def known_info(self) -> dict:
        """Its ``meta/info.json`` where its version was read from it, else ``{}``."""
        return self.info

    def read_episodes(self) -> list[int] | None:
        """Its ``episodes:`` (sorted, once each) less ``conversion: skip_episodes``; None for
        every episode (no selection). LeRobotDataset's ``episodes=`` does the same (its items
        keep their global ``index``)."""
        skip = set(self.options.skip_episodes)
        if "episodes" not in self.entry and not skip:
            return None
        if "episodes" in self.entry:
            chosen = sorted(set(self.entry["episodes"]))
        else:
            chosen = list(range(int(self.info.get("total_episodes", 0))))
        return [e for e in chosen if e not in skip]

    def known_episodes(self) -> int | None:
        """The count of :meth:`read_episodes`, else its info.json's ``total_episodes``."""
        selected = self.read_episodes()
        if selected is not None:
            return len(selected)
        return self.known_info().get("total_episodes")

    @abstractmethod
    def files(self) -> tuple[list[str], list[str]]:
        """Its data and video files, relative to its root, sorted."""

"""A local LeRobot v2.1 folder (``path:``): planned while the DAG is built, its files' size
and mtime in the params of the jobs that read them.

The files are not inputs of those jobs: Snakemake's scheduler stats every input of every ready
job on each scheduling round, which for 972 episodes was 300,000 stat calls and a quarter of
the run's CPU time. A digest of ``[size, mtime_ns]`` per job reruns exactly the jobs whose
files changed.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Iterable

from robopipe.errors import DatasetError
from robopipe.formats.v21_reader import (
    V21_META_FILES,
    V21Source,
    load_source,
    normalise_template,
)
from robopipe.layout import V21_EPISODES_PATH, V21_EPISODES_STATS_PATH, V21_INFO_PATH
from robopipe.sources.base import ConvertedSource, Local, digest, tree_digest


class LocalV21(Local, ConvertedSource):
    """A local v2.1 folder (also the fallback of a folder whose version is unknown: the check
    names that problem)."""

    parse_time_plan = True
    plan_stage = "convert"  # with the conversion: nothing makes the source first

    @functools.cached_property
    def v21(self) -> V21Source:
        """Its metadata, loaded and checked once (no data or video file is opened).

        Raises:
            DatasetError: the metadata's first problem (robopipe.formats.v21_reader).
        """
        return load_source(
            self.folder, self.name, template_placeholders=self.options.template_placeholders
        )

    def check_inputs(self) -> list[str]:
        """Its info.json (its other files are in the params)."""
        return [f"{self.folder}/{V21_INFO_PATH}"]

    def check_ranges(self) -> list[tuple[int, int | None]]:
        """Ranges of ``check_episodes_per_job`` episode indices where ``info.json`` says
        ``total_episodes`` above it, else one range of every episode."""
        per = self.options.check_episodes_per_job
        total = self.info.get("total_episodes")
        if not isinstance(total, int) or total <= per:
            return [(0, None)]
        parts = -(-total // per)
        return [(i * per, (i + 1) * per if i < parts - 1 else None) for i in range(parts)]

    def check_signatures(self) -> str:
        """A digest of its meta files and file names (:func:`tree_digest`: an added or removed
        file reruns the check) and, where the check job reads every episode itself,
        of its episodes' files (:meth:`check_part_signatures`)."""
        tree = self.check_tree_digest()
        if len(self.check_ranges()) > 1:
            return tree
        return digest([tree, self.check_part_signatures(0, None)])

    def check_part_signatures(self, first: int, stop: int | None) -> str:
        """A SHA-256 digest of ``[size in bytes, mtime_ns]`` (``null`` for a missing file) of
        ``episodes.jsonl`` (the lengths a part checks against) and of the data file and mp4s
        of each episode index in ``[first, stop)`` (``stop`` None: up to ``total_episodes``),
        so that a changed one changes it; ``""`` where the metadata cannot be read (the
        check says why)."""
        try:
            source = self.v21
        except DatasetError:
            return ""
        root, info = str(source.root), source.info
        total = int(info["total_episodes"])
        per_chunk = source.chunks_size
        hashed = hashlib.sha256()
        for entry in self.signatures_of([f"{root}/{V21_EPISODES_PATH}"]).items():
            hashed.update(f"{entry}\n".encode())
        for episode in range(first, total if stop is None else min(stop, total)):
            chunk = episode // per_chunk
            rels = [info["data_path"].format(episode_chunk=chunk, episode_index=episode)]
            rels += [
                info["video_path"].format(episode_chunk=chunk, episode_index=episode, video_key=k)
                for k in source.video_keys
            ]
            for rel in rels:
                try:
                    stat = os.stat(f"{root}/{rel}")
                except OSError:
                    hashed.update(f"{rel}: null\n".encode())
                else:
                    hashed.update(f"{rel}: {stat.st_size} {stat.st_mtime_ns}\n".encode())
        return hashed.hexdigest()

    def check_tree_digest(self) -> str:
        """:func:`tree_digest` of its folder."""
        return tree_digest(self.folder)

    def plan_inputs(self) -> list[str]:
        """Its meta files but the stats (a change replans; the DAG's plan reads no stats)."""
        return [p for p in self.meta_inputs() if not p.endswith(V21_EPISODES_STATS_PATH)] or [
            self.folder
        ]

    def meta_inputs(self) -> list[str]:
        """Its v2.1 meta files that exist."""
        root = self.folder
        return [f"{root}/{rel}" for rel in V21_META_FILES if os.path.isfile(f"{root}/{rel}")]

    def data_signatures(self, episodes: Iterable[int]) -> str:
        """A digest of :meth:`signatures_of` the parquets of ``episodes``."""
        return digest(self.signatures_of(self.paths(episodes)))

    def video_signatures(self, episodes: Iterable[int], key: str) -> str:
        """A digest of :meth:`signatures_of` camera ``key``'s mp4s of ``episodes``."""
        return digest(self.signatures_of(self.paths(episodes, key)))

    def paths(self, episodes: Iterable[int], key: str | None = None) -> list[str]:
        """The parquet (``key`` None) or camera ``key``'s mp4 of each of the source
        ``episodes``: :meth:`V21Source.data_file`'s and ``video_file``'s paths as text, made
        without pathlib (4 us a path, for the params of every job at parse time). Only
        ``info.json`` is read (a cluster job starts without reading ``episodes.jsonl``)."""
        info = self.info
        root, per_chunk = self.folder.rstrip("/"), int(info["chunks_size"])
        template = info["data_path" if key is None else "video_path"]
        if self.options.template_placeholders:
            template = normalise_template(template)
        return [
            f"{root}/"
            + template.format(episode_chunk=e // per_chunk, episode_index=e, video_key=key)
            for e in episodes
        ]

    def signatures_of(self, paths: Iterable[str]) -> dict[str, list[int] | None]:
        """``[size in bytes, mtime_ns]`` of each of ``paths`` (inside the folder), by relative
        path; None for a file that does not exist."""
        root = self.folder
        prefix = root.rstrip("/") + "/"
        signatures = {}
        for path in map(str, paths):
            # the plain prefix where it is one (os.path.relpath costs 20 us a path)
            rel = path[len(prefix) :] if path.startswith(prefix) else os.path.relpath(path, root)
            try:
                stat = os.stat(os.path.join(root, rel))
            except FileNotFoundError:
                signatures[rel] = None
            else:
                signatures[rel] = [stat.st_size, stat.st_mtime_ns]
        return signatures

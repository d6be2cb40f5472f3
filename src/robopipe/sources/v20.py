"""LeRobot v2.0 sources: a v2.1 dataset but for its stats. A v2.0 dataset has no
``meta/episodes_stats.jsonl`` (a ``meta/stats.json`` of the whole dataset instead), so each
episode's stats are computed, in the shard jobs (in parallel, one episode at a time), as lerobot
0.3's ``convert_dataset_v20_to_v21`` computes them (:func:`robopipe.stats.v20_episode_stats`)
on the rows as the repairs leave them (``restamp_timestamps`` included: the frames are looked up
at the rewritten times); the meta job writes them as a v2.1 source's. The output equals
lerobot's two steps: 0.3's v2.0 -> v2.1 script, then 0.6.1's v2.1 -> v3.0 converter.

Everything else (the check, the plan, the signatures, a remote one's listing and cache) is the
v2.1 kind's: a local folder is :class:`LocalV20`, a remote one :class:`RemoteV20`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from robopipe.formats.v21_reader import V21Source
from robopipe.options import ConversionOptions
from robopipe.sources.local_v21 import LocalV21
from robopipe.sources.remote_v21 import RemoteV21

VERSION = "v2.0"


def leading_data_files(source: V21Source, rows: int) -> list[Path]:
    """The data files that hold the dataset's first ``rows`` rows, every data file counted in
    sorted path order (``length`` rows each, episodes.jsonl's): where lerobot 0.3's v2.0 ->
    v2.1 step reads the times it samples an episode's frames at
    (:func:`robopipe.stats.v20_episode_stats`), so a remote source's shard job fetches them
    besides its own episodes' files."""
    files = sorted((source.data_file(e), e) for e in range(len(source.episodes)))
    chosen, held = [], 0
    for path, episode in files:
        if held >= rows:
            break
        chosen.append(path)
        held += source.episodes[episode]["length"]
    return chosen


class V20:
    """Mixin of the v2.0 kinds (before a v2.1 kind's class): the shard jobs compute every
    episode's stats."""

    version = VERSION

    @property
    def options(self) -> ConversionOptions:
        """The v2.1 kind's options with ``compute_missing_stats`` on: the shard jobs compute
        the stats (by :func:`robopipe.stats.v20_episode_stats`: robopipe.conversion.shard)
        and the meta job reads them."""
        return dataclasses.replace(super().options, compute_missing_stats=True)


class LocalV20(V20, LocalV21):
    """A local v2.0 folder."""


class RemoteV20(V20, RemoteV21):
    """A v2.0 dataset at a URL or on the Hub (fetched as a v2.1 one: the shard jobs fetch the
    mp4s too, for the stats)."""

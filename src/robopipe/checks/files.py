"""Which files of a v2.1 source the check reads, recorded with their signatures, and the
files it holds that are no part of the dataset (notes)."""

from __future__ import annotations

import os
import re
import string
from collections.abc import Mapping
from pathlib import Path

from robopipe.checks.report import Problem
from robopipe.formats.v21_reader import V21Source

# Files a v2.1 folder may hold besides the dataset (Hub repositories carry these).
KNOWN_EXTRA_FILES = ("README.md", ".gitattributes")


def record_file(root: Path, rel: str, files: dict) -> None:
    try:
        stat = os.stat(root / rel)
    except FileNotFoundError:
        return
    files[rel] = [stat.st_size, stat.st_mtime_ns]


def stray_files(root: Path, used: Mapping, remote=None) -> list[Problem]:
    """A note per file of the source that the conversion does not read (a remote source's:
    those of its listing)."""
    notes = []
    for rel in sorted(remote.files) if remote else _walk(root):
        if rel not in used and rel not in KNOWN_EXTRA_FILES:
            notes.append(
                Problem("stray_file", "not part of the dataset; it is not converted", file=rel)
            )
    return notes


def _walk(root: Path):
    """Every file under ``root``, relative to it, in sorted folder order."""
    for folder, dirs, names in os.walk(root):
        dirs.sort()
        base = os.path.relpath(folder, root)
        for name in sorted(names):
            yield name if base == "." else f"{base}/{name}"


class UsedFiles:
    """Whether a file of the source is one the check read (``rel in used``): a metadata file
    it recorded, or the data file or an mp4 of an episode listed in ``episodes.jsonl``, inside
    the root; decided from the path templates, without a table of every file."""

    def __init__(self, source: V21Source, listed: bytearray, meta: Mapping, outside: set) -> None:
        self.source, self.meta, self.outside = source, meta, outside
        self.listed = listed  # per index: whether the episode was checked (:func:`listed_episodes`)
        self.templates = [
            (*_template_pattern(source.info["data_path"]), False),
            *([(*_template_pattern(source.info["video_path"]), True)] if source.video_keys else []),
        ]

    def __contains__(self, rel: str) -> bool:
        if rel in self.meta:
            return True
        if rel in self.outside:
            return False
        source = self.source
        for pattern, fields, video in self.templates:
            match = pattern.fullmatch(rel)
            if match is None:
                continue
            values = dict(zip(fields, match.groups(), strict=True))
            if not values.get("episode_index", "").isdigit():
                continue
            episode = int(values["episode_index"])
            if episode >= len(self.listed) or not self.listed[episode]:
                continue
            key = values.get("video_key")
            if video and key not in source.video_keys:
                continue
            # the file's path as the checker names it (V21Source.data_file, .video_file,
            # relative to the root), without pathlib
            made = source.info["video_path" if video else "data_path"].format(
                episode_chunk=episode // source.chunks_size, episode_index=episode, video_key=key
            )
            if made == rel or os.path.normpath(made) == rel:
                return True
        return False


def listed_episodes(source: V21Source) -> bytearray:
    """A byte per index ``0..total_episodes-1``: 1 for each episode the check reads (listed
    in ``episodes.jsonl``, its index in range)."""
    listed = bytearray(int(source.info["total_episodes"]))
    for index, _ in getattr(source.episodes, "heads", ()):
        listed[index] = 1
    return listed


def _template_pattern(template: str) -> tuple[re.Pattern, list[str]]:
    """A regular expression matching the paths ``template`` makes, and its groups' fields."""
    pattern, fields = [], []
    for literal, name, _spec, _conversion in string.Formatter().parse(template):
        pattern.append(re.escape(literal))
        if name is not None:
            fields.append(name)
            pattern.append("(.+?)" if name == "video_key" else r"(\d+)")
    return re.compile("".join(pattern)), fields

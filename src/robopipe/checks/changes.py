"""The source files that changed, appeared or disappeared since an earlier check, as notes."""

from __future__ import annotations

import hashlib
import json
import re
from array import array
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from robopipe.checks.report import Problem

# an entry of compact JSON's "files" object: its key (JSON-escaped) and its value's text
_FILE_ENTRY = re.compile(rb'"((?:[^"\\]|\\.)*)": (\[[^\]]*\])')


def _hash64(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little") - (
        1 << 63
    )


class Changes:
    """The source files that changed, appeared or disappeared since an earlier check, compared
    a group of files at a time. The earlier files are held as 64-bit hashes of each path and
    of its signature (16 bytes a file); their paths are read again only for removed files.

    Args:
        previous: the earlier ``check_files.json`` (compact JSON, read a piece at a time), or
            an earlier report's JSON (``{"files": {path: signature}}``).
    """

    def __init__(self, previous: str | Path | Mapping) -> None:
        self.previous = previous
        paths, values = array("q"), array("q")  # 8 bytes a file, not a Python int
        for rel, value in self._entries():
            paths.append(_hash64(rel))
            values.append(_hash64(value))
        order = np.argsort(np.frombuffer(paths, np.int64), kind="stable")
        self.paths = np.frombuffer(paths, np.int64)[order]
        self.values = np.frombuffer(values, np.int64)[order]
        self.seen = np.zeros(len(paths), bool)
        self.found: list[tuple[str, str]] = []  # (path, kind)

    def _entries(self):
        """Each earlier file's path and its signature's JSON text."""
        if isinstance(self.previous, Mapping):
            for rel, value in self.previous.get("files", {}).items():
                yield rel, json.dumps(list(value))
            return
        with open(self.previous, "rb") as file:
            rest = b""
            while chunk := file.read(1 << 20):
                rest += chunk
                end = 0
                for match in _FILE_ENTRY.finditer(rest):
                    key, end = match.group(1), match.end()
                    rel = json.loads(b'"' + key + b'"') if b"\\" in key else key.decode()
                    yield rel, match.group(2).decode()
                rest = rest[end:]

    def compare(self, files: Mapping) -> None:
        """Compare ``files`` (``{path: signature}``, no path given twice)."""
        rels = list(files)
        if not rels:
            return
        paths = np.array([_hash64(rel) for rel in rels], np.int64)
        values = np.array([_hash64(json.dumps(list(files[rel]))) for rel in rels], np.int64)
        at = np.minimum(np.searchsorted(self.paths, paths), max(len(self.paths) - 1, 0))
        known = self.paths[at] == paths if len(self.paths) else np.zeros(len(rels), bool)
        self.seen[at[known]] = True
        changed = known & (self.values[at] != values) if len(self.paths) else known
        self.found += [(rels[i], "source_added") for i in np.flatnonzero(~known)]
        self.found += [(rels[i], "source_changed") for i in np.flatnonzero(changed)]

    def notes(self) -> list[Problem]:
        """A note per file that changed, appeared (compared) or disappeared (earlier, never
        compared), in path order."""
        removed = set(self.paths[~self.seen].tolist())
        if removed:
            self.found += [
                (rel, "source_removed") for rel, _ in self._entries() if _hash64(rel) in removed
            ]
        messages = {
            "source_removed": "removed since the last check",
            "source_added": "added since the last check",
            "source_changed": "changed since the last check (size or modification time): "
            "the jobs that read it are rerun",
        }
        return [Problem(kind, messages[kind], file=rel) for rel, kind in sorted(self.found)]


def changes(before: Mapping, after: Mapping) -> list[Problem]:
    """Notes for the files of ``after`` (``{path: signature}``) that changed, appeared or
    disappeared since ``before`` (the same)."""
    changes = Changes({"files": before})
    changes.compare(after)
    return changes.notes()

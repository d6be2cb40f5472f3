"""A large v2.1 source is checked in parts, a range of episodes each
(:func:`robopipe.checks.v21.check_part`): a part's results, written and read back as JSON, and
the merged report's files read back from the parts as the report is written."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

from robopipe.atomic import atomic_path, write_json
from robopipe.checks.report import CheckReport, Problem


@dataclass
class CheckPart:
    """What :func:`check_part` found in one range of episodes.

    Attributes:
        problems: the episodes' problems, in episode order.
        files: each file it read, ``[size in bytes, mtime in ns]``, in episode order.
        streams: each camera's stream parameters, :meth:`StreamRuns.to_json`.
    """

    problems: list[Problem] = field(default_factory=list)
    files: dict[str, list[int]] = field(default_factory=dict)
    streams: dict[str, list] = field(default_factory=dict)

    def to_json(self) -> dict:
        """The part as :func:`write_part` writes it."""
        return {
            "problems": [dataclasses.asdict(p) for p in self.problems],
            "files": self.files,
            "streams": self.streams,
        }


def write_part(part: CheckPart, path: str | Path) -> None:
    """Write ``part`` as JSON to ``path``, atomically."""
    write_json(path, part.to_json(), indent=None)


def read_part(path: str | Path) -> CheckPart:
    """The :class:`CheckPart` :func:`write_part` wrote to ``path``."""
    value = json.loads(Path(path).read_text(encoding="utf-8"))
    return CheckPart([Problem(**p) for p in value["problems"]], value["files"], value["streams"])


class StreamedFiles(dict):
    """``report.files`` of :func:`merge_parts`: the metadata's files, then each part's, read
    from the parts when iterated (json's Python encoder asks only ``len`` and ``items``)."""

    def __init__(self, meta: dict, parts, count: int) -> None:
        super().__init__()
        self._meta, self._parts, self._count = meta, parts, count

    def __len__(self) -> int:
        return self._count

    def items(self):
        for files in self.groups():
            yield from files.items()

    def groups(self):
        """The files a group at a time: the metadata's, then each part's."""
        yield self._meta
        for part in self._parts():
            yield part.files


def write_files(report: CheckReport, path: str | Path) -> None:
    """Write ``report.files`` as ``{"files": ...}`` compact JSON to ``path``, atomically, a
    piece at a time (``check_files.json``, the next check's ``previous``)."""
    files = report.files
    groups = files.groups() if isinstance(files, StreamedFiles) else [files]
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as file:
        # json.dumps's bytes of the whole, from its C encoder a group at a time
        file.write('{"files": {')
        separator = ""
        for group in groups:
            if group:
                file.write(separator + json.dumps(group, ensure_ascii=False)[1:-1])
                separator = ", "
        file.write("}}")

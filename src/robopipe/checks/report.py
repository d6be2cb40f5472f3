"""The one interface of every check (v2.1 source, v3.0 dataset, the outside doctor): a
:class:`Problem` per thing wrong, each named with its episode and file; a :class:`CheckReport`
of them, written as ``check.json`` (:func:`write_report`) and summarised on the terminal as
one-line messages (:meth:`CheckReport.summary`); :class:`SourceCheckError` when it refuses
(a job's exit code: not zero)."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from robopipe.atomic import write_json
from robopipe.errors import DatasetError

CHECK_VERSION = 1


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the source (or, as a note, worth knowing).

    Attributes:
        kind: a short stable name grouping problems (``missing_file``, ``video_size``, ...).
        message: what is wrong; what to do.
        episode: the source episode index, when the problem belongs to one.
        file: the file, relative to the dataset root.
    """

    kind: str
    message: str
    episode: int | None = None
    file: str | None = None

    def line(self, dataset: str) -> str:
        """``robopipe: dataset 'X': episode N: file F: message`` (parts that apply)."""
        return "robopipe: " + str(
            DatasetError(dataset, self.message, episode=self.episode, file=self.file)
        )


@dataclass
class CheckReport:
    """What :func:`check_source` found.

    Attributes:
        dataset: the dataset name.
        source: the source folder (absolute).
        repairs: each repair of :data:`~robopipe.formats.v21_repairs.REPAIRS` and whether it is on.
        problems: what stops the conversion.
        notes: what does not (stray files, changed source files, skipped episodes' problems).
        files: every source file the conversion reads: ``[size in bytes, mtime in ns]``
            (from :func:`merge_parts`: a mapping read from the parts when iterated).
        episodes: episodes listed in ``episodes.jsonl``.
        doctor: a v3.0 source's outside opinion (``lerobot-lance-doctor``,
            :func:`robopipe.checks.doctor.doctor_opinion`); None where it was not asked.
    """

    dataset: str
    source: str
    repairs: dict[str, bool]
    problems: list[Problem] = field(default_factory=list)
    notes: list[Problem] = field(default_factory=list)
    files: dict[str, list[int]] = field(default_factory=dict)
    episodes: int = 0
    doctor: dict | None = None

    @property
    def ok(self) -> bool:
        """True when nothing stops the conversion."""
        return not self.problems

    def to_json(self) -> dict:
        """The report as written to ``check.json``."""
        return {
            "version": CHECK_VERSION,
            "dataset": self.dataset,
            "source": self.source,
            "ok": self.ok,
            "repairs": self.repairs,
            "episodes": self.episodes,
            "counts": dict(Counter(p.kind for p in self.problems)),
            "problems": [dataclasses.asdict(p) for p in self.problems],
            "notes": [dataclasses.asdict(p) for p in self.notes],
            "files": self.files,
            **({} if self.doctor is None else {"doctor": self.doctor}),
        }

    def summary(self, *, first: int = 5, path: str | Path | None = None) -> str:
        """The console summary: per kind its count and first episodes, then up to ``first``
        one-line messages per kind (every line is in ``check.json``), then the notes' counts."""
        lines = []
        where = f" (all of them in {path})" if path else ""
        if self.problems:
            lines.append(
                f"robopipe: dataset {self.dataset!r}: {len(self.problems)} problem(s) in the "
                f"source {self.source}{where}:"
            )
        else:
            lines.append(f"robopipe: dataset {self.dataset!r}: source {self.source} checked, OK")
        for title, items, show in (("problems", self.problems, first), ("notes", self.notes, 2)):
            by_kind: dict[str, list[Problem]] = {}
            for p in items:
                by_kind.setdefault(p.kind, []).append(p)
            for kind, group in by_kind.items():
                episodes = sorted({p.episode for p in group if p.episode is not None})
                shown = ", ".join(map(str, episodes[:first])) + (
                    ", ..." if len(episodes) > first else ""
                )
                lines.append(
                    f"  {title[:-1]} {kind}: {len(group)}"
                    + (f" (episodes {shown})" if episodes else "")
                )
                lines += [p.line(self.dataset) for p in group[:show]]
        return "\n".join(lines)


class SourceCheckError(DatasetError):
    """The source check found problems: the message is the first one's, ``report`` has all."""

    def __init__(self, report: CheckReport) -> None:
        first = report.problems[0]
        super().__init__(report.dataset, first.message, episode=first.episode, file=first.file)
        self.report = report


def write_report(report: CheckReport, path: str | Path) -> None:
    """Write ``report`` as JSON to ``path``, atomically."""
    write_json(path, report.to_json(), indent=1)


def read_report(path: str | Path) -> dict | None:
    """The JSON of an earlier report at ``path``, or None when there is none."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None

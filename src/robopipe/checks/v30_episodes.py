"""A v3.0 dataset's ``meta/episodes`` rows as the v3.0 check holds them, and the fix its
problems of episodes' files name."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

FIX = "restore it, or leave the episodes out with `skip_episodes`"


@dataclass
class Episodes:
    """The ``meta/episodes`` rows that could be read, as numpy columns in file order.

    ``source[i]`` is the episodes file of row ``i``; ``complete`` is False when a file's rows
    could not be read (then unlisted episodes are not blamed)."""

    columns: dict[str, np.ndarray] = field(default_factory=dict)
    source: list[str] = field(default_factory=list)
    tasks: list[list[str] | None] = field(default_factory=list)
    complete: bool = True

    def __len__(self) -> int:
        return len(self.source)

    def __getitem__(self, column: str) -> np.ndarray:
        return self.columns[column]

"""Publish a validated dataset: ``results/<name>/v3.0/`` appears complete, or not at all."""

from __future__ import annotations

import shutil
from pathlib import Path

from robopipe.atomic import atomic_path, link_or_copy


def publish(staging: Path, final: Path) -> None:
    """Make ``final`` a copy of the ``staging`` tree, in one rename.

    Files are hard-linked where the file system allows (no bytes copied), else copied. The
    tree is assembled under a temporary sibling name and renamed onto ``final`` only when
    complete, so readers never see a partial dataset.
    """
    staging = Path(staging)
    with atomic_path(final) as tmp:
        shutil.copytree(staging, tmp, copy_function=link_or_copy)

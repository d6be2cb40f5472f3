"""Publish a validated dataset: ``results/<name>/v3.0/`` appears complete, or not at all."""

from __future__ import annotations

import shutil
from pathlib import Path

from robopipe.atomic import atomic_path, link_or_copy
from robopipe.conversion.plan import Plan


def publish(staging: Path, plan: Plan, final: Path) -> None:
    """Make ``final`` the planned data and video files plus ``meta/`` of ``staging``.

    Files are hard-linked where the file system allows (no bytes copied), else copied. The
    tree is assembled under a temporary sibling name and renamed onto ``final`` only when
    complete, so readers never see a partial dataset; files in ``staging`` that the plan does
    not name (left by an earlier plan) are not published.
    """
    staging = Path(staging)
    with atomic_path(final) as tmp:
        shutil.copytree(
            staging / "meta",
            tmp / "meta",
            copy_function=link_or_copy,
            ignore=shutil.ignore_patterns(".*"),  # Snakemake's .snakemake_timestamp
        )
        for rel in plan.file_paths():
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            link_or_copy(staging / rel, tmp / rel)

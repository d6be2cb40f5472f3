"""Write outputs under a temporary name and move them into place only when complete."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def atomic_path(final: str | Path) -> Iterator[Path]:
    """Yield a temporary sibling path of ``final``; rename it onto ``final`` on success.

    Works for files and directories. On any exception the temporary path is removed, so a
    failed or killed writer never leaves a half-written ``final`` (a killed process leaves at
    most the ``.<name>.partial`` sibling, which the next writer replaces). One writer per
    ``final`` at a time, as Snakemake schedules outputs.
    """
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f".{final.name}.partial")
    _remove(tmp)
    try:
        yield tmp
        if final.is_dir() and tmp.is_dir():
            shutil.rmtree(final)
        os.replace(tmp, final)
    except BaseException:
        _remove(tmp)
        raise


def write_json(path: str | Path, obj, *, indent: int | None = 4) -> None:
    """Write ``obj`` as JSON (UTF-8, non-ASCII kept) atomically.

    Indented JSON is written a piece at a time as the encoder makes it (that encoder is
    Python's either way), without holding the pieces of the whole text (at 76,000 episodes
    the check's report is some 300,000 files' lines); compact JSON comes whole from the C
    encoder, which is faster. The bytes are ``json.dumps``'s either way.
    """
    with atomic_path(path) as tmp:
        if indent is None:
            tmp.write_text(json.dumps(obj, ensure_ascii=False), encoding="utf-8")
            return
        with open(tmp, "w", encoding="utf-8") as file:
            json.dump(obj, file, indent=indent, ensure_ascii=False)


def link_or_copy(src: str | Path, dst: str | Path) -> None:
    """Hard-link ``src`` to ``dst`` (no bytes copied), or copy it where links are impossible.

    Raises:
        FileExistsError: ``dst`` exists (it is never overwritten: it may be a link to another
            job's file).
    """
    try:
        os.link(src, dst)
    except FileExistsError:
        raise
    except OSError:
        shutil.copy2(src, dst)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()

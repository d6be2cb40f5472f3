"""A v3.0 dataset that an edit of the config makes (``edits:``; rule ``edit_publish`` writes
``results/<name>/v3.0``): once published, checked and read like a local v3.0 folder, so that
``quality``, the benchmark, the report and ``push`` take it like any configured dataset."""

from __future__ import annotations

from robopipe.layout import PUBLISHED_DIR
from robopipe.sources.v30 import LocalV30


class EditedV30(LocalV30):
    """The output of an edit (its ``entry``: the edit's ``quality:`` and ``push:`` sections,
    no ``path``). Its check's input is its published ``meta/info.json``, so the check waits
    for the edit's jobs; nothing of it is read while the DAG is built (the folder may not
    exist yet: :meth:`files` raises, and the workflow lists its files from the edit's plan
    instead)."""

    @property
    def folder(self) -> str:
        """``results/<name>/v3.0``."""
        return PUBLISHED_DIR.format(dataset=self.name)

    def check_signatures(self) -> str:
        """``""``: a new publish rewrites the check's input (its info.json), which reruns the
        check; a digest of the folder's files, taken while the DAG is built before the edit
        ran, would rerun it on every later run."""
        return ""

    def files(self) -> tuple[list[str], list[str]]:
        """Not known here: the edit's plan lists them (``Datasets.files``, from the
        ``edit_plan`` checkpoint).

        Raises:
            NotImplementedError: always.
        """
        raise NotImplementedError(f"{self!r}: its files are in its edit's plan")

"""Temporary alias of :mod:`robopipe.remux` (renamed in issue 20).

Kept only until ``formats/v21_writer.py`` and ``conversion/repairs.py`` import
``robopipe.remux``; delete this file then."""

from robopipe.remux import MP4, scheduling_kept  # noqa: F401

"""A remote LeRobot v2.1 dataset (``url:`` or ``repo_id:``): listed by the ``plan`` job into
its manifest, each job fetching the files it reads into the source's cache
(:mod:`robopipe.source_cache`)."""

from __future__ import annotations

from robopipe.layout import PLAN_FILE, SOURCE_CACHE_DIR, SOURCE_MANIFEST
from robopipe.sources.base import ConvertedSource
from robopipe.sources.remote import Remote


class RemoteV21(Remote, ConvertedSource):
    """A v2.1 dataset at a URL or on the Hub."""

    @property
    def folder(self) -> str:
        """Its manifest (the ``plan`` job lists the source there): what its readers open."""
        return SOURCE_MANIFEST.format(dataset=self.name)

    def check_inputs(self) -> list[str]:
        """The plan: the plan job lists the source into its manifest."""
        return [PLAN_FILE.format(dataset=self.name)]

    def plan_inputs(self) -> list[str]:
        """Nothing: the plan job lists it."""
        return []

    def remote_listing(self) -> dict:
        """``url``, ``cache`` (:meth:`cache_dir`) and ``storage_options``."""
        return {
            "url": self.url,
            "cache": self.cache_dir(),
            "storage_options": self.storage_options(),
        }

    def cache_dir(self) -> str:
        """The folder its files are fetched into: its ``cache_dir`` (may name environment
        variables, expanded by each job: ``$TMPDIR/...``), default ``results/<name>/
        source_cache``."""
        return self.entry.get("cache_dir") or SOURCE_CACHE_DIR.format(dataset=self.name)

    def cache_to_remove(self) -> str:
        """Its cache, unless its ``keep_cache`` is true."""
        return "" if self.entry.get("keep_cache") else self.cache_dir()

"""LeRobot v3.0 sources: a local folder (``path:``) or a remote dataset (``url:`` or
``repo_id:``), checked, then read where they are, never converted. A remote one is copied
locally (rule ``local_copy``) only for the jobs that need local files."""

from __future__ import annotations

import functools
import os

from robopipe.formats.v30_reader import DatasetFiles, dataset_files
from robopipe.layout import INFO_PATH, LOCAL_COPY_DIR
from robopipe.sources.base import Local, V30Source, digest, tree_digest
from robopipe.sources.remote import Remote, tagged_version

# the bench source that reads a remote dataset where it is, by URL scheme
SCHEME_SOURCES = {"hf": "hf", "s3": "s3", "http": "http", "https": "http"}


class LocalV30(Local, V30Source):
    """A local v3.0 folder."""

    plan_stage = "convert"  # nothing makes the source first (no plan job runs)

    def check_inputs(self) -> list[str]:
        """Its info.json."""
        return [os.path.join(self.folder, INFO_PATH)]

    def check_signatures(self) -> str:
        """A digest of its info.json's size and mtime and of every file's path
        (:func:`tree_digest`): an added, removed or renamed file reruns the check (the
        ``""``: a v2.1 folder's episode signature, none here, kept so that an unchanged
        folder's check does not rerun)."""
        return digest([tree_digest(self.folder), ""])

    def files(self) -> tuple[list[str], list[str]]:
        """Its data (``data/**.parquet``) and video (``videos/**.mp4``) files."""
        root = self.folder
        found: tuple[list[str], list[str]] = ([], [])
        for kind, suffix, files in (("data", ".parquet", found[0]), ("videos", ".mp4", found[1])):
            for folder, _dirs, file_names in os.walk(os.path.join(root, kind)):
                files += [
                    os.path.relpath(os.path.join(folder, f), root)
                    for f in file_names
                    if f.endswith(suffix)
                ]
            files.sort()
        return found


class RemoteV30(Remote, V30Source):
    """A v3.0 dataset at a URL or on the Hub: checked and benchmarked where it is (by range
    reads), copied locally only where a job needs local files."""

    @property
    def folder(self) -> str:
        """Its local copy (rule ``local_copy``)."""
        return LOCAL_COPY_DIR.format(dataset=self.name)

    def check_inputs(self) -> list[str]:
        """Nothing: it is checked where it is."""
        return []

    def remote_url(self) -> str:
        """Its URL."""
        return self.url

    def known_info(self) -> dict:
        """Its info.json, but ``{}`` where a Hub revision named its version (not read)."""
        return {} if tagged_version(self.entry) else self.info

    def bench_source(self) -> str | None:
        """The benchmark source (``hf``, ``s3``, ``http``) that reads it where it is: the one
        its URL's scheme names (None for another scheme)."""
        return SCHEME_SOURCES.get(self.url.split("://", 1)[0])

    def files(self) -> tuple[list[str], list[str]]:
        """Its data and video files, as its metadata names them where it is (its local copy
        may not exist yet; a plain http server lists nothing): info.json and the file
        indices of ``meta/episodes`` (:func:`robopipe.formats.v30_reader.dataset_files`),
        read once, each read retried within its ``retry_budget`` (``retry_*`` conversion
        options).

        Raises:
            DatasetError: its metadata cannot be read (no info.json or episodes file).
            robopipe.retry.RemoteReadError: a read failed on every attempt.
        """
        named = self._named_files
        return list(named.data), list(named.videos)

    @functools.cached_property
    def _named_files(self) -> DatasetFiles:
        budget = self.options.retry_budget
        return dataset_files(self.url, self.storage_options(), budget)

"""What every remote source shares: its URL, and the ``meta/info.json`` its version is read
from.

A remote source is named by ``url:`` (any fsspec URL) or ``repo_id:`` (+ ``revision``, a Hub
dataset). A Hub revision named like a version (``v2.1``, ``v3.0``: lerobot tags each codebase
version so) is that version without a read; any other remote source's info.json is read once
while the DAG is built (one small request).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from urllib.parse import quote

from robopipe.errors import DatasetError
from robopipe.formats.v30_reader import cat_file, open_url
from robopipe.layout import INFO_PATH
from robopipe.retry import RemoteReadError

DEFAULT_HUB_REVISION = "v2.1"
# a Hub revision that names a codebase version (lerobot tags v2.1, v3.0)
VERSION_TAG = re.compile(r"v\d+\.\d+")


def hub(entry: Mapping) -> tuple[str, str]:
    """A ``repo_id`` entry's ``(repo_id, revision)``; the revision defaults to
    :data:`DEFAULT_HUB_REVISION`."""
    return entry["repo_id"], entry.get("revision", DEFAULT_HUB_REVISION)


def remote_url(entry: Mapping) -> str:
    """The fsspec URL of a ``url`` or ``repo_id`` entry (``hf://datasets/<repo_id>@<revision>``
    for a Hub one)."""
    if "url" in entry:
        return entry["url"].rstrip("/")
    repo_id, revision = hub(entry)
    return f"hf://datasets/{repo_id}@{quote(revision, safe='')}"


def tagged_version(entry: Mapping) -> str | None:
    """The version a Hub revision names (``v2.1``, ``v3.0``), else None."""
    if "repo_id" in entry and VERSION_TAG.fullmatch(hub(entry)[1]):
        return hub(entry)[1]
    return None


def read_remote_info(name: str, url: str, storage_options: Mapping) -> dict:
    """The ``meta/info.json`` of the dataset at ``url`` (one small read).

    Raises:
        DatasetError: it cannot be read or is not a JSON object.
        robopipe.retry.RemoteReadError: the read failed on every attempt of the retry budget.
    """
    path = f"{url}/{INFO_PATH}"
    try:
        fs, fs_path = open_url(path, storage_options)
        info = json.loads(cat_file(fs, fs_path))  # retried (robopipe.retry)
    except RemoteReadError:  # a server that kept failing: its one line, not a bad file
        raise
    except (OSError, ValueError) as exc:
        raise DatasetError(name, f"cannot read it ({exc})", file=path) from exc
    if not isinstance(info, dict):
        raise DatasetError(name, "not a JSON object", file=path)
    return info


class Remote:
    """Mixin of a remote source's URL and info.json (for a :class:`robopipe.sources.base.
    Source` subclass: uses its ``name``, ``entry`` and ``storage_options()``)."""

    @property
    def url(self) -> str:
        """Its fsspec URL (:func:`remote_url`)."""
        return remote_url(self.entry)

    def quality_location(self) -> str:
        """Its URL: the quality jobs read it where it is (range reads), never a copy."""
        return self.url

    @property
    def info(self) -> dict:
        """Its ``meta/info.json``, read once.

        Raises:
            DatasetError: it cannot be read or is not a JSON object.
        """
        if self._info is None:
            self._info = read_remote_info(self.name, self.url, self.storage_options())
        return self._info

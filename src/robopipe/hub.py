"""Read a LeRobot v2.1 dataset repository on the Hugging Face Hub file by file: the commit a
revision names, the repo tree (sizes and LFS sha256), and byte ranges of one file
(:mod:`robopipe.source_cache` fetches files with them). ``HF_ENDPOINT`` and ``HF_TOKEN`` are
honoured (huggingface_hub reads them)."""

from __future__ import annotations

import os

from fsspec.spec import AbstractBufferedFile

from robopipe.errors import DatasetError
from robopipe.layout import DATASET_FOLDERS

# huggingface_hub's telemetry contacts huggingface.co whatever HF_ENDPOINT says; it reads this
# when it is imported, which robopipe's jobs do through this module
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


def resolve_commit(repo_id: str, revision: str, *, name: str | None = None) -> str:
    """The commit sha that ``revision`` (a branch, tag or sha) of dataset ``repo_id`` names,
    from one ``HEAD`` of its ``meta/info.json`` (``X-Repo-Commit``): every later read of the
    run is pinned to it.

    Raises:
        DatasetError: the repository, the revision or ``meta/info.json`` does not exist
            (``name`` names the dataset; default ``repo_id``).
        huggingface_hub.errors.HfHubHTTPError: other Hub errors (no access, unreachable).
    """
    from huggingface_hub import get_hf_file_metadata, hf_hub_url
    from huggingface_hub.errors import (
        EntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    url = hf_hub_url(repo_id, "meta/info.json", repo_type="dataset", revision=revision)
    try:
        return get_hf_file_metadata(url).commit_hash
    except (RepositoryNotFoundError, RevisionNotFoundError, EntryNotFoundError) as exc:
        what = {
            RevisionNotFoundError: "revision",
            EntryNotFoundError: "meta/info.json",
        }.get(type(exc), "dataset repository")
        raise DatasetError(
            name or repo_id, f"{what} not found on the Hub: {repo_id}@{revision}"
        ) from None


def list_files(repo_id: str, commit: str) -> dict[str, list]:
    """Every file under ``meta/``, ``data/`` and ``videos/`` of ``repo_id`` at ``commit``:
    ``{path: [size in bytes, sha256 hex or None]}``, the sha256 being the LFS oid the tree
    listing gives for LFS files (``HfApi.list_repo_tree(recursive=True)``, one paginated
    listing per folder; a folder the repo lacks lists nothing)."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import EntryNotFoundError

    api, files = HfApi(), {}
    for folder in DATASET_FOLDERS:
        try:
            for entry in api.list_repo_tree(
                repo_id, folder, recursive=True, revision=commit, repo_type="dataset"
            ):
                if hasattr(entry, "size"):  # a RepoFile; RepoFolders have no size
                    files[entry.path] = [entry.size, entry.lfs.sha256 if entry.lfs else None]
        except EntryNotFoundError:
            continue
    return files


class HubRangeFile(AbstractBufferedFile):
    """One file of a Hub dataset repo at a commit, read by HTTP ``Range`` requests
    (fsspec's buffered file; huggingface_hub's session, headers and retries): a footer or a
    header costs what is read, not the file.

    Args:
        repo_id, commit, path: the file.
        size: its size in bytes (from the tree listing: no request to learn it).
        block_size: the least bytes one request fetches (with the ``readahead`` cache).
        cache_type: fsspec's cache of the file (``none``: each read is one request).
    """

    def __init__(
        self,
        repo_id: str,
        commit: str,
        path: str,
        size: int,
        block_size: int,
        cache_type: str = "readahead",
    ):
        from huggingface_hub import hf_hub_url

        self.url = hf_hub_url(repo_id, path, repo_type="dataset", revision=commit)
        super().__init__(None, path, "rb", block_size, cache_type=cache_type, size=size)

    def _fetch_range(self, start: int, end: int) -> bytes:
        from huggingface_hub.utils import build_hf_headers, http_backoff

        end = min(end, self.size)
        if start >= end:
            return b""
        headers = {**build_hf_headers(), "Range": f"bytes={start}-{end - 1}"}
        response = http_backoff("GET", self.url, headers=headers, follow_redirects=True)
        response.raise_for_status()
        return response.content

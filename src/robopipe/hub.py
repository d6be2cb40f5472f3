"""Fetch a LeRobot v2.1 dataset from the Hugging Face Hub."""

from __future__ import annotations

import shutil
from pathlib import Path

from robopipe.atomic import atomic_path
from robopipe.errors import DatasetError


def fetch_dataset(
    repo_id: str,
    revision: str,
    output: str | Path,
    *,
    name: str | None = None,
    endpoint: str | None = None,
) -> None:
    """Download ``repo_id`` at ``revision`` (a branch or tag, ``v2.1`` for LeRobot's v2.1
    datasets) into ``output`` with ``huggingface_hub.snapshot_download``.

    Only the files the converter reads are fetched (``meta/``, ``data/``, ``videos/``).
    ``endpoint`` overrides the Hub address (``HF_ENDPOINT`` is honoured too). The folder
    appears only once the download is complete.

    Raises:
        DatasetError: the repository or the revision does not exist (``name`` names the
            dataset in the message; default ``repo_id``).
        huggingface_hub.errors.HfHubHTTPError: other Hub errors (no access, unreachable).
    """
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

    with atomic_path(output) as tmp:
        try:
            snapshot_download(
                repo_id=repo_id,
                repo_type="dataset",
                revision=revision,
                local_dir=tmp,
                allow_patterns=["meta/*", "data/*", "videos/*"],
                endpoint=endpoint,
            )
        except (RepositoryNotFoundError, RevisionNotFoundError) as exc:
            what = "revision" if isinstance(exc, RevisionNotFoundError) else "dataset repository"
            raise DatasetError(
                name or repo_id, f"{what} not found on the Hub: {repo_id}@{revision}"
            ) from None
        shutil.rmtree(tmp / ".cache", ignore_errors=True)  # snapshot_download's bookkeeping

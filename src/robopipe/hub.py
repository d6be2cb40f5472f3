"""Fetch a LeRobot v2.1 dataset from the Hugging Face Hub."""

from __future__ import annotations

from pathlib import Path

from robopipe.atomic import atomic_path


def fetch_dataset(repo_id: str, revision: str, output: str | Path, *, endpoint: str | None = None):
    """Download ``repo_id`` at ``revision`` (a branch or tag, ``v2.1`` for LeRobot's v2.1
    datasets) into ``output`` with ``huggingface_hub.snapshot_download``.

    Only the files the converter reads are fetched (``meta/``, ``data/``, ``videos/``).
    ``endpoint`` overrides the Hub address (``HF_ENDPOINT`` is honoured too). The folder
    appears only once the download is complete.

    Raises:
        huggingface_hub.errors.HfHubHTTPError and subclasses: unknown repository or revision,
            no access, or the Hub unreachable.
    """
    from huggingface_hub import snapshot_download

    with atomic_path(output) as tmp:
        snapshot_download(
            repo_id=repo_id,
            repo_type="dataset",
            revision=revision,
            local_dir=tmp,
            allow_patterns=["meta/*", "data/*", "videos/*"],
            endpoint=endpoint,
        )

"""Errors raised on bad input: each names the dataset, and where known the episode and file."""

from __future__ import annotations

from pathlib import Path


class DatasetError(Exception):
    """Bad or inconsistent input data.

    The message always starts with the dataset name, then the episode index and the file
    when they are known, so a failed job's log says where to look:
    ``dataset 'cr5': episode 12: file videos/.../episode_000012.mp4: 197 frames in the mp4 ...``.
    ``reason`` is the message alone (what is wrong; what to do).
    """

    def __init__(
        self,
        dataset: str,
        message: str,
        *,
        episode: int | None = None,
        file: str | Path | None = None,
    ) -> None:
        self.dataset = dataset
        self.reason = message
        self.episode = episode
        self.file = None if file is None else str(file)
        parts = [f"dataset {dataset!r}"]
        if episode is not None:
            parts.append(f"episode {episode}")
        if file is not None:
            parts.append(f"file {file}")
        super().__init__(": ".join(parts) + ": " + message)

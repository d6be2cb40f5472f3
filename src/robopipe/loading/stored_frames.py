"""Frames stored in the data parquet files: ``image`` features (encoded images, HF
``datasets.Image()`` structs, as lerobot stores them; ``robopipe.copies`` writes JPEG and raw
PPM images).

A frame is read with one row group of its file's column (``pyarrow.parquet.ParquetFile.
read_row_group``), not the whole file; files are opened once per process.
"""

from __future__ import annotations

import os

import numpy as np
import pyarrow.parquet as pq
import torch
from fsspec.implementations.local import LocalFileSystem

from robopipe.errors import DatasetError
from robopipe.formats.images import decode_image
from robopipe.formats.v30_reader import open_file


class StoredFrames:
    """Reads the frames of ``meta.stored_frame_keys`` by episode and row.

    Args:
        meta: the dataset's metadata (``robopipe.formats.v30_reader.DatasetMeta``).
    """

    def __init__(self, meta) -> None:
        self.meta = meta
        episodes = meta.episodes
        self._file_start: dict[str, int] = {}
        for e in range(meta.num_episodes):
            relative = meta.data_file(e)
            start = int(episodes["dataset_from_index"][e])
            self._file_start[relative] = min(start, self._file_start.get(relative, start))
        self._files: dict[str, tuple[pq.ParquetFile, np.ndarray]] = {}
        self._pid: int | None = None

    def __getstate__(self):
        return {**self.__dict__, "_files": {}, "_pid": None}

    def _open(self, relative: str) -> tuple[pq.ParquetFile, np.ndarray]:
        if self._pid != os.getpid():  # files opened by another process are not shared
            self._files, self._pid = {}, os.getpid()
        if relative not in self._files:
            path = self.meta.path(relative)
            local = isinstance(self.meta.fs, LocalFileSystem)  # a path reads 4x faster
            parquet = pq.ParquetFile(
                path if local else open_file(self.meta.fs, path, self.meta.retry_budget)
            )
            rows = [parquet.metadata.row_group(g).num_rows for g in range(parquet.num_row_groups)]
            self._files[relative] = (parquet, np.cumsum([0, *rows]))
        return self._files[relative]

    def read(self, key: str, episode: int, positions: np.ndarray) -> torch.Tensor:
        """Frames of ``key`` at rows ``positions`` of ``episode``: (T, C, H, W) uint8.

        Raises:
            DatasetError: a stored frame cannot be decoded (names the episode, the frame
                and the data file).
        """
        relative = self.meta.data_file(episode)
        parquet, starts = self._open(relative)
        first = int(self.meta.episodes["dataset_from_index"][episode]) - self._file_start[relative]
        frames = []
        for position in np.asarray(positions).reshape(-1):
            row = first + int(position)
            group = int(np.searchsorted(starts, row, side="right")) - 1
            column = parquet.read_row_group(group, columns=[key], use_threads=False).column(0)
            data = column.chunk(0).field("bytes")[row - int(starts[group])].as_py()
            try:
                rgb = decode_image(data)
            except (ValueError, OSError) as error:  # simplejpeg's and Pillow's decode errors
                raise DatasetError(
                    self.meta.name,
                    f"frame {int(position)} of {key} cannot be decoded: {error}",
                    episode=episode,
                    file=relative,
                ) from error
            frames.append(torch.from_numpy(rgb).permute(2, 0, 1))
        return frames[0].unsqueeze(0) if len(frames) == 1 else torch.stack(frames)

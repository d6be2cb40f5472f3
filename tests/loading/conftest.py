"""A small converted v3.0 dataset whose videos roll over into several files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from torchcodec.decoders import VideoDecoder

from robopipe.conversion.serial import convert_dataset

VIDEO_FILE_SIZE_IN_MB = 0.02  # ~2 episodes of 32x48 AV1 per mp4


@pytest.fixture(scope="session")
def rollover(make_v21, tmp_path_factory) -> tuple[Path, Path]:
    """(v2.1 source, v3.0 dataset): 8 episodes, 2 cameras, 10 fps, videos in 4 files each."""
    source = make_v21(episodes=8, cameras=2, fps=10, min_length=12, max_length=30)
    output = tmp_path_factory.mktemp("v30") / "rollover"
    convert_dataset(source, output, name="rollover", video_file_size_in_mb=VIDEO_FILE_SIZE_IN_MB)
    return source, output


class Source:
    """Ground truth read straight from the v2.1 files: parquet rows and mp4 frames."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.info = json.loads((root / "meta/info.json").read_text())
        self.rows = pq.read_table(sorted(root.glob("data/*/*.parquet"))).to_pandas()
        self.rows = self.rows.sort_values("index").reset_index(drop=True)
        self._decoders = {}

    def frame(self, camera: str, index: int) -> np.ndarray:
        """(C, H, W) uint8 frame of global index ``index``, decoded from its episode mp4."""
        row = self.rows.iloc[index]
        episode = int(row["episode_index"])
        path = self.root / self.info["video_path"].format(
            episode_chunk=episode // self.info["chunks_size"],
            video_key=camera,
            episode_index=episode,
        )
        if path not in self._decoders:
            self._decoders[path] = VideoDecoder(str(path), seek_mode="exact")
        return self._decoders[path][int(row["frame_index"])].numpy()


@pytest.fixture(scope="session")
def source(rollover) -> Source:
    return Source(rollover[0])


@pytest.fixture(scope="session")
def larger(make_v21, tmp_path_factory) -> Path:
    """A converted v3.0 dataset whose mp4s are far larger than their first 64 KiB (so that
    reading a frame takes more than the mp4's head): 6 episodes, 2 H.264 cameras 240x320."""
    source = make_v21(
        episodes=6,
        cameras=2,
        fps=10,
        min_length=40,
        max_length=60,
        height=240,
        width=320,
        codec="h264",
    )
    output = tmp_path_factory.mktemp("v30") / "larger"
    convert_dataset(source, output, name="larger")
    return output

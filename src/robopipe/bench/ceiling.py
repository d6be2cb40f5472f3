"""A dataset's decode ceiling: frames/s one core decodes, sequentially and at random frames.

Videos: torchcodec, one FFmpeg thread, one torch thread: the figures are per core. Frames
stored in the data files (a JPEG or raw copy): read and decoded by the loaders' own reader
(``robopipe.loading.stored_frames``). A random-access loader with W workers can at best reach
``random_frames_per_s_per_core * W``. The CPU milliseconds per frame (process CPU time, all
threads) are the same limit in a unit that other load on a shared machine disturbs less:
compare them with a loader's CPU milliseconds per sample.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from fsspec.implementations.local import LocalFileSystem
from torchcodec.decoders import VideoDecoder

from robopipe.formats.v30_reader import read_meta
from robopipe.loading.stored_frames import StoredFrames

SEQUENTIAL_CHUNK = 16  # frames per get_frames_in_range call


def measure_ceiling(
    root: str,
    dataset: str,
    *,
    frames: int = 300,
    seed: int = 0,
    seek_mode: str = "approximate",
    encoding: str | None = None,
    storage_options: dict | None = None,
) -> dict:
    """Decode up to ``frames`` frames per camera from each camera's first video file (or,
    for frames stored in the data files, from the whole dataset).

    ``root`` is a local folder or any fsspec URL (``storage_options`` its options); a remote
    dataset's video files are fetched into a temporary folder first, so that the figures are
    decoding alone, not the network.

    Returns:
        the contract's ceiling dict: dataset, encoding (the copy measured, or None),
        camera_count, sequential_frames_per_s_per_core, random_frames_per_s_per_core
        (wall clock), sequential_cpu_ms_per_frame, random_cpu_ms_per_frame, frames_measured,
        decoder ("torchcodec", or "parquet" for stored frames), ffmpeg_threads (1). The
        rates are None for a dataset without cameras (e.g. the low-dimensional robomimic
        Lift file).
    """
    torch.set_num_threads(1)
    meta = read_meta(root, name=dataset, storage_options=storage_options)
    rng = np.random.default_rng(seed)
    seq_frames = seq_s = rand_frames = rand_s = seq_cpu = rand_cpu = 0.0
    fetched = tempfile.TemporaryDirectory(prefix="robopipe-ceiling-")
    for cam in meta.video_keys:
        path = meta.path(meta.video_file(cam, 0))
        if not isinstance(meta.fs, LocalFileSystem):
            local = Path(fetched.name) / f"{len(list(Path(fetched.name).iterdir()))}.mp4"
            meta.fs.get_file(path, str(local))
            path = str(local)
        decoder = VideoDecoder(path, seek_mode=seek_mode, num_ffmpeg_threads=1)
        n = min(frames, len(decoder))
        start, cpu = time.perf_counter(), time.process_time()
        for first in range(0, n, SEQUENTIAL_CHUNK):
            decoder.get_frames_in_range(first, min(n, first + SEQUENTIAL_CHUNK))
        seq_s += time.perf_counter() - start
        seq_cpu += time.process_time() - cpu
        seq_frames += n
        decoder = VideoDecoder(path, seek_mode=seek_mode, num_ffmpeg_threads=1)
        indices = rng.integers(0, len(decoder), n)
        start, cpu = time.perf_counter(), time.process_time()
        for i in indices:
            decoder.get_frame_at(int(i))
        rand_s += time.perf_counter() - start
        rand_cpu += time.process_time() - cpu
        rand_frames += n
    if meta.stored_frame_keys:
        stored = StoredFrames(meta)
        for cam in meta.stored_frame_keys:
            n = min(frames, meta.num_frames)
            for order, indices in (
                ("seq", np.arange(n)),
                ("rand", rng.integers(0, meta.num_frames, n)),
            ):
                start, cpu = time.perf_counter(), time.process_time()
                for i in indices:
                    episode = int(meta.episode_of(int(i)))
                    row = int(i) - int(meta.episodes["dataset_from_index"][episode])
                    stored.read(cam, episode, np.array([row]))
                elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
                if order == "seq":
                    seq_s, seq_frames, seq_cpu = seq_s + elapsed, seq_frames + n, seq_cpu + cpu
                else:
                    rand_s, rand_frames = rand_s + elapsed, rand_frames + n
                    rand_cpu += cpu
    fetched.cleanup()
    return {
        "dataset": dataset,
        "encoding": encoding,
        "camera_count": len(meta.camera_keys),
        "sequential_frames_per_s_per_core": seq_frames / seq_s if seq_frames else None,
        "random_frames_per_s_per_core": rand_frames / rand_s if rand_frames else None,
        "sequential_cpu_ms_per_frame": 1000 * seq_cpu / seq_frames if seq_frames else None,
        "random_cpu_ms_per_frame": 1000 * rand_cpu / rand_frames if rand_frames else None,
        "frames_measured": int(seq_frames + rand_frames),
        "decoder": "parquet" if meta.stored_frame_keys else "torchcodec",
        "ffmpeg_threads": 1,
    }

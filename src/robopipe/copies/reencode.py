"""Re-encode one mp4 of a v3.0 dataset (PyAV), keeping every frame's pts and the time base.

The episodes' ``videos/<cam>/from_timestamp`` values and the loaders' timestamp checks stay
valid because each output frame keeps its source pts. Encoders run on one thread: one job is
one core, and Snakemake runs one job per file in parallel.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import av

from robopipe.atomic import atomic_path, link_or_copy
from robopipe.copies.encodings import Encoding
from robopipe.copies.fidelity import Fidelity
from robopipe.remux import scheduling_kept


def resized(frame: av.VideoFrame, size: tuple[int, int] | None, fmt: str) -> av.VideoFrame:
    """``frame`` in pixel format ``fmt`` at ``size`` (height, width), FFmpeg's area filter."""
    if size is None:
        return frame if frame.format.name == fmt else frame.reformat(format=fmt)
    height, width = size
    return frame.reformat(width=width, height=height, format=fmt, interpolation="AREA")


def reference_frames(path: Path, size: tuple[int, int] | None):
    """The source frames of ``path``, each a callable giving (H, W, 3) uint8 RGB resized to
    ``size`` if given (converted only when called)."""
    with av.open(str(path)) as container:
        for frame in container.decode(video=0):
            yield lambda frame=frame: resized(frame, size, "rgb24").to_ndarray()


def copy_video(source: Path, output: Path, encoding: Encoding, *, fidelity_stride: int = 1) -> dict:
    """Write ``output``, ``source`` in ``encoding`` (``original`` or ``video`` kind); compare
    every ``fidelity_stride``-th frame of the result with the source's.

    Returns:
        ``frames``, ``encode_s`` (wall seconds to read, decode, resize and encode: the
        copy's own cost; 0 for ``original``, a hard link), ``bytes`` (the output's size),
        ``fidelity`` (``robopipe.copies.fidelity.Fidelity.summary_parts``: per-frame PSNR,
        SSIM; empty for ``original``, whose packets are the source's) and ``width``,
        ``height``, ``codec`` (info.json's ``video.codec``).

    Raises:
        ValueError: an encoding whose frames do not stay in mp4 files.
    """
    if not encoding.in_video_files:
        raise ValueError(f"encoding {encoding.name!r} does not write mp4 files")
    output.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with atomic_path(output) as tmp:
        if encoding.kind == "original":
            link_or_copy(source, tmp)
        else:
            _encode(source, tmp, encoding)
    encode_s = 0.0 if encoding.kind == "original" else time.perf_counter() - start
    fidelity = Fidelity(fidelity_stride)
    with av.open(str(output)) as container:
        stream = container.streams.video[0]
        frames, width, height = stream.frames, stream.width, stream.height
        codec = stream.codec_context.name
        if encoding.kind != "original":
            frames = 0
            copied = (lambda f=f: f.to_ndarray(format="rgb24") for f in container.decode(stream))
            for reference, frame in zip(
                reference_frames(source, encoding.size), copied, strict=True
            ):
                fidelity.add(reference, frame)
                frames += 1
    return {
        "frames": int(frames),
        "encode_s": encode_s,
        "bytes": output.stat().st_size,
        "fidelity": fidelity.summary_parts() if encoding.kind != "original" else None,
        "width": width,
        "height": height,
        "codec": {"libdav1d": "av1", "libaom-av1": "av1"}.get(codec, codec),
    }


def _encode(source: Path, target: Path, encoding: Encoding) -> None:
    codec, options = encoding.codec
    os.environ.setdefault("SVT_LOG", "1")  # SVT-AV1 prints its whole configuration otherwise
    with (
        scheduling_kept(),
        av.open(str(source)) as inp,
        av.open(str(target), "w", format="mp4", options={"movflags": "faststart"}) as out,
    ):
        stream = inp.streams.video[0]
        height, width = encoding.size or (stream.height, stream.width)
        enc = out.add_stream(codec, rate=stream.average_rate)
        enc.width, enc.height, enc.pix_fmt = width, height, "yuv420p"
        enc.time_base = stream.time_base
        enc.thread_count = 1
        enc.options = dict(options)
        for frame in inp.decode(stream):
            image = resized(frame, encoding.size, "yuv420p")
            image.pts, image.time_base = frame.pts, frame.time_base
            image.pict_type = av.video.frame.PictureType.NONE
            out.mux(enc.encode(image))
        out.mux(enc.encode(None))

"""Re-encode an edit's video file where a cut falls inside a GOP, the one cut a stream copy
cannot make.

An episode whose first packet is no keyframe decodes only after the packets before it (its
GOP's keyframe onwards), which belong to the episode before it in the input file. Where that
episode is kept right before it in the output too, the packets run on unbroken and are
copied. Otherwise (the episode before it deleted, or in another output file) the output file
is re-encoded: its input file is decoded from the start and the kept frames are encoded anew,
each at its input pts shifted as the stream copy would shift it (so every ``from_timestamp``
and frame timestamp is what the copy would have written) and with a keyframe forced at each
episode start, so that a later edit of the output cuts it by stream copy.

The encoder settings are lerobot 0.6.1's ``encode_video_frames`` defaults (``g=2``,
``crf=30``, yuv420p; libsvtav1 for AV1, libx264 for H.264), the encoder on one thread (one
job is one core). The whole file is re-encoded, not the one GOP: copied and re-encoded
packets in one track would need the encoder to write the input's parameter sets
(``avcC``/``av1C``), which it does not.
"""

from __future__ import annotations

import os
from fractions import Fraction
from pathlib import Path

import numpy as np

from robopipe.atomic import atomic_path
from robopipe.copies.fidelity import Fidelity
from robopipe.errors import DatasetError
from robopipe.formats.v21_writer import VIDEO_CRF, VIDEO_GOP, VIDEO_PIX_FMT
from robopipe.mp4 import Track
from robopipe.remux import MP4, scheduling_kept

# the input's codec (FFmpeg's name, as robopipe.mp4.Track.codec) -> the encoder used
REENCODERS = {"av1": "libsvtav1", "h264": "libx264"}
FIDELITY_STRIDE = 10  # every 10th re-encoded frame is compared with its input frame


def cuts_inside_a_gop(track: Track, runs: list[tuple[int, int]]) -> list[int]:
    """Positions ``k`` of the runs (``(first, stop)`` packet indices in decode order, one per
    kept episode, in output order) whose first packet is no keyframe and that do not follow
    run ``k - 1`` directly in the input (``runs[k - 1][1] == first``)."""
    return [
        k
        for k, (first, _) in enumerate(runs)
        if not track.keyframes[first] and (k == 0 or runs[k - 1][1] != first)
    ]


def reencode_file(
    name: str, source: Path, track: Track, spans: list[tuple[int, int, int]], output: Path
) -> dict:
    """Write ``output``: the frames of ``source`` whose pts lie in one of ``spans`` (``(lo,
    hi, shift)`` in ticks of ``track.timescale``: the kept episodes' ``[from, to)`` in the
    input file, in output order, and what to add to a frame's pts there), encoded anew at
    pts + shift, a keyframe at each span's first frame.

    Returns:
        ``Fidelity.summary()`` of every :data:`FIDELITY_STRIDE`-th output frame against its
        input frame (PSNR in dB, SSIM), with ``encoder``.

    Raises:
        DatasetError: the codec has no encoder in :data:`REENCODERS`, the spans are not in
            the input's order, or the output's frames are not as many as the input's kept ones.
    """
    encoder = REENCODERS.get(track.codec)
    if encoder is None:
        raise DatasetError(
            name,
            f"a cut inside a GOP needs the file re-encoded, done for {sorted(REENCODERS)} "
            f"only, not {track.codec}",
            file=source,
        )
    if any(b[0] < a[1] for a, b in zip(spans, spans[1:], strict=False)):
        raise DatasetError(name, "the kept episodes are not in the input's order", file=source)
    import av

    options = {"g": str(VIDEO_GOP), "crf": str(VIDEO_CRF)}
    if encoder == "libsvtav1":
        options["svtav1-params"] = "lp=1"  # one thread (see robopipe.formats.v21_writer)
        os.environ.setdefault("SVT_LOG", "1")
    time_base = Fraction(1, track.timescale)
    with (
        scheduling_kept(),
        av.open(str(source), format=MP4) as inp,
        atomic_path(output) as tmp,
        av.open(str(tmp), "w", format="mp4", options={"movflags": "faststart"}) as out,
    ):
        video = inp.streams.video[0]
        stream = out.add_stream(encoder, rate=video.average_rate, options=options)
        stream.width, stream.height, stream.pix_fmt = video.width, video.height, VIDEO_PIX_FMT
        stream.time_base = time_base
        stream.thread_count = 1
        for frame, pts, first in _kept_frames(inp, spans):
            image = frame.reformat(format=VIDEO_PIX_FMT)
            image.pts, image.time_base = pts, time_base
            kind = av.video.frame.PictureType
            image.pict_type = kind.I if first else kind.NONE
            out.mux(stream.encode(image))
        out.mux(stream.encode(None))
    fidelity = Fidelity(FIDELITY_STRIDE)
    with av.open(str(source), format=MP4) as inp, av.open(str(output), format=MP4) as got:
        kept = (frame for frame, _, _ in _kept_frames(inp, spans))
        copied = got.decode(video=0)
        for want, have in zip(kept, copied, strict=False):
            fidelity.add(
                lambda f=want: f.to_ndarray(format="rgb24"),
                lambda f=have: f.to_ndarray(format="rgb24"),
            )
        if next(kept, None) is not None or next(copied, None) is not None:
            raise DatasetError(name, "re-encoded frames differ in number from the input's",
                               file=output)  # fmt: skip
    return {"encoder": encoder, **fidelity.summary()}


def _kept_frames(container, spans: list[tuple[int, int, int]]):
    """(frame, output pts, first of its span) for each decoded frame inside a span."""
    container.streams.video[0].thread_type = "AUTO"
    los = np.array([lo for lo, _, _ in spans])
    seen = set()
    for frame in container.decode(video=0):
        k = int(np.searchsorted(los, frame.pts, side="right")) - 1
        if k < 0 or frame.pts >= spans[k][1]:
            continue
        yield frame, frame.pts + spans[k][2], k not in seen
        seen.add(k)

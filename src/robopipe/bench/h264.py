"""An H.264 copy of a v3.0 dataset, for NVDEC (Hopper and A100 GPUs cannot decode AV1).

Every mp4 is re-encoded with libx264 keeping each frame's pts and the stream time base, so
the episodes' ``from_timestamp`` values and the loader's timestamp checks stay valid; the
other files are copied and info.json's ``video.codec`` becomes ``h264``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import av

from robopipe.atomic import atomic_path
from robopipe.layout import INFO_PATH


def make_h264_copy(source: str | Path, output: str | Path, *, crf: int = 23, gop: int = 2) -> None:
    """Write ``output``: ``source`` (a v3.0 dataset) with H.264 videos.

    Args:
        crf: x264 constant rate factor.
        gop: keyframe interval in frames (lerobot encodes with g=2); no B-frames.
    """
    source, output = Path(source), Path(output)
    with atomic_path(output) as tmp:
        shutil.copytree(source, tmp, ignore=shutil.ignore_patterns("*.mp4"))
        for mp4 in sorted(source.glob("videos/*/*/*.mp4")):
            reencode(mp4, tmp / mp4.relative_to(source), crf=crf, gop=gop)
        info = json.loads((tmp / INFO_PATH).read_text())
        for feature in info["features"].values():
            if feature.get("dtype") == "video" and "info" in feature:
                feature["info"]["video.codec"] = "h264"
        (tmp / INFO_PATH).write_text(json.dumps(info, indent=4, ensure_ascii=False))


def reencode(src: Path, dst: Path, *, crf: int, gop: int) -> None:
    """Re-encode one mp4 to H.264 yuv420p with the same pts and time base."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(src)) as inp, av.open(str(dst), "w", options={"movflags": "faststart"}) as out:
        stream = inp.streams.video[0]
        enc = out.add_stream("libx264", rate=stream.average_rate)
        enc.width, enc.height, enc.pix_fmt = stream.width, stream.height, "yuv420p"
        enc.time_base = stream.time_base
        enc.options = {"crf": str(crf), "g": str(gop), "bf": "0"}
        for frame in inp.decode(stream):
            frame.pict_type = av.video.frame.PictureType.NONE
            out.mux(enc.encode(frame))
        out.mux(enc.encode(None))

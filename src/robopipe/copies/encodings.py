"""Training-copy encodings: names like ``h264g2``, ``jpeg90_224``, parsed in one place.

A name is ``{base}[_{size}]``: ``base`` picks the representation, ``size`` an optional
training resolution, ``224`` (224x224) or ``HxW`` (e.g. ``240x320``). Frames are resized to
exactly that size (the aspect ratio is not kept, as ``torchvision.transforms.Resize((H, W))``
in a policy's preprocessing would do), with FFmpeg's area filter.

| base | representation |
|---|---|
| ``original`` | the source mp4s, stream-copied (hard-linked): packets identical |
| ``h264g2`` | H.264 (libx264, crf 23), keyframe every 2 frames, no B-frames |
| ``h264intra`` | H.264 (libx264, crf 23), every frame a keyframe |
| ``hevc`` | HEVC (libx265, crf 28), keyframe every 2 frames, no B-frames |
| ``av1fast`` | AV1 (libsvtav1, crf 30, preset 8, ``fast-decode=1``), keyframe every 2 frames |
| ``jpeg{Q}`` | one JPEG per frame at quality Q (1-100), an ``image`` feature in the data parquet |
| ``raw`` | the RGB bytes of each frame (a binary PPM), an ``image`` feature in the data parquet |
| ``lance`` | lerobot-lancedb's Lance layout (the mp4s verbatim), read by LanceDBDataset only |

Every copy but ``lance`` is made one job per output file (:data:`FILE_ENCODING_PATTERN`);
``lance`` in one job per dataset in the peer environment (:mod:`robopipe.copies.lance`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# libx264/libx265/libsvtav1 settings of each video encoding (PyAV codec name, options)
VIDEO_CODECS = {
    "h264g2": ("libx264", {"crf": "23", "g": "2", "bf": "0"}),
    "h264intra": ("libx264", {"crf": "23", "g": "1", "bf": "0"}),
    "hevc": ("libx265", {"crf": "28", "g": "2", "bf": "0", "x265-params": "log-level=error"}),
    "av1fast": (
        "libsvtav1",
        {"crf": "30", "g": "2", "preset": "8", "svtav1-params": "fast-decode=1:lp=1"},
    ),
}
BASE_PATTERN = rf"(?:original|raw|jpeg\d{{1,3}}|{'|'.join(VIDEO_CODECS)})"
SIZE_PATTERN = r"\d+(?:x\d+)?"
LANCE = "lance"  # the Lance layout, made whole by lerobot-lance-convert
# the copies made one job per output file (rules copy_file, copy_finish)
FILE_ENCODING_PATTERN = rf"{BASE_PATTERN}(?:_{SIZE_PATTERN})?"
ENCODING_PATTERN = rf"(?:{LANCE}|{FILE_ENCODING_PATTERN})"
_ENCODING = re.compile(rf"^(?P<base>{BASE_PATTERN}|{LANCE})(?:_(?P<size>{SIZE_PATTERN}))?$")


@dataclass(frozen=True)
class Encoding:
    """A parsed encoding name.

    Attributes:
        name: the name as written (``jpeg90_224``).
        kind: ``original``, ``video``, ``jpeg``, ``raw`` or ``lance``.
        base: the name without its size (``jpeg90``).
        size: (height, width) in pixels, or None to keep the source's.
        quality: JPEG quality (1-100) for ``jpeg``, else None.
    """

    name: str
    kind: str
    base: str
    size: tuple[int, int] | None
    quality: int | None

    @property
    def codec(self) -> tuple[str, dict]:
        """(PyAV encoder name, encoder options) of a ``video`` encoding."""
        return VIDEO_CODECS[self.base]

    @property
    def in_video_files(self) -> bool:
        """True when frames stay in mp4 files (one output per source mp4); False when they
        move into the data parquet files (one output per data file)."""
        return self.kind in ("original", "video")


def parse_encoding(name: str) -> Encoding:
    """Parse an encoding name (see the module docstring).

    Raises:
        ValueError: an unknown name, a JPEG quality outside 1-100, a zero size, or a resized
            ``original`` (a stream copy cannot change the resolution).
    """
    match = _ENCODING.match(name)
    if not match:
        raise ValueError(
            f"bad encoding {name!r}: expected original, h264g2, h264intra, hevc, av1fast, "
            "jpeg<quality> or raw, optionally followed by _<size> or _<height>x<width>, or lance"
        )
    base, size_text = match["base"], match["size"]
    size = None
    if size_text:
        h, _, w = size_text.partition("x")
        size = (int(h), int(w or h))
        if min(size) < 1:
            raise ValueError(f"bad encoding {name!r}: size must be positive")
    quality = None
    if base == LANCE:
        kind = LANCE
        if size:
            raise ValueError(f"bad encoding {name!r}: lance stores the mp4s as they are, no size")
    elif base == "original":
        kind = "original"
        if size:
            raise ValueError(f"bad encoding {name!r}: original is a stream copy, it cannot resize")
    elif base == "raw":
        kind = "raw"
    elif base.startswith("jpeg"):
        kind, quality = "jpeg", int(base[4:])
        if not 1 <= quality <= 100:
            raise ValueError(f"bad encoding {name!r}: JPEG quality must be 1-100")
    else:
        kind = "video"
    return Encoding(name=name, kind=kind, base=base, size=size, quality=quality)

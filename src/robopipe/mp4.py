"""A plain mp4's video track read from its boxes, with FFmpeg's timestamps, without FFmpeg.

Opening a small mp4 with PyAV costs about 0.3 ms (format setup, stream probing); a converter
that opens 60,000 episode mp4s spends most of its time there. :func:`read_track` reads only the
``moov`` index (the sample table, ISO/IEC 14496-12 §8.6-8.7) and gives the packets FFmpeg's
mov demuxer would give, for the common layout that lerobot's and robopipe's encoders write:
one video track, one sample description (``avc1``, ``hvc1`` or ``av01`` with its parameter
sets in the configuration box), no fragments, no sample groups, no ``sdtp`` in HEVC, at most
one edit that starts at or before the first presented sample and covers the whole media.
Anything else returns None, and callers open the file with PyAV as before: the fast path is
taken only where it gives FFmpeg's facts (tested packet by packet against PyAV in
``tests/test_mp4.py``).

FFmpeg's rules followed (``libavformat/mov.c``): packet dts are the sample table's decode times
minus the edit's ``media_time``, pts add the composition offset (``ctts``); a packet's duration
is its ``stts`` delta; keyframes are the ``stss`` samples (all samples without ``stss``); the
stream duration is the ``mdhd`` duration; ``stream.frames`` is the sample count. An ``sdtp``
box (sample dependencies; FFmpeg 8's libsvtav1 encoder writes one) marks packets disposable,
but FFmpeg parses the headers of H.264 and AV1 packets on demux (``need_parsing``), which drops
that flag: for those codecs the packets are the same with or without it. HEVC packets keep it,
and PyAV cannot set it on a packet it muxes, so an HEVC ``sdtp`` returns None.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

import numpy as np

# sample entries whose configuration box holds the parameter sets (codec, size and pixel
# format are then fixed by the sample description's bytes); the codec as FFmpeg names it
CODECS = {b"avc1": "h264", b"hvc1": "hevc", b"av01": "av1"}
CONFIG_BOXES = {b"avc1": "avcC", b"hvc1": "hvcC", b"av01": "av1C"}
# boxes of a sample table that change what FFmpeg's demuxer gives (flags, sync samples)
UNSUPPORTED = frozenset(("sbgp", "sgpd", "stps", "stsh"))
# sample entries whose packets FFmpeg's demuxer parses, dropping sdtp's disposable flag
PARSED = frozenset((b"avc1", b"av01"))


@dataclass(frozen=True)
class Track:
    """An mp4's video track: its sample description and every packet as FFmpeg demuxes it.

    Attributes:
        codec: FFmpeg's codec name (``h264``, ``hevc``, ``av1``).
        width, height: the sample entry's frame size in pixels.
        parameters: the sample entry's type and frame size and its configuration box (the
            codec's parameter sets, FFmpeg's extradata): equal bytes mean equal codec,
            frame size, pixel format and extradata.
        timescale: ticks per second (the stream's time base is ``1/timescale``).
        duration: the stream duration in ticks (``mdhd``).
        offsets, sizes: int64 arrays, per packet in decode order: byte offset and size.
        dts, pts, durations: int64 arrays, per packet, in ticks.
        keyframes: bool array, per packet.
        file_size: the file's size in bytes.
    """

    codec: str
    width: int
    height: int
    parameters: bytes
    timescale: int
    duration: int
    offsets: np.ndarray
    sizes: np.ndarray
    dts: np.ndarray
    pts: np.ndarray
    durations: np.ndarray
    keyframes: np.ndarray
    file_size: int

    @property
    def frames(self) -> int:
        """The number of packets (one per frame)."""
        return len(self.sizes)

    @property
    def intact(self) -> bool:
        """Every packet lies inside the file, and the last one ends at the stream's duration
        or later (:func:`robopipe.remux.intact_until`'s test)."""
        ends = self.offsets + self.sizes
        last = int((self.pts + self.durations).max())
        return int(ends.max()) <= self.file_size and last >= self.duration


def plain_track(path: str | os.PathLike) -> Track | None:
    """:func:`read_track` where it reads the file and the track is intact with a duration;
    None for anything else (a missing, unreadable, truncated or unusual file), which the
    caller then opens with PyAV, so that FFmpeg names what is wrong with it."""
    try:
        track = read_track(path)
    except OSError:
        return None
    return track if track is not None and track.duration > 0 and track.intact else None


def boxes(data, start: int = 0, end: int | None = None):
    """(type, payload start, box end) of the boxes in ``data[start:end]``, in order; stops at
    a box whose size field is impossible."""
    end = len(data) if end is None else end
    pos = start
    while pos + 8 <= end:
        size, kind = struct.unpack_from(">I4s", data, pos)
        header = 8
        if size == 1:
            (size,) = struct.unpack_from(">Q", data, pos + 8)
            header = 16
        elif size == 0:
            size = end - pos
        if size < header:
            return
        yield kind.decode("latin-1"), pos + header, min(pos + size, end)
        pos += size


def child(data, start: int, end: int, kind: str) -> tuple[int, int] | None:
    """(payload start, end) of the first ``kind`` box in ``data[start:end]``, or None."""
    for k, s, e in boxes(data, start, end):
        if k == kind:
            return s, e
    return None


def box_path(data, start: int, end: int, *kinds: str) -> tuple[int, int] | None:
    """(payload start, end) of the box reached through ``kinds`` (first of each), or None."""
    for kind in kinds:
        found = child(data, start, end, kind)
        if found is None:
            return None
        start, end = found
    return start, end


def table(data, box: tuple[int, int] | None, fmt: str, width: int = 1) -> np.ndarray:
    """Entries of a full box whose 32-bit entry count follows version/flags: ``width``
    fields of ``fmt`` (a big-endian numpy dtype) each, as an (entries, width) array."""
    if box is None:
        return np.zeros((0, width), dtype=fmt)
    (count,) = struct.unpack_from(">I", data, box[0] + 4)
    return np.frombuffer(data, dtype=fmt, count=count * width, offset=box[0] + 8).reshape(-1, width)


def read_moov(path: str | os.PathLike) -> tuple[bytes, int] | None:
    """The ``moov`` box of the mp4 at ``path`` and the file's size, reading only box headers
    and the moov itself; None when the file has no moov or is fragmented.

    Raises:
        OSError: the file cannot be read.
    """
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size

        def read_at(start: int, end: int) -> bytes:
            f.seek(start)
            return f.read(end - start)

        found = find_moov(read_at, size)
    return None if found is None else (found[1], size)


def find_moov(read_at, size: int) -> tuple[int, bytes] | None:
    """The offset and bytes of the ``moov`` box of an mp4 of ``size`` bytes, walking the
    top-level box headers; None when the file has no whole moov or is fragmented (a ``moof``
    first). ``read_at(start, end)`` returns the file's bytes ``[start, end)`` (fewer at its
    end); its errors propagate."""
    pos = 0
    while pos + 8 <= size:
        header = read_at(pos, min(pos + 16, size))
        if len(header) < 8:
            return None
        box, kind = struct.unpack_from(">I4s", header)
        if box == 1 and len(header) == 16:
            (box,) = struct.unpack_from(">Q", header, 8)
        elif box == 0:
            box = size - pos
        if box < 8:
            return None
        if kind == b"moov":
            moov = read_at(pos, pos + box)
            return (pos, moov) if len(moov) == box else None
        if kind == b"moof":
            return None
        pos += box
    return None


def read_track(path: str | os.PathLike) -> Track | None:
    """The video track of the mp4 at ``path`` as FFmpeg demuxes it, or None where this parser
    does not follow FFmpeg (see the module's description: the caller opens it with PyAV).

    Raises:
        OSError: the file cannot be read.
    """
    found = read_moov(path)
    if found is None:
        return None
    moov, file_size = found
    try:
        return _parse(moov, file_size)
    except (struct.error, ValueError, IndexError, KeyError):
        return None  # a damaged or unusual index: PyAV decides


def children(data, start: int, end: int) -> dict[str, tuple[int, int]]:
    """The boxes in ``data[start:end]`` by type: (payload start, end) of the first of each."""
    found: dict[str, tuple[int, int]] = {}
    for kind, s, e in boxes(data, start, end):
        found.setdefault(kind, (s, e))
    return found


def _parse(moov: bytes, file_size: int) -> Track | None:
    top = [(k, s, e) for k, s, e in boxes(moov, 8)]
    traks = [(s, e) for k, s, e in top if k == "trak"]
    if len(traks) != 1 or any(k == "mvex" for k, _, _ in top):
        return None
    s, e = traks[0]
    trak = children(moov, s, e)
    mdia = children(moov, *trak["mdia"])
    hdlr = mdia["hdlr"]
    if moov[hdlr[0] + 8 : hdlr[0] + 12] != b"vide":
        return None
    mdhd = mdia["mdhd"][0]
    if moov[mdhd]:
        timescale, duration = struct.unpack_from(">IQ", moov, mdhd + 20)
    else:
        timescale, duration = struct.unpack_from(">II", moov, mdhd + 12)
    stbl = children(moov, *children(moov, *mdia["minf"])["stbl"])
    if not timescale or not UNSUPPORTED.isdisjoint(stbl):
        return None
    stsd = stbl["stsd"]
    entries, entry_size, fourcc = struct.unpack_from(">II4s", moov, stsd[0] + 4)
    if entries != 1 or fourcc not in CODECS or ("sdtp" in stbl and fourcc not in PARSED):
        return None
    entry = stsd[0] + 8
    width, height = struct.unpack_from(">HH", moov, entry + 32)
    config = children(moov, entry + 86, entry + entry_size).get(CONFIG_BOXES[fourcc])
    if config is None or (fourcc == b"av01" and config[1] - config[0] <= 4):
        return None  # no parameter sets out of band (an AV1 sequence header in the samples)
    layout = sample_layout(moov, stbl)
    if layout is None:
        return None
    sizes, offsets = layout
    count = len(sizes)
    stts = table(moov, stbl.get("stts"), ">u4", 2).astype(np.int64)
    durations = np.repeat(stts[:, 1], stts[:, 0])
    if len(durations) != count:
        return None
    dts = np.zeros(count, dtype=np.int64)
    np.cumsum(durations[:-1], out=dts[1:])
    pts = dts
    if "ctts" in stbl:
        ctts = table(moov, stbl["ctts"], ">i4", 2).astype(np.int64)
        composition = np.repeat(ctts[:, 1], ctts[:, 0])
        if len(composition) != count or composition.min() < 0:
            return None
        pts = dts + composition
    media_time = _edit_start(moov, top, trak, timescale, pts, duration)
    if media_time is None:
        return None
    keyframes = np.ones(count, dtype=bool)
    if "stss" in stbl:
        keyframes[:] = False
        sync = table(moov, stbl["stss"], ">u4")[:, 0].astype(np.int64) - 1
        if len(sync) and (sync.min() < 0 or sync.max() >= count):
            return None
        keyframes[sync] = True
    return Track(
        codec=CODECS[fourcc],
        width=width,
        height=height,
        parameters=fourcc + moov[entry + 32 : entry + 36] + moov[config[0] : config[1]],
        timescale=timescale,
        duration=duration,
        offsets=offsets,
        sizes=sizes,
        dts=dts - media_time,
        pts=pts - media_time,
        durations=durations,
        keyframes=keyframes,
        file_size=file_size,
    )


def sample_layout(
    moov: bytes, stbl: dict[str, tuple[int, int]]
) -> tuple[np.ndarray, np.ndarray] | None:
    """Each sample's size and byte offset in the file (two int64 arrays in decode order) from a
    sample table's boxes (``stbl``: :func:`children` of the ``stbl`` box); None where the table
    has no samples, no or two chunk-offset boxes, or tables that disagree."""
    stsz, stco, co64 = stbl.get("stsz"), stbl.get("stco"), stbl.get("co64")
    if stsz is None or (stco is None) == (co64 is None):
        return None
    fixed, count = struct.unpack_from(">II", moov, stsz[0] + 4)
    if count == 0:
        return None
    sizes = (
        np.full(count, fixed, dtype=np.int64)
        if fixed
        else np.frombuffer(moov, ">u4", count, stsz[0] + 12).astype(np.int64)
    )
    chunks = (table(moov, stco, ">u4") if co64 is None else table(moov, co64, ">u8"))[:, 0]
    offsets = _sample_offsets(
        chunks.astype(np.int64), table(moov, stbl.get("stsc"), ">u4", 3), sizes
    )
    return None if offsets is None else (sizes, offsets)


def _sample_offsets(chunks: np.ndarray, stsc: np.ndarray, sizes: np.ndarray) -> np.ndarray | None:
    """Each sample's byte offset from the chunk offsets, the sample-to-chunk table and the
    sample sizes; None where the tables disagree."""
    stsc = stsc.astype(np.int64)
    if not len(stsc) or stsc[0, 0] != 1 or np.any(np.diff(stsc[:, 0]) <= 0):
        return None
    per_chunk = np.repeat(stsc[:, 1], np.diff(np.append(stsc[:, 0] - 1, len(chunks))))
    if per_chunk.sum() != len(sizes):
        return None
    if len(chunks) == 1:
        offsets = np.empty(len(sizes), dtype=np.int64)
        offsets[0] = chunks[0]
        np.cumsum(sizes[:-1], out=offsets[1:])
        offsets[1:] += chunks[0]
        return offsets
    chunk_of = np.repeat(np.arange(len(chunks)), per_chunk)
    before = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    chunk_first = np.concatenate([[0], np.cumsum(per_chunk)[:-1]])
    return chunks[chunk_of] + before - before[chunk_first][chunk_of]


def _edit_start(moov, top, trak, timescale, pts, duration) -> int | None:
    """The edit list's media start in ticks (0 without one), or None where FFmpeg would drop
    or shift samples in ways not followed here: more than one edit, a rate other than 1, an
    edit starting after the first presented sample or ending before the media does."""
    elst = "edts" in trak and child(moov, *trak["edts"], "elst")
    if not elst:
        return 0
    version = moov[elst[0]]
    (entries,) = struct.unpack_from(">I", moov, elst[0] + 4)
    if entries != 1:
        return None
    if version:
        segment, media_time, rate = struct.unpack_from(">Qqi", moov, elst[0] + 8)
    else:
        segment, media_time, rate = struct.unpack_from(">Iii", moov, elst[0] + 8)
    mvhd = next((s, e) for k, s, e in top if k == "mvhd")
    movie_scale = struct.unpack_from(">I", moov, mvhd[0] + (20 if moov[mvhd[0]] else 12))[0]
    if rate != 1 << 16 or media_time < 0 or pts.min() < media_time or not movie_scale:
        return None
    if segment * timescale < duration * movie_scale:
        return None  # the edit ends before the media: FFmpeg shortens the stream
    return int(media_time)

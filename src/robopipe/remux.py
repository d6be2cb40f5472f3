"""Video remuxing (stream copy, exact timestamps) and frame access with PyAV.

lerobot 0.6.1 concatenates episode mp4s with FFmpeg's concat demuxer
(``datasets/video_utils.py:648``). The concat demuxer offsets each file by its duration rounded
to microseconds, which drifts by whole ticks over hundreds of episodes (and by more with FFmpeg
5.1's CLI, see the reference spec §8). Here packets are copied one by one and shifted by an
exact integer number of ticks, the sum of the earlier inputs' stream durations, so an input
starting at ``offset`` ticks lands exactly at ``offset * time_base`` seconds, the
``from_timestamp`` lerobot records. Nothing is re-encoded.
"""

from __future__ import annotations

import hashlib
import os
import struct
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import xxhash

from robopipe.mp4 import Track, plain_track

# Open mp4s with FFmpeg's mov/mp4 demuxer named, skipping format probing (a quarter of the
# cost of opening a small file; LeRobot videos are always mp4).
MP4 = "mp4"

# a packet's (pts, dts, keyframe) as the timing digest hashes them
_TIMING = struct.Struct("<qq?")
_TIMING_ROWS = np.dtype([("pts", "<i8"), ("dts", "<i8"), ("key", "?")])  # the same, as rows


@contextmanager
def scheduling_kept():
    """Give the calling thread back its CPU scheduling policy on exit.

    SVT-AV1 (``libsvtav1`` as bundled with PyAV 18) switches the thread that drives it to
    real-time ``SCHED_FIFO`` priority 99 when it runs as root. That thread then keeps it, and
    every process it forks inherits it: DataLoader workers and benchmark ranks that wait in
    a loop then starve the rest of the machine (seen as load average 60 and hung tests, and
    earlier as "deadlocked" encodes). Wrap every encode in this.
    """
    policy, param = os.sched_getscheduler(0), os.sched_getparam(0)
    try:
        yield
    finally:
        if os.sched_getscheduler(0) != policy:
            os.sched_setscheduler(0, policy, param)


class VideoError(Exception):
    """A video file cannot be read or does not match what was expected.

    Attributes:
        path: the file at fault.
        reason: what is wrong with it.
    """

    def __init__(self, path: Path, reason: str) -> None:
        self.path = Path(path)
        self.reason = reason
        super().__init__(f"{path}: {reason}")


@dataclass(frozen=True)
class StreamParams:
    """What must be equal for mp4s to share one stream-copied file, and what a decoder of that
    file is set up with: codec name, frame size in pixels, pixel format and the SHA-256 of the
    codec's extradata (hex; AV1/H.264 sequence headers)."""

    codec: str
    width: int
    height: int
    pix_fmt: str | None
    extradata_sha256: str

    @classmethod
    def of(cls, stream) -> StreamParams:
        """The parameters of a PyAV video stream."""
        ctx = stream.codec_context
        extradata = hashlib.sha256(bytes(ctx.extradata or b"")).hexdigest()
        return cls(ctx.codec.canonical_name, ctx.width, ctx.height, ctx.pix_fmt, extradata)

    def describe(self) -> str:
        """e.g. ``av1 640x480 yuv420p``."""
        return f"{self.codec} {self.width}x{self.height} {self.pix_fmt}"


class PacketDigest:
    """Digests of a run of video packets: ``payload`` over their bytes, ``timing`` over their
    (pts, dts, keyframe) in the input's own ticks, so a copy shifted by ``offset`` ticks
    digests the same once the shift is taken off.

    The digest is XXH3-128 (``xxhash``): it proves that the output holds the bytes read from
    the source, against corruption and mistakes, not against an adversary, and runs at memory
    speed where SHA-256 costs about 2.5 s per GB, as much as the remux itself.
    """

    def __init__(self) -> None:
        self.packets = 0
        self._payload = xxhash.xxh3_128()
        self._timing = xxhash.xxh3_128()

    def add(self, packet, offset: int = 0) -> None:
        """Account for ``packet`` whose timestamps are the input's plus ``offset`` ticks."""
        self.packets += 1
        self._payload.update(memoryview(packet))
        self._timing.update(
            _TIMING.pack(packet.pts - offset, packet.dts - offset, packet.is_keyframe)
        )

    def add_track(
        self, data, track: Track, start: int = 0, stop: int | None = None, *, at: int = 0,
        offset: int = 0,
    ) -> None:  # fmt: skip
        """Account for packets ``start:stop`` of ``track`` (:func:`robopipe.mp4.read_track`),
        whose bytes are in ``data`` (the file's bytes from position ``at``) and whose
        timestamps are the input's plus ``offset`` ticks: the same digests as :meth:`add` of
        each packet in order."""
        stop = track.frames if stop is None else stop
        self.packets += stop - start
        positions = (track.offsets[start:stop] - at).tolist()
        for pos, size in zip(positions, track.sizes[start:stop].tolist(), strict=True):
            self._payload.update(data[pos : pos + size])
        timing = np.empty(stop - start, dtype=_TIMING_ROWS)
        timing["pts"] = track.pts[start:stop] - offset
        timing["dts"] = track.dts[start:stop] - offset
        timing["key"] = track.keyframes[start:stop]
        self._timing.update(timing.tobytes())

    def as_dict(self) -> dict:
        """``{"packets", "payload_xxh3", "timing_xxh3"}`` (128-bit digests in hex)."""
        return {
            "packets": self.packets,
            "payload_xxh3": self._payload.hexdigest(),
            "timing_xxh3": self._timing.hexdigest(),
        }


@dataclass(frozen=True)
class RemuxedInput:
    """Where one input landed in a remuxed output.

    Attributes:
        frames: video packets copied (one per frame).
        offset_ticks: the input's pts shift in the output, in ``time_base`` ticks.
        duration_ticks: the input stream's duration in ticks.
        time_base: the stream time base (seconds per tick).
        digest: :meth:`PacketDigest.as_dict` of the packets as read from the input.
        params: the input stream's codec parameters (equal for every input of one output).
    """

    frames: int
    offset_ticks: int
    duration_ticks: int
    time_base: Fraction
    digest: dict
    params: StreamParams


def concat_videos(inputs: list[Path], output: Path) -> list[RemuxedInput]:
    """Concatenate mp4 files into ``output`` by stream copy, with exact timestamps.

    Args:
        inputs: mp4 files with one video stream each, same codec and time base.
        output: the mp4 to write (``movflags=faststart``, moov at the front, as lerobot).

    Returns:
        One :class:`RemuxedInput` per input, in order.

    Raises:
        VideoError: an input cannot be opened or demuxed (missing, truncated, corrupt), has no
            video stream, has another time base or other :class:`StreamParams` (codec, size,
            pixel format, extradata) than the first input, or has no duration. The message
            names the input file.
    """
    if not inputs:
        raise ValueError("concat_videos needs at least one input")
    results: list[RemuxedInput] = []
    offset = 0
    with av.open(str(output), "w", format="mp4", options={"movflags": "faststart"}) as out:
        out_stream = None
        time_base = None
        params = None
        signature = None  # the first input's sample description and time scale, when read
        for path in inputs:
            track = plain_track(path)
            if track is not None and (track.parameters, track.timescale) == signature:
                # the same stream parameters as the first input: its packets straight from
                # the mp4 index, without opening the file with FFmpeg (a third of the cost)
                digest, duration = _copy_track(path, track, out, out_stream, offset, time_base)
            else:
                digest, duration, first = _copy_demuxed(
                    path, out, out_stream, time_base, params, offset
                )
                if out_stream is None:
                    out_stream, time_base, params = first
                    if track is not None:
                        signature = (track.parameters, track.timescale)
            results.append(
                RemuxedInput(
                    digest.packets, offset, duration, Fraction(time_base), digest.as_dict(), params
                )
            )
            offset += duration
    return results


def _copy_track(path: Path, track: Track, out, out_stream, offset: int, time_base):
    """Mux ``track``'s packets into ``out_stream``, shifted by ``offset`` ticks, exactly as
    :func:`_copy_demuxed` would (same payloads, pts, dts, durations, keyframe flags).

    Returns:
        (the :class:`PacketDigest` of the input's packets, the stream duration in ticks).
    """
    try:
        data = memoryview(Path(path).read_bytes())
    except OSError as exc:
        raise VideoError(path, f"cannot read video: {exc}") from exc
    if len(data) != track.file_size:
        raise VideoError(path, "the file changed while it was read")
    digest = PacketDigest()
    digest.add_track(data, track)
    mux = out.mux_one
    columns = (track.offsets, track.sizes, track.pts, track.dts, track.durations)
    rows = zip(*(c.tolist() for c in columns), track.keyframes.tolist(), strict=True)
    for start, size, pts, dts, duration, keyframe in rows:
        packet = av.Packet(data[start : start + size])
        packet.pts = pts + offset
        packet.dts = dts + offset
        packet.duration = duration
        packet.is_keyframe = keyframe
        packet.time_base = time_base
        packet.stream = out_stream
        mux(packet)
    return digest, track.duration


def _copy_demuxed(path: Path, out, out_stream, time_base, params, offset: int):
    """Mux ``path``'s packets, demuxed by PyAV, into ``out_stream`` (None: the first input,
    whose stream becomes the template of the output's), shifted by ``offset`` ticks.

    Returns:
        (the :class:`PacketDigest`, the stream duration in ticks, ``(out_stream, time_base,
        params)`` of the output).

    Raises:
        VideoError: see :func:`concat_videos`.
    """
    try:
        with av.open(str(path), format=MP4) as container:
            if not container.streams.video:
                raise VideoError(path, "no video stream")
            stream = container.streams.video[0]
            if out_stream is None:
                time_base, params = stream.time_base, StreamParams.of(stream)
                out_stream = out.add_stream_from_template(stream, opaque=True)
                out_stream.time_base = time_base
            elif StreamParams.of(stream) != params:
                raise VideoError(
                    path,
                    f"{StreamParams.of(stream).describe()} (extradata "
                    f"{StreamParams.of(stream).extradata_sha256[:12]}) differs from "
                    f"{params.describe()} (extradata {params.extradata_sha256[:12]}) of "
                    f"the first file of this video file; re-encode this episode like "
                    f"the others or leave it out with `skip_episodes`",
                )
            elif stream.time_base != time_base:
                raise VideoError(
                    path,
                    f"time base {stream.time_base} differs from {time_base} of the "
                    "first file; cannot stream-copy into one file",
                )
            duration = _duration_ticks(path, container, stream)
            digest = PacketDigest()
            mux = out.mux_one
            for packet in container.demux(stream):
                if packet.dts is None:
                    continue
                digest.add(packet)
                packet.pts += offset
                packet.dts += offset
                packet.stream = out_stream
                mux(packet)
    except (av.FFmpegError, OSError) as exc:
        raise VideoError(path, f"cannot read video: {exc}") from exc
    return digest, duration, (out_stream, time_base, params)


def run_digests(path: Path, container, stream, runs: list[tuple[int, int]]):
    """Digests of consecutive runs of the packets of the mp4 at ``path``, open in PyAV as
    ``container`` with video ``stream``: for each ``(packets, offset)`` of ``runs``, the
    :class:`PacketDigest` of the next ``packets`` packets with ``offset`` ticks taken off
    their timestamps; then one more of the packets that follow (none in a file made of these
    runs). From the file's index where :func:`robopipe.mp4.plain_track` reads it, reading one
    run's bytes at a time, else demuxed by PyAV.

    Yields:
        ``len(runs) + 1`` :class:`PacketDigest` objects.
    """
    track = plain_track(path)
    if track is None:
        yield from _demuxed_runs(container, stream, runs)
        return
    ends = track.offsets + track.sizes
    start = 0
    with open(path, "rb") as f:
        for count, offset in [*runs, (track.frames, 0)]:
            stop = min(start + count, track.frames)
            digest = PacketDigest()
            if stop > start:
                at = int(track.offsets[start:stop].min())
                f.seek(at)
                data = f.read(int(ends[start:stop].max()) - at)
                digest.add_track(data, track, start, stop, at=at, offset=offset)
            yield digest
            start = stop


def _demuxed_runs(container, stream, runs):
    """:func:`run_digests` from the packets PyAV demuxes."""
    demuxed = (p for p in container.demux(stream) if p.dts is not None)
    for count, offset in runs:
        digest = PacketDigest()
        for packet in demuxed:
            digest.add(packet, offset)
            if digest.packets == count:
                break
        yield digest
    rest = PacketDigest()
    for packet in demuxed:
        rest.add(packet)
    yield rest


def _duration_ticks(path: Path, container, stream) -> int:
    if stream.duration is not None:
        return int(stream.duration)
    if container.duration is not None:  # lerobot's fallback: container duration in µs
        return round(Fraction(container.duration, 1_000_000) / stream.time_base)
    raise VideoError(path, "the video stream has no duration")


class FrameReader:
    """Random access to decoded frames of one mp4, by presentation time.

    Frames are returned in the stream's native pixel format as a uint8 array (for yuv420p:
    shape ``(H * 3 // 2, W)``, the Y plane then U and V), so comparisons are bit-exact and no
    colour conversion is paid. Use as a context manager.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._container = av.open(str(path), format=MP4)
        self._stream = self._container.streams.video[0]
        self.time_base = Fraction(self._stream.time_base)

    def frame_at(self, seconds: float, tolerance_s: float) -> np.ndarray:
        """The frame whose timestamp is within ``tolerance_s`` of ``seconds``.

        Raises:
            VideoError: no frame is that close (the message gives the nearest timestamp).
        """
        return self.video_frame_at(seconds, tolerance_s).to_ndarray()

    def video_frame_at(self, seconds: float, tolerance_s: float) -> av.VideoFrame:
        """As :meth:`frame_at`, but the decoded PyAV frame (``.width``, ``.height``, ...)."""
        target = round(Fraction(seconds) / self.time_base)
        self._container.seek(target, stream=self._stream, backward=True, any_frame=False)
        best = None
        for frame in self._container.decode(self._stream):
            ts = float(frame.pts * self.time_base)
            if abs(ts - seconds) <= tolerance_s:
                return frame
            best = ts
            if ts > seconds:
                break
        raise VideoError(
            self.path, f"no frame within {tolerance_s} s of {seconds:.6f} s (nearest {best})"
        )

    def frames(self):
        """Iterate over all decoded frames as ``(timestamp_s, array)`` in order."""
        self._container.seek(0, stream=self._stream)
        for frame in self._container.decode(self._stream):
            yield float(frame.pts * self.time_base), frame.to_ndarray()

    def close(self) -> None:
        """Close the file."""
        self._container.close()

    def __enter__(self) -> FrameReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def stream_duration_s(container, stream) -> float:
    """A PyAV video stream's duration in seconds: the stream's own, else the container's
    (0.0 when neither is known)."""
    if stream.duration is not None:
        return float(stream.duration * stream.time_base)
    return (container.duration or 0) / 1e6


def intact_until(container, stream, size: int, duration: float) -> float | None:
    """Whether an mp4 is truncated, from its packets alone (no decoding).

    Args:
        container, stream: the open PyAV input container and its video stream.
        size: the file's size in bytes.
        duration: the stream's duration in seconds (:func:`stream_duration_s`).

    Returns:
        None when every packet lies inside the file and the last one ends at ``duration``;
        else the time in seconds up to which the packets are intact. The index of an mp4
        written by FFmpeg with ``+faststart`` (as lerobot's are) is at the front, so a
        truncated file still lists packets past its end: the last GOP is demuxed (seeking to
        the last keyframe), and only a truncated file is demuxed from the start. A packet cut
        by the file's end comes back shorter, flagged corrupt: it is not intact.
    """
    if stream.duration:
        container.seek(stream.duration, stream=stream, backward=True, any_frame=False)
    end, last, cut = 0, None, False
    for packet in container.demux(stream):
        cut = cut or packet.is_corrupt
        if packet.pos is not None and packet.pos >= 0 and packet.pts is not None:
            end = max(end, packet.pos + packet.size)
            last = max(last or 0, packet.pts + (packet.duration or 0))
    time_base = stream.time_base
    whole = last is not None and float(last * time_base) >= duration - 1e-6
    if not cut and end and end <= size and whole:
        return None
    container.seek(0, stream=stream, backward=True, any_frame=False)
    intact = 0.0
    for packet in container.demux(stream):
        inside = packet.pos is not None and packet.pos + packet.size <= size
        if packet.is_corrupt or not inside or packet.pts is None:
            continue
        intact = max(intact, float((packet.pts + (packet.duration or 0)) * time_base))
    return intact

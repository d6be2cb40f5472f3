"""Decode the frames the camera checks need, and find frozen and black stretches in them.

Frames are decoded at the times ``from_timestamp + i / fps`` of the episode's frames ``i``
(v2.x: ``from_timestamp`` is 0). On the CPU, PyAV reads the packets in order and decodes only
the GOPs (keyframe to keyframe) that hold a wanted frame (:func:`_cpu_frames`); each wanted
frame is scaled down to a thumbnail as it is converted. On a CUDA GPU, torchcodec's NVDEC
decoder gives the wanted frames (``get_frames_played_at``); where it cannot (no GPU, no
torchcodec, a codec NVDEC lacks) the CPU decodes them, and the reason is kept for
quality.json's ``decode`` section.

The checks compare thumbnails' luma (Rec. 601 weights of RGB, 0-255): a frame is *black*
when its mean luma is at most ``black_luma``; two frames are the *same picture* when their
mean absolute luma difference is at most ``frozen_camera_diff``.
"""

from __future__ import annotations

import contextlib
import glob
import time
from dataclasses import dataclass, field

import av
import numpy as np
from av.video.reformatter import VideoReformatter
from fsspec.implementations.local import LocalFileSystem

from robopipe.errors import DatasetError
from robopipe.remux import MP4

THUMB_WIDTH = 64  # pixels: thumbnails keep the aspect ratio
LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)  # ITU-R BT.601
# 8-bit pixel formats whose first plane is the luma
PLANAR_8BIT = frozenset(
    ("yuv420p", "yuvj420p", "yuv422p", "yuvj422p", "yuv444p", "yuvj444p", "nv12", "gray")
)


@dataclass
class DecodeStats:
    """What decoding cost, summed over a batch (quality.json's ``decode`` section).

    Attributes:
        device: the device asked for (``auto``, ``cpu``, ``cuda``) and :attr:`used`, the one
            that decoded (``cpu`` or ``cuda``; ``cpu`` when any file fell back).
        fallback: why the CPU decoded where a GPU was asked for, or None.
        frames: frames decoded and converted; ``seconds`` their decode wall time.
        files: video files opened.
    """

    device: str = "auto"
    used: str = "cpu"
    fallback: str | None = None
    frames: int = 0
    seconds: float = 0.0
    files: int = 0
    gpu_files: int = field(default=0)

    def to_dict(self) -> dict:
        return {
            "device": self.device,
            "used": self.used,
            "fallback": self.fallback,
            "frames_decoded": self.frames,
            "decode_s": round(self.seconds, 3),
            "files": self.files,
            "gpu_files": self.gpu_files,
        }


def resolve_device(requested: str) -> tuple[str, str | None]:
    """``(device, fallback reason)`` for ``requested`` (``auto``, ``cpu`` or ``cuda``):
    ``cuda`` where an NVIDIA device exists, torch sees a CUDA GPU and torchcodec is
    importable, else ``cpu`` with the reason (None when ``cpu`` was asked); torch is imported
    only where a device exists."""
    if requested == "cpu":
        return "cpu", None
    if not glob.glob("/dev/nvidia[0-9]*"):  # no GPU: do not pay torch's import
        return "cpu", "no NVIDIA GPU (no /dev/nvidia* device)"
    try:
        import torch
        import torchcodec  # noqa: F401
    except ImportError as err:
        return "cpu", f"torchcodec or torch is not importable ({err})"
    if not torch.cuda.is_available():
        return "cpu", "no CUDA GPU (torch.cuda.is_available() is False)"
    return "cuda", None


def sample_indices(length: int, fps: float, sample_s: float, decode: str) -> np.ndarray:
    """The episode frames the camera checks decode: every frame with ``decode="all"``, else
    one every ``round(sample_s * fps)`` frames (at least 1) and the last one. int64, sorted."""
    if length <= 0:
        return np.zeros(0, dtype=np.int64)
    if decode == "all":
        return np.arange(length, dtype=np.int64)
    step = max(1, round(sample_s * fps))
    return np.unique(np.append(np.arange(0, length, step), length - 1)).astype(np.int64)


def thumb_size(width: int, height: int) -> tuple[int, int]:
    """(width, height) of a frame's thumbnail: :data:`THUMB_WIDTH` wide (or the frame's width
    where smaller), the aspect ratio kept, even sizes, at least 2 pixels."""
    w = min(THUMB_WIDTH, width)
    h = max(2, round(height * w / max(width, 1)))
    return max(2, w - w % 2), h + h % 2


@contextlib.contextmanager
def _opened(fs, path: str):
    """What PyAV or torchcodec opens ``path`` of ``fs`` from: the path itself where the file
    is local, else an fsspec file (range reads), closed on exit."""
    if isinstance(fs, LocalFileSystem):
        yield path
        return
    with fs.open(path, "rb") as f:
        yield f


def _cpu_frames(
    source, start_s: float, fps: float, indices: np.ndarray, convert, *, every=False, snap_s=0.0
) -> tuple[dict[int, np.ndarray], set[int]]:
    """Decode the episode frames ``indices`` (sorted int array) of the mp4 ``source`` whose
    episode starts ``start_s`` seconds into it.

    The packets are read in order from the keyframe before ``start_s`` (one seek, for a v3.0
    file) and held one GOP (keyframe to keyframe) at a time; a GOP is decoded only where it
    holds a wanted frame (``every``: every GOP), so no seek or decoder flush is paid per frame
    and the GOPs between samples are never decoded. A GOP no longer than ``snap_s`` seconds
    (lerobot encodes a keyframe every 2 frames) is represented by its keyframe alone: only
    that packet is decoded, standing for the wanted frames of its GOP.

    Returns:
        ``({frame index: convert(frame)}, the wanted indices covered)``: with ``snap_s`` the
        decoded frames may be the keyframes near the wanted ones.
    """
    wanted = set(indices.tolist())
    found: dict[int, np.ndarray] = {}
    covered: set[int] = set()
    if not len(indices):
        return found, covered
    half = 0.5 / fps
    times = start_s + indices / fps
    last_s = float(times[-1])
    with av.open(source, format=MP4) as container:
        stream = container.streams.video[0]
        if every:
            stream.thread_type = "AUTO"  # sequential decoding: frame threads help
        else:
            stream.codec_context.thread_count = 1  # lone keyframes: threads cost CPU
        base = float(stream.time_base)
        if start_s > 0:
            container.seek(max(0, int((start_s - half) / base)), stream=stream)

        def take(frame) -> None:
            if frame.pts is None:
                return
            # frames drained at the end carry no time base of their own: use the stream's
            got = round((frame.pts * base - start_s) * fps)
            if got in wanted and got not in found:
                found[got] = convert(frame)

        def decode(gop: list, until_s: float) -> None:
            first_s = gop[0].pts * base
            lo, hi = np.searchsorted(times, [first_s - half, until_s - half])
            pending = [int(i) for i in indices[lo:hi] if int(i) not in covered]
            if not pending and not every:
                return
            if until_s - first_s <= snap_s + 1e-9:
                key = round((first_s - start_s) * fps)
                if 0 <= key <= indices[-1]:
                    wanted.add(key)
                    covered.update(pending)
                    gop = gop[:1]
            else:
                covered.update(pending)
            for packet in gop:
                for frame in stream.decode(packet):
                    take(frame)

        gop: list = []
        for packet in container.demux(stream):
            if packet.pts is None:
                continue
            if packet.is_keyframe:
                if gop:
                    decode(gop, packet.pts * base)
                gop = []
                if packet.pts * base > last_s + half:
                    break
            elif not gop:
                continue  # before the first keyframe: undecodable
            gop.append(packet)
        if gop:
            decode(gop, float("inf"))
        for frame in stream.decode(None):
            take(frame)
    return found, covered


def _rgb(frame) -> np.ndarray:
    return frame.to_ndarray(format="rgb24")


def decode_rgb(dataset, path: str, start_s: float, indices: np.ndarray, episode: int) -> np.ndarray:
    """Frames ``indices`` of ``episode`` from ``path`` as uint8 ``(n, H, W, 3)`` RGB, in the
    order asked (CPU, PyAV).

    Raises:
        DatasetError: the file is missing or cannot be decoded, or lacks a wanted frame.
    """
    order = np.unique(indices)
    found = _decode_or_raise(dataset, path, start_s, order, episode, _rgb)
    return (
        np.stack([found[int(i)] for i in indices])
        if len(indices)
        else np.zeros((0, 0, 0, 3), np.uint8)
    )


def _decode_or_raise(dataset, path, start_s, order, episode, convert, every=False, snap_s=0.0):
    try:
        with _opened(dataset.fs, path) as source:
            found, covered = _cpu_frames(
                source, start_s, dataset.fps, order, convert, every=every, snap_s=snap_s
            )
    except FileNotFoundError:
        raise DatasetError(
            dataset.name, "video file is missing", episode=episode, file=path
        ) from None
    except (av.error.FFmpegError, OSError, ValueError) as err:
        raise DatasetError(
            dataset.name, f"video cannot be decoded: {err}", episode=episode, file=path
        ) from None
    missing = sorted(set(order.tolist()) - (covered if snap_s else set(found)))
    if missing:
        raise DatasetError(
            dataset.name,
            f"video has no frame {missing[0]} ({len(missing)} wanted frames missing)",
            episode=episode,
            file=path,
        )
    return found


def camera_luma(
    dataset,
    path: str,
    start_s: float,
    indices: np.ndarray,
    episode: int,
    stats: DecodeStats,
    *,
    snap_s: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Luma thumbnails of the frames ``indices`` (sorted) of ``episode``, decoded on
    ``stats.used``'s device (a CUDA decode that fails falls back to the CPU and records why
    in ``stats.fallback``). On the CPU, a GOP of at most ``snap_s`` seconds gives its
    keyframe for the wanted frames in it (:func:`_cpu_frames`).

    Returns:
        ``(frames, thumbnails)``: the episode frame indices decoded (int64, sorted) and their
        float32 ``(n, h, w)`` luma (0-255).

    Raises:
        DatasetError: the file is missing or cannot be decoded, or lacks a wanted frame.
    """
    began = time.perf_counter()
    stats.files += 1
    result = None
    if stats.used == "cuda":
        try:
            result = indices, _cuda_luma(dataset, path, start_s, indices)
            stats.gpu_files += 1
        except Exception as err:  # noqa: BLE001  (any NVDEC failure: decode on the CPU)
            stats.fallback = stats.fallback or f"NVDEC failed on {path}: {err}"
    if result is None:
        feature = dataset.features.get(_key_of(dataset, path), {})
        w, h = _frame_size(feature)
        tw, th = thumb_size(w, h) if w and h else (THUMB_WIDTH, THUMB_WIDTH * 3 // 4)

        scaler = VideoReformatter()  # one scaling context for the file's frames

        def convert(frame):
            return luma_thumbnail(frame, tw, th, scaler)

        every = len(indices) == dataset.lengths[episode]
        found = _decode_or_raise(
            dataset, path, start_s, indices, episode, convert, every=every, snap_s=snap_s
        )
        order = np.array(sorted(found), dtype=np.int64)
        result = order, np.stack([found[int(i)] for i in order])
    stats.frames += len(result[0])
    stats.seconds += time.perf_counter() - began
    return result


def luma_thumbnail(frame, width: int, height: int, scaler: VideoReformatter) -> np.ndarray:
    """A decoded frame's luma (0-255, full range), about ``width`` x ``height``: float32.

    8-bit YUV frames give their Y plane, averaged over blocks of pixels and, for limited
    ("TV") range, stretched from 16-235 to 0-255 (no colour conversion); other pixel formats
    are scaled to RGB with ``scaler`` and weighted by :data:`LUMA`. Both give about the same
    values (BT.601 luma is the Y of the conversion)."""
    if frame.format.name in PLANAR_8BIT:
        plane = frame.planes[0]
        rows = np.frombuffer(plane, np.uint8).reshape(-1, plane.line_size)
        y = rows[: frame.height, : frame.width]
        bh, bw = max(1, frame.height // height), max(1, frame.width // width)
        h, w = frame.height // bh, frame.width // bw
        small = y[: h * bh, : w * bw].reshape(h, bh, w, bw).mean(axis=(1, 3), dtype=np.float32)
        if frame.format.name.startswith("yuvj") or frame.color_range == 2:  # full (JPEG) range
            return small
        return (small - 16) * np.float32(255 / 219)
    small = scaler.reformat(frame, width=width, height=height, format="rgb24").to_ndarray()
    return small.astype(np.float32) @ LUMA


def _key_of(dataset, path: str) -> str:
    for key in dataset.video_keys:
        if f"/{key}/" in path or path.startswith(f"videos/{key}/"):
            return key
    return ""


def _frame_size(feature: dict) -> tuple[int, int]:
    info = feature.get("info") or {}
    if info.get("video.width") and info.get("video.height"):
        return int(info["video.width"]), int(info["video.height"])
    shape = list(feature.get("shape") or [])
    if len(shape) == 3:
        if shape[0] in (1, 3, 4) and shape[2] not in (1, 3, 4):
            return int(shape[2]), int(shape[1])
        return int(shape[1]), int(shape[0])
    return 0, 0


def _cuda_luma(dataset, path: str, start_s: float, indices: np.ndarray) -> np.ndarray:
    import torch
    from torchcodec.decoders import VideoDecoder

    times = (start_s + indices / dataset.fps).tolist()
    with _opened(dataset.fs, path) as source:
        decoder = VideoDecoder(source, device="cuda", seek_mode="approximate")
        batch = decoder.get_frames_played_at(seconds=times).data  # (n, 3, H, W) uint8, GPU
    h, w = batch.shape[-2:]
    tw, th = thumb_size(w, h)
    small = torch.nn.functional.interpolate(batch.float(), size=(th, tw), mode="area")
    weights = torch.tensor(LUMA, device=small.device).view(1, 3, 1, 1)
    return (small * weights).sum(dim=1).cpu().numpy()


@dataclass(frozen=True)
class Stretch:
    """A run of sampled frames: first and last episode frame index and its length in s."""

    first: int
    last: int
    seconds: float
    value: float


def frozen_stretches(
    indices: np.ndarray,
    luma: np.ndarray,
    fps: float,
    min_s: float,
    max_diff: float,
    black_luma: float | None = None,
) -> list[Stretch]:
    """Runs of consecutive sampled frames that are the same picture (mean absolute luma
    difference of neighbours at most ``max_diff``), spanning at least ``min_s`` minus the
    longest sampling step and one frame (so that a stretch of ``min_s`` is found wherever the
    samples fall in it); with ``black_luma``, neighbours that are both black (mean luma at
    most that) do not count. ``value``: the run's largest neighbour difference."""
    if len(indices) < 2:
        return []
    diffs = np.abs(np.diff(luma, axis=0)).mean(axis=(1, 2))
    same = diffs <= max_diff
    if black_luma is not None:  # a black stretch is black_camera's, not a frozen picture
        black = luma.mean(axis=(1, 2)) <= black_luma
        same &= ~(black[1:] & black[:-1])
    step = float(np.max(np.diff(indices))) / fps
    need = max(min_s - step - 1 / fps, 1 / fps) - 1e-6
    return [
        Stretch(
            int(indices[a]),
            int(indices[b + 1]),
            (indices[b + 1] - indices[a]) / fps,
            float(diffs[a : b + 1].max()),
        )  # fmt: skip
        for a, b in _runs(same)
        if (indices[b + 1] - indices[a]) / fps >= need
    ]


def black_stretches(
    indices: np.ndarray, luma: np.ndarray, fps: float, min_s: float, max_luma: float
) -> list[Stretch]:
    """Runs of consecutive sampled frames whose mean luma is at most ``max_luma``, spanning at
    least ``min_s`` minus the longest sampling step and one frame. ``value``: the run's largest mean
    luma."""
    if not len(indices):
        return []
    means = luma.mean(axis=(1, 2))
    black = means <= max_luma
    step = float(np.max(np.diff(indices))) / fps if len(indices) > 1 else 1 / fps
    need = max(min_s - step - 1 / fps, 0.0) - 1e-6
    return [
        Stretch(
            int(indices[a]),
            int(indices[b]),
            (indices[b] - indices[a] + 1) / fps,
            float(means[a : b + 1].max()),
        )  # fmt: skip
        for a, b in _runs(black)
        if (indices[b] - indices[a]) / fps >= need
    ]


def _runs(flags: np.ndarray) -> list[tuple[int, int]]:
    """(first, last) positions of each run of True in a bool array."""
    padded = np.concatenate([[False], flags, [False]])
    edges = np.flatnonzero(np.diff(padded.astype(np.int8)))
    return [(int(a), int(b) - 1) for a, b in zip(edges[::2], edges[1::2], strict=True)]

"""Assemble a training copy from its per-file outputs: metadata, unchanged files, the
copy's measurements (``copy.json``), and publication as one rename."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from robopipe.atomic import atomic_path, link_or_copy, write_json
from robopipe.copies.encodings import Encoding
from robopipe.copies.fidelity import summarise
from robopipe.formats.v30_reader import read_meta
from robopipe.layout import INFO_PATH


def output_files(root: str | Path, encoding: Encoding) -> list[str]:
    """The files (relative paths) of a copy that one job each writes: every mp4 for an
    encoding whose frames stay in mp4s, every data parquet otherwise."""
    meta = read_meta(root)
    if encoding.in_video_files:
        return sorted(
            {meta.video_file(c, e) for c in meta.video_keys for e in range(meta.num_episodes)}
        )
    return sorted({meta.data_file(e) for e in range(meta.num_episodes)})


def finish_copy(
    source: str | Path,
    staged: str | Path,
    results: list[str | Path],
    output: str | Path,
    measurements: str | Path,
    encoding: Encoding,
) -> dict:
    """Write the copy ``output`` (a v3.0 dataset) and ``measurements`` (copy.json).

    ``staged`` holds the per-file outputs (``videos/...`` or ``data/...``); ``results`` are
    their JSON measurements (``copy_video`` / ``copy_data_file`` returns). Every other file is
    hard-linked from ``source``; ``meta/info.json`` describes the new frames: a video feature's
    ``shape`` and ``video.codec``/``video.height``/``video.width``, or, for ``jpeg`` and
    ``raw``, an ``image`` feature (H, W, 3), and no ``video_path``. ``meta/stats.json`` and
    the episodes' image stats stay the source's.

    Returns:
        the measurements: encoding, kind, frames, height, width, bytes (the copy on disk),
        frame_bytes (its mp4s or data files), raw_bytes (frames x H x W x 3),
        compression_factor (raw_bytes / frame_bytes), encode_s (summed over jobs: one core
        each), encode_wall_s (the slowest job), fidelity (``fidelity.summarise``).
    """
    source, staged, output = Path(source), Path(staged), Path(output)
    per_file = [json.loads(Path(r).read_text()) for r in results]
    meta = read_meta(source)
    height, width = per_file[0]["height"], per_file[0]["width"]
    frames_dir = "videos" if encoding.in_video_files else "data"
    with atomic_path(output) as tmp:
        for path in sorted(source.rglob("*")):
            relative = path.relative_to(source)
            if (
                path.is_dir()
                or relative.parts[0] in ("videos", frames_dir)
                or str(relative) == INFO_PATH
            ):
                continue
            (tmp / relative).parent.mkdir(parents=True, exist_ok=True)
            link_or_copy(path, tmp / relative)
        shutil.copytree(
            staged / frames_dir,
            tmp / frames_dir,
            copy_function=link_or_copy,
            ignore=shutil.ignore_patterns("*.json"),
        )
        info = _info(meta.info, meta.video_keys, encoding, height, width, per_file[0].get("codec"))
        (tmp / INFO_PATH).write_text(json.dumps(info, indent=4, ensure_ascii=False))
    frames = sum(f["frames"] for f in per_file)
    frame_bytes = sum(f["bytes"] for f in per_file)
    raw_bytes = frames * height * width * 3
    measured = {
        "encoding": encoding.name,
        "kind": encoding.kind,
        "frames": frames,
        "height": height,
        "width": width,
        "bytes": sum(p.stat().st_size for p in output.rglob("*") if p.is_file()),
        "frame_bytes": frame_bytes,
        "raw_bytes": raw_bytes,
        "compression_factor": raw_bytes / frame_bytes,
        "encode_s": sum(f["encode_s"] for f in per_file),
        "encode_wall_s": max(f["encode_s"] for f in per_file),
        "fidelity": (
            {
                "frames_compared": 0,
                "lossless": True,
                "psnr_mean_db": None,
                "psnr_worst_db": None,
                "ssim_mean": 1.0,
                "ssim_worst": 1.0,
            }
            if encoding.kind == "original"
            else summarise([f["fidelity"] for f in per_file])
        ),
    }
    write_json(measurements, measured)
    return measured


def _info(
    info: dict, cameras: list[str], encoding: Encoding, height: int, width: int, codec
) -> dict:
    info = json.loads(json.dumps(info))
    for camera in cameras:
        feature = info["features"][camera]
        if not encoding.in_video_files:
            info["features"][camera] = {
                "dtype": "image",
                "shape": [height, width, 3],
                "names": ["height", "width", "channel"],
            }
        else:
            feature["shape"] = [height, width, 3]
            feature["info"].update({"video.height": height, "video.width": width})
            feature["info"]["video.codec"] = codec
    if not encoding.in_video_files:
        info["video_path"] = None
    return info

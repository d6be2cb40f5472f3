"""The ``lance`` training copy: lerobot-lancedb's Lance layout of a v3.0 dataset, made whole by
``lerobot-lance-convert`` in the peer environment (one job per dataset: it writes one layout).

The layout (``<out>/meta/``, ``frames.lance``, ``videos.lance``, ``meta.lance``) stores the
dataset's mp4s verbatim, so the copy is lossless when every mp4 in ``videos.lance`` holds the
source's bytes, which ``lance_verify.py`` checks in the peer interpreter after the conversion.
"""

from __future__ import annotations

import json
import math
import subprocess
import time
from pathlib import Path

from robopipe.atomic import atomic_path, write_json
from robopipe.errors import DatasetError
from robopipe.layout import INFO_PATH
from robopipe.peer_env import NO_PEERS, peer_version

VERIFY = Path(__file__).with_name("lance_verify.py")
CONVERT = "lerobot-lance-convert"  # the console script next to the peer interpreter


def make_lance_copy(
    source: str | Path, output: str | Path, measurements: str | Path, python: str | None
) -> dict:
    """Convert the v3.0 dataset ``source`` to the Lance layout ``output`` with
    ``lerobot-lance-convert`` of the peer interpreter ``python``, check it and write
    ``measurements`` (copy.json). ``output`` appears complete or not at all.

    Returns:
        the measurements, with the fields of :func:`robopipe.copies.finish.finish_copy`
        (``frame_bytes``: the ``videos.lance`` table; ``encode_s``: the converter's wall
        time, one process) and ``source`` (the v3.0 folder, the reference of the loaders'
        equality check), ``converter`` (``lerobot-lancedb <version>``).

    Raises:
        DatasetError: no peer interpreter or no ``lerobot-lance-convert`` beside it; the
            converter failed (its output's tail in the message); the layout's frame count or
            mp4 bytes differ from the source's.
    """
    source, output = Path(source).resolve(), Path(output)
    name = source.parent.name
    convert = Path(python).parent / CONVERT if python else None
    if convert is None or not convert.exists():
        raise DatasetError(
            name,
            f"the lance copy needs {CONVERT} of lerobot-lancedb in the peer "
            f"environment ({f'{convert} does not exist' if convert else NO_PEERS})",
        )
    info = json.loads((source / INFO_PATH).read_text())
    with atomic_path(output) as tmp:
        start = time.perf_counter()
        done = subprocess.run(
            [str(convert), "--root", str(source), "--out", str(tmp)],
            capture_output=True,
            text=True,
        )
        encode_s = time.perf_counter() - start
        if done.returncode != 0:
            raise DatasetError(
                name,
                f"{CONVERT} failed on {source} (exit {done.returncode}): "
                f"{(done.stderr or done.stdout)[-2000:]}",
            )
        check = _verify(python, tmp, source, name)
        if check["frames_rows"] != info["total_frames"] or check["different"] or check["missing"]:
            raise DatasetError(name, f"the Lance layout differs from {source}: {check}")
    cameras = [f for f in info["features"].values() if f["dtype"] == "video"]
    frames = info["total_frames"] * len(cameras)
    raw_bytes = sum(info["total_frames"] * math.prod(f["shape"]) for f in cameras)
    frame_bytes = _size(output / "videos.lance")
    height, width = cameras[0]["shape"][:2] if cameras else (None, None)
    measured = {
        "encoding": "lance",
        "kind": "lance",
        "frames": frames,
        "height": height,
        "width": width,
        "bytes": _size(output),
        "frame_bytes": frame_bytes,
        "raw_bytes": raw_bytes,
        "compression_factor": raw_bytes / frame_bytes if frame_bytes else None,
        "encode_s": encode_s,
        "encode_wall_s": encode_s,
        "fidelity": {
            "frames_compared": 0,
            "files_compared": check["files"],
            "lossless": check["identical"] == check["files"],
            "psnr_mean_db": None,
            "psnr_worst_db": None,
            "ssim_mean": 1.0,
            "ssim_worst": 1.0,
        },
        "source": str(source),
        "converter": peer_version(python, "lerobot-lancedb"),
    }
    write_json(measurements, measured)
    return measured


def _verify(python: str, layout: Path, source: Path, name: str) -> dict:
    """``lance_verify.py``'s JSON for ``layout`` against ``source``."""
    done = subprocess.run(
        [python, str(VERIFY), str(layout), str(source)], capture_output=True, text=True
    )
    if done.returncode != 0:
        failed = f"checking the Lance layout failed (exit {done.returncode})"
        raise DatasetError(name, f"{failed}: {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def _size(path: Path) -> int:
    """Bytes of the files under ``path``."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())

"""Frames moved into the data parquet files: one JPEG (``jpeg{Q}``) or one raw uint8 image
(``raw``) per camera and row.

Both are stored as lerobot stores ``image`` features (HF ``datasets.Image()``:
``struct<bytes: binary, path: string>``, the path empty). A raw frame is a binary PPM (``P6``):
a header of a dozen bytes, then the (H, W, 3) RGB bytes as they are, which Pillow (lerobot) reads
and ``robopipe.loading.stored_frames`` maps without decoding. (A 3-D ``uint8`` feature, HF's
``Array3D``, would be stored as nested lists of 32-bit integers: 4x the bytes, and about 15 ms to
read one 640x480 frame.) Files are written uncompressed, with row groups of about
``ROW_GROUP_BYTES`` of frames that never span two episodes (an episode is one row group, or
a few of equal rows where its frames are larger), so a loader reads one frame without reading
the whole file, and one episode's rows are whole row groups.
"""

from __future__ import annotations

import io
import time
from pathlib import Path

import av
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

from robopipe.atomic import atomic_path
from robopipe.copies.encodings import Encoding
from robopipe.copies.fidelity import Fidelity
from robopipe.copies.reencode import resized
from robopipe.errors import DatasetError
from robopipe.formats.images import decode_image
from robopipe.formats.v30_reader import DatasetMeta

ROW_GROUP_BYTES = 1 << 20
IMAGE_TYPE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])


def episode_frames(meta: DatasetMeta, camera: str, episode: int, size: tuple[int, int] | None):
    """The frames of ``episode`` for ``camera`` as (H, W, 3) uint8 RGB (resized to ``size``),
    decoded from its v3.0 mp4 starting at the episode's ``from_timestamp``.

    Raises:
        DatasetError: the mp4 holds fewer frames for the episode than its ``length``.
    """
    start = float(meta.episodes[f"videos/{camera}/from_timestamp"][episode])
    length = int(meta.episodes["length"][episode])
    relative = meta.video_file(camera, episode)
    half_frame = 0.5 / meta.fps
    taken = 0
    with av.open(meta.path(relative)) as container:
        stream = container.streams.video[0]
        container.seek(int(start / stream.time_base), stream=stream, backward=True)
        for frame in container.decode(stream):
            if frame.time < start - half_frame:
                continue
            yield resized(frame, size, "rgb24").to_ndarray()
            taken += 1
            if taken == length:
                return
    raise DatasetError(
        meta.name,
        f"{taken} frames from {start:.6f} s, expected {length}",
        episode=episode,
        file=relative,
    )


def copy_data_file(
    meta: DatasetMeta, relative: str, output: Path, encoding: Encoding, *, fidelity_stride: int = 1
) -> dict:
    """Write ``output``: the data file ``relative`` of ``meta`` plus one column per camera
    holding its frames in ``encoding`` (``jpeg`` or ``raw``).

    Returns:
        ``frames`` (frames written, all cameras), ``encode_s`` (wall seconds to decode,
        resize and encode them), ``bytes`` (the output's size), ``fidelity`` (per-frame PSNR
        and SSIM of the stored frames against the source's, ``Fidelity.summary_parts``),
        ``width``, ``height``.

    Raises:
        ValueError: an encoding whose frames stay in mp4 files.
        DatasetError: an episode's frames are missing from its mp4.
    """
    if encoding.in_video_files:
        raise ValueError(f"encoding {encoding.name!r} keeps frames in mp4 files")
    table = pq.read_table(meta.path(relative))
    table = table.replace_schema_metadata(None)  # the source's HF features no longer match
    episodes = sorted(set(table.column("episode_index").to_numpy().tolist()))
    fidelity = Fidelity(fidelity_stride)
    columns, frames, encode_s = {}, 0, 0.0
    height = width = None
    for camera in meta.video_keys:
        values = []
        for episode in episodes:
            start = time.perf_counter()
            for rgb in episode_frames(meta, camera, episode, encoding.size):
                stored = _encode(rgb, encoding)
                encode_s += time.perf_counter() - start
                fidelity.add(rgb, lambda data=stored["bytes"]: decode_image(data))
                values.append(stored)
                height, width = rgb.shape[:2]
                start = time.perf_counter()
        if len(values) != table.num_rows:
            raise DatasetError(
                meta.name,
                f"{len(values)} frames of {camera} for {table.num_rows} rows",
                file=relative,
            )
        frames += len(values)
        columns[camera] = pa.array(values, type=IMAGE_TYPE)
    for camera, column in columns.items():
        table = table.append_column(camera, column)
    row_bytes = sum(c.nbytes for c in columns.values()) / max(table.num_rows, 1)
    with (
        atomic_path(output) as tmp,
        pq.ParquetWriter(
            tmp,
            table.schema,
            compression="none",
            use_dictionary=[c for c in table.column_names if c not in columns],
            # no min/max of frame bytes: 18,000 row groups' statistics cost a reader 160 MB
            write_statistics=[c for c in table.column_names if c not in columns],
        ) as writer,
    ):
        for rows in _episode_row_groups(table, row_bytes):
            writer.write_table(rows, row_group_size=rows.num_rows)
    return {
        "frames": frames,
        "encode_s": encode_s,
        "bytes": output.stat().st_size,
        "fidelity": fidelity.summary_parts(),
        "width": width,
        "height": height,
    }


def _episode_row_groups(table: pa.Table, row_bytes: float) -> list[pa.Table]:
    """``table`` cut into row groups: each episode (run of equal ``episode_index``) into the
    fewest parts of equal rows (the last a little shorter) with about ``ROW_GROUP_BYTES`` of
    frames at most, ``row_bytes`` per row; zero-copy slices."""
    episode_index = table.column("episode_index").to_numpy()
    starts = [0, *(np.flatnonzero(episode_index[1:] != episode_index[:-1]) + 1).tolist()]
    ends = [*starts[1:], table.num_rows]
    groups = []
    for start, end in zip(starts, ends, strict=True):
        if end == start:
            continue  # a table without rows
        parts = max(1, -(-int((end - start) * row_bytes) // ROW_GROUP_BYTES))
        size = -(-(end - start) // parts)
        groups += [table.slice(a, min(size, end - a)) for a in range(start, end, size)]
    return groups


def _encode(rgb: np.ndarray, encoding: Encoding) -> dict:
    """The value stored in the parquet for one (H, W, 3) uint8 frame."""
    buffer = io.BytesIO()
    if encoding.kind == "raw":
        Image.fromarray(rgb).save(buffer, format="PPM")
    else:
        Image.fromarray(rgb).save(buffer, format="JPEG", quality=encoding.quality)
    return {"bytes": buffer.getvalue(), "path": None}

"""Validate a converted v3.0 dataset against its plan and its v2.1 source, file by file.

Each final file is proven by construction by the job that wrote it, as soon as it is written:
the file is read back from disk and compared with what was read from the source. Each report
gives the ``seconds`` the check took, so the cost of verification stays visible.

- :func:`validate_data_file`: every row equals the source's bit for bit, column by column
  (:func:`same_bits`: NaN, inf and -0.0 as the source holds them; ``index`` and
  ``episode_index`` as renumbered, ``timestamp`` as restamped), ``index`` is the global row
  position (lerobot's loader relies on it), ``frame_index`` counts ``0..length-1`` and
  timestamps sit at ``frame_index / fps`` within ``tolerance_s``.
- :func:`validate_video_file`: every packet equals the source's: the digests of its payload
  and of its (pts - offset, dts - offset, keyframe) equal those the remux recorded while
  reading the source, the stream's codec, size, pixel format and extradata equal the
  source's and what ``info.json`` declares; then a few frames are decoded (the first and last
  of the file, the middle of its middle episode) and compared bit for bit with the source's,
  or, with ``frames="all"``, every frame.

Last, :func:`validate` checks the whole staged dataset: every planned file is present, the
episodes metadata rows match the plan, and the first and last frame of every video file are
looked up from the v3.0 files alone, as lerobot's loader does. A dataset that fails any of
these is never published.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from robopipe.checks.doctor import run_doctor
from robopipe.checks.rules import timestamp_error, undeclared_column_message
from robopipe.conversion.plan import Plan, PlannedEpisode
from robopipe.formats.v21_reader import V21Source, declared_stream
from robopipe.formats.v21_repairs import (
    episode_task_index,
    repair_table,
    repairs_of,
    undeclared_columns,
)
from robopipe.formats.v30_reader import (
    DatasetMeta,
    open_data_file,
    read_data_rows,
    read_meta,
    row_groups_of_rows,
)
from robopipe.layout import (
    DEFAULT_FEATURE_SPECS,
    DEFAULT_FEATURES,
    DEFAULT_TOLERANCE_S,
    INFO_PATH,
    V21_INFO_PATH,
    data_path,
    video_path,
)
from robopipe.remux import MP4, FrameReader, StreamParams, VideoError, run_digests

FRAME_MODES = ("sample", "all")


def validate_data_file(
    source: V21Source,
    plan: Plan,
    root: Path,
    chunk: int,
    file: int,
    *,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
) -> dict:
    """Check the data file ``(chunk, file)`` of the v3.0 dataset at ``root`` row by row
    against the source episodes the plan put in it.

    Returns:
        ``{"file", "episodes", "rows", "seconds"}`` (``seconds``: wall time of this check).

    Raises:
        DatasetError: naming the episode and file of the first difference.
    """
    start = time.perf_counter()
    rel = data_path(chunk, file)
    episodes = [e for e in plan.episodes if e.data == (chunk, file)]
    try:
        parquet = pq.ParquetFile(Path(root) / rel)
    except (OSError, pa.ArrowInvalid) as exc:
        raise source.error(f"unreadable output data file: {exc}", file=rel) from None
    rows_in_file = parquet.metadata.num_rows
    expected_rows = sum(e.length for e in episodes)
    if rows_in_file != expected_rows:
        raise source.error(f"{rows_in_file} rows, expected {expected_rows}", file=rel)
    first = episodes[0].dataset_from_index
    try:
        for ep, rows in zip(
            episodes, episode_rows(parquet, [e.length for e in episodes]), strict=True
        ):
            index = rows.column("index").to_numpy()
            expected = np.arange(ep.dataset_from_index, ep.dataset_to_index)
            if not np.array_equal(index, expected):
                bad = int(np.flatnonzero(index != expected)[0])
                raise source.error(
                    "index column is not the global row position: row "
                    f"{ep.dataset_from_index - first + bad} has index {index[bad]}, "
                    f"expected {expected[bad]}",
                    file=rel,
                )
            _check_episode_rows(source, plan, ep, rows, rel, tolerance_s)
    except (OSError, pa.ArrowInvalid) as exc:
        raise source.error(f"unreadable output data file: {exc}", file=rel) from None
    seconds = round(time.perf_counter() - start, 3)
    return {"file": rel, "episodes": len(episodes), "rows": rows_in_file, "seconds": seconds}


def episode_rows(parquet: pq.ParquetFile, lengths: list[int]) -> Iterator[pa.Table]:
    """The rows of each episode of a parquet file, in order: ``lengths[i]`` rows for episode
    ``i``, read one row group at a time, so that memory holds one row group and one episode,
    not the file (a data file whose episodes are its row groups, as robopipe writes them,
    yields each row group as it is).

    Raises:
        ValueError: the file has fewer rows than ``sum(lengths)``.
    """
    pending: list[pa.Table] = []  # rows read but not yet yielded, in order
    held = 0
    groups = iter(range(parquet.num_row_groups))
    for length in lengths:
        while held < length:
            group = next(groups, None)
            if group is None:
                raise ValueError(f"{held} rows left for an episode of {length}")
            table = parquet.read_row_group(group, use_threads=False)  # small: no thread pool
            pending.append(table)
            held += table.num_rows
        rows = pending[0] if len(pending) == 1 else pa.concat_tables(pending)
        yield rows.slice(0, length)
        rest = rows.slice(length)
        pending, held = ([rest] if rest.num_rows else []), rest.num_rows


def _check_episode_rows(
    source: V21Source,
    plan: Plan,
    ep: PlannedEpisode,
    rows: pa.Table,
    rel: str,
    tolerance_s: float,
) -> None:
    def fail(message: str):
        return source.error(message, episode=ep.source_episode_index, file=rel)

    frame_index = rows.column("frame_index").to_numpy()
    if not np.array_equal(frame_index, np.arange(ep.length)):
        raise fail("frame_index is not 0..length-1")
    if not (rows.column("episode_index").to_numpy() == ep.episode_index).all():
        raise fail(f"episode_index column is not {ep.episode_index}")
    timestamps = rows.column("timestamp").to_numpy().astype(np.float64)
    worst, at = timestamp_error(timestamps, frame_index, source.fps)
    if worst > tolerance_s:
        raise fail(
            f"timestamp differs from frame_index / fps by {worst:.6f} s at frame {at} "
            f"(tolerance_s={tolerance_s}); if the source's timestamps are off, convert with "
            "`restamp_timestamps: true`"
        )
    # the source's rows as the plan's repairs make them (derived columns, float64 cast)
    original = repair_table(
        # ParquetFile, not read_table (its dataset layer): 0.16 instead of 0.9 ms a file
        pq.ParquetFile(source.data_file(ep.source_episode_index)).read(use_threads=False),
        source.info["features"],
        repairs_of(plan.options),
        index_start=ep.dataset_from_index,
        task_index=episode_task_index(source.episodes[ep.source_episode_index], source.tasks),
    )
    if rows.schema.names != original.schema.names:
        raise fail(f"columns {rows.schema.names} differ from the source's {original.schema.names}")
    renumbered = {"index", "episode_index"} if plan.options.skip_episodes else set()
    if plan.options.restamp_timestamps:
        renumbered.add("timestamp")
    for name in original.schema.names:
        if name in renumbered:
            continue
        if not same_bits(rows.column(name), original.column(name)):
            raise fail(f"column {name} differs from the source")


def same_bits(a: pa.ChunkedArray, b: pa.ChunkedArray) -> bool:
    """Whether two columns hold the same values bit for bit: the same type and nulls, and
    every float the same bit pattern.

    Arrow's own ``equals`` compares floats by value, so a NaN differs from itself (a column
    with NaN never equals its copy) and ``-0.0`` equals ``0.0``; here each float (half, single
    or double precision, also inside lists and structs) is compared as the unsigned integer of
    its bits (a zero-copy ``view``), so NaN (whatever its payload), inf and signed zeros
    compare as the bytes the file holds. Values under a null are not compared (Arrow's rule).
    """
    if a.type != b.type:
        return False
    bits = _bits_type(a.type)
    if bits == a.type:
        return a.equals(b)
    return pa.chunked_array([c.view(bits) for c in a.chunks], bits).equals(
        pa.chunked_array([c.view(bits) for c in b.chunks], bits)
    )


def bits_digest(table: pa.Table) -> bytes:
    """A SHA-256 of a table's column names, types and values bit for bit, as
    :func:`same_bits` compares them (each float as the bits the file holds; a null's value
    not counted): two tables of equal columns by :func:`same_bits` have equal digests, however
    their columns are chunked or sliced. For a proof that must not hold two files' rows (or
    footers) at once: digest what is written, then what is read back."""
    hashed = hashlib.sha256()
    for name, column in zip(table.column_names, table.columns, strict=True):
        hashed.update(f"{name}\0{column.type}\0{len(column)}\0".encode())
        bits = _bits_type(column.type)
        chunks = [c if bits == column.type else c.view(bits) for c in column.chunks]
        _digest_array(hashed, pa.concat_arrays(chunks) if chunks else pa.array([], bits))
    return hashed.digest()


def _digest_array(hashed, array: pa.Array) -> None:
    # the nulls, then the values under the valid slots: the layout's own buffers are not
    # hashed (a slice's offset and a validity buffer without nulls would count)
    if array.null_count:
        hashed.update(np.packbits(array.is_null().to_numpy(zero_copy_only=False)).tobytes())
    kind = array.type
    if pa.types.is_fixed_size_list(kind) or pa.types.is_list(kind) or pa.types.is_large_list(kind):
        if not pa.types.is_fixed_size_list(kind):
            lengths = array.value_lengths().fill_null(0)
            hashed.update(lengths.to_numpy(zero_copy_only=False).tobytes())
        _digest_array(hashed, array.flatten())
    elif pa.types.is_struct(kind):
        for child in array.flatten():
            _digest_array(hashed, child)
    elif pa.types.is_primitive(kind) and not pa.types.is_boolean(kind):
        values = array.fill_null(pa.scalar(0, kind)) if array.null_count else array
        hashed.update(values.to_numpy(zero_copy_only=False).tobytes())
    else:  # booleans, strings, binary, anything else: as Python values
        hashed.update(repr(array.to_pylist()).encode())


def _bits_type(type_: pa.DataType) -> pa.DataType:
    # the type of the same layout with every float an unsigned integer of its width
    if pa.types.is_floating(type_):
        return {16: pa.uint16(), 32: pa.uint32(), 64: pa.uint64()}[type_.bit_width]
    if pa.types.is_fixed_size_list(type_):
        return pa.list_(type_.value_field.with_type(_bits_type(type_.value_type)), type_.list_size)
    if pa.types.is_list(type_):
        return pa.list_(type_.value_field.with_type(_bits_type(type_.value_type)))
    if pa.types.is_large_list(type_):
        return pa.large_list(type_.value_field.with_type(_bits_type(type_.value_type)))
    if pa.types.is_struct(type_):
        return pa.struct([f.with_type(_bits_type(f.type)) for f in type_.fields])
    return type_


def validate_video_file(
    source: V21Source,
    plan: Plan,
    root: Path,
    video_key: str,
    chunk: int,
    file: int,
    episodes_json: Path,
    *,
    frames: str = "sample",
    tolerance_s: float = DEFAULT_TOLERANCE_S,
) -> dict:
    """Check camera ``video_key``'s video file ``(chunk, file)`` of the v3.0 dataset at
    ``root`` packet by packet against what its aggregate job read from the source
    (``episodes_json``, written by :func:`robopipe.conversion.aggregate.aggregate_video`), and
    decode a few frames (``frames="sample"``) or all of them (``"all"``) to compare with the
    source's, bit for bit in the native pixel format.

    Returns:
        ``{"file", "episodes", "packets", "frames_compared", "seconds"}`` (``seconds``: wall
        time of this check).

    Raises:
        DatasetError: naming the episode and file of the first difference.
        ValueError: ``frames`` is not ``"sample"`` or ``"all"``.
    """
    if frames not in FRAME_MODES:
        raise ValueError(f"frames must be one of {FRAME_MODES}, got {frames!r}")
    start = time.perf_counter()
    rel = video_path(video_key, chunk, file)
    landed = json.loads(Path(episodes_json).read_text("utf-8"))
    records = landed["episodes"]
    episodes = [plan.episodes[r["episode_index"]] for r in records]
    if [e.episode_index for e in episodes] != [
        e.episode_index for e in plan.episodes if e.videos[video_key] == (chunk, file)
    ]:
        raise source.error("the remux record does not list the planned episodes", file=rel)
    path = Path(root) / rel
    try:
        packets = _check_packets(source, path, rel, video_key, landed, episodes)
    except (av.FFmpegError, OSError) as exc:
        raise source.error(f"unreadable output video file: {exc}", file=rel) from None
    time_base = Fraction(landed["time_base"])
    starts = {r["episode_index"]: float(r["offset_ticks"] * time_base) for r in records}
    compared = _compare_frames(source, path, rel, video_key, episodes, starts, frames, tolerance_s)
    return {
        "file": rel,
        "episodes": len(episodes),
        "packets": packets,
        "frames_compared": compared,
        "seconds": round(time.perf_counter() - start, 3),
    }


def _check_packets(
    source: V21Source,
    path: Path,
    rel: str,
    video_key: str,
    landed: dict,
    episodes: list[PlannedEpisode],
) -> int:
    records = landed["episodes"]
    with av.open(str(path), format=MP4) as container:
        stream = container.streams.video[0]
        params = StreamParams.of(stream)
        if vars(params) != landed["stream"]:
            raise source.error(
                f"stream {params.describe()} differs from the source's {landed['stream']}",
                file=rel,
            )
        declared = declared_stream(source.info, video_key)
        for what in ("codec", "width", "height", "pix_fmt"):
            if declared[what] is not None and declared[what] != getattr(params, what):
                raise source.error(
                    f"{what} is {getattr(params, what)} but info.json declares {declared[what]}",
                    file=rel,
                )
        runs = [(r["packets"], r["offset_ticks"]) for r in records]
        digests = run_digests(path, container, stream, runs)
        total = 0
        for ep, record, digest in zip(episodes, records, digests, strict=False):
            got = digest.as_dict()
            want = {k: record[k] for k in got}
            if got != want:
                what = [k for k in got if got[k] != want[k]]
                raise source.error(
                    f"packets of episode {ep.episode_index} in {rel} differ from the source "
                    f"({', '.join(what)})",
                    episode=ep.source_episode_index,
                    file=source.video_file(ep.source_episode_index, video_key),
                )
            total += digest.packets
        if next(digests).packets:  # the packets after the episodes'
            raise source.error("the file holds more packets than its episodes", file=rel)
    return total


def _compare_frames(
    source: V21Source,
    path: Path,
    rel: str,
    video_key: str,
    episodes: list[PlannedEpisode],
    starts: dict[int, float],
    mode: str,
    tolerance_s: float,
) -> int:
    if mode == "sample":
        middle = episodes[len(episodes) // 2]
        wanted = [(episodes[0], 0), (middle, middle.length // 2)]
        wanted.append((episodes[-1], episodes[-1].length - 1))
    else:
        wanted = [(ep, k) for ep in episodes for k in range(ep.length)]
    compared = 0
    with FrameReader(path) as out:
        for ep, k in wanted:
            src_path = source.video_file(ep.source_episode_index, video_key)
            try:
                got = out.frame_at(starts[ep.episode_index] + k / source.fps, tolerance_s)
                with FrameReader(src_path) as src:
                    want = src.frame_at(k / source.fps, tolerance_s)
            except VideoError as exc:
                raise source.error(
                    f"frame {k}: {exc.reason}", episode=ep.source_episode_index, file=exc.path
                ) from exc
            if not np.array_equal(got, want):
                raise source.error(
                    f"frame {k} of camera {video_key} differs from the source",
                    episode=ep.source_episode_index,
                    file=rel,
                )
            compared += 1
    return compared


def validate(
    source: V21Source,
    plan: Plan,
    root: Path,
    reports: list[dict],
    *,
    peer_python: str | None = None,
) -> dict:
    """Check the staged dataset at ``root`` as a whole, after every file passed its own check
    (``reports``: the dicts :func:`validate_data_file` and :func:`validate_video_file`
    returned): every planned file is present, the episodes metadata rows match the plan,
    ``info.json`` declares every data column and lerobot's default features (its loader
    reads only declared columns, with these types), and the first and last frame of every
    video file are found from the v3.0 files alone, as a loader finds them. Last, where
    ``peer_python`` names the peer interpreter, lerobot-lancedb's doctor gives its opinion
    (:func:`robopipe.checks.doctor.run_doctor`). Of ``source`` only the name and root
    are used, in errors (the validate job passes one without its episodes).

    Returns:
        ``{"episodes", "frames", "data_files", "video_files", "packets", "frames_compared",
        "frames_loaded", "doctor"}``.

    Raises:
        DatasetError: the first check that fails (the doctor's flags included).
    """
    root = Path(root)
    missing = [rel for rel in plan.file_paths() if not (root / rel).is_file()]
    if missing:
        raise source.error(f"planned output file is missing from {root}", file=missing[0])
    if not (root / INFO_PATH).is_file():
        raise source.error(f"{INFO_PATH} is missing from {root}")
    checked = {r["file"] for r in reports}
    unchecked = [rel for rel in plan.file_paths() if rel not in checked]
    if unchecked:
        raise source.error("no validation report for this file", file=unchecked[0])
    meta = read_meta(str(root), name=plan.dataset)
    _check_episodes_meta(source, plan, meta)
    data_files = DataFiles(meta)
    _check_declared_columns(source, plan, meta.info, data_files)
    loaded = _load_first_and_last_frames(source, plan, root, meta, data_files)
    return {
        "episodes": len(plan.episodes),
        "frames": plan.total_frames,
        "data_files": len(plan.data_files),
        "video_files": sum(len(f) for f in plan.video_files.values()),
        "packets": sum(r.get("packets", 0) for r in reports),
        "frames_compared": sum(r.get("frames_compared", 0) for r in reports),
        "frames_loaded": loaded,
        "doctor": run_doctor(root, peer_python, plan.dataset),
    }


def _check_episodes_meta(source: V21Source, plan: Plan, meta: DatasetMeta) -> None:
    """The rows of ``meta/episodes`` (``meta.episodes``, as :func:`read_meta` read them) are
    the plan's episodes, compared ``_META_BATCH_ROWS`` at a time."""
    rows = len(meta.episodes["episode_index"])
    if rows != len(plan.episodes):
        raise source.error(f"meta/episodes has {rows} rows, expected {len(plan.episodes)}")
    for start in range(0, rows, _META_BATCH_ROWS):
        planned = plan.episodes[start : start + _META_BATCH_ROWS]
        want = {
            "episode_index": [ep.episode_index for ep in planned],
            "dataset_from_index": [ep.dataset_from_index for ep in planned],
            "dataset_to_index": [ep.dataset_to_index for ep in planned],
            "length": [ep.length for ep in planned],
            "data/chunk_index": [ep.data[0] for ep in planned],
            "data/file_index": [ep.data[1] for ep in planned],
        }
        got = {name: meta.episodes[name][start : start + len(planned)] for name in want}
        same = np.logical_and.reduce([got[name] == want[name] for name in want])
        if not same.all():
            k = int(np.flatnonzero(~same)[0])
            raise source.error(
                f"meta/episodes row {planned[k].episode_index} is "
                f"{ {name: got[name][k].item() for name in want} }, expected "
                f"{ {name: want[name][k] for name in want} }",
                episode=planned[k].source_episode_index,
            )


# rows of meta/episodes compared at a time by validate (the plan's values held at once)
_META_BATCH_ROWS = 4096


class DataFiles:
    """The data files of a v3.0 dataset opened one at a time (:func:`open_data_file`), each
    footer parsed once for every check that needs it and freed before the next is parsed:
    the footer of a data file of one row group per episode is the largest thing validation
    holds (20,000 episodes: 15 MiB on disk, about 120 MB parsed).

    Args:
        meta: the dataset's metadata (:func:`robopipe.formats.v30_reader.read_meta`).
    """

    def __init__(self, meta: DatasetMeta):
        self.meta = meta
        self._rel: str | None = None
        self._opened: tuple[pq.ParquetFile, np.ndarray] | None = None

    def open(self, rel: str) -> tuple[pq.ParquetFile, np.ndarray]:
        """Data file ``rel`` (relative to the root) and where its row groups start, as
        :func:`open_data_file` returns them. Raises DatasetError as it does."""
        if rel != self._rel:
            self._rel, self._opened = None, None  # the previous footer goes first
            self._opened = open_data_file(self.meta, rel)
            self._rel = rel
        return self._opened

    def close(self) -> None:
        """Let go of the data file opened last."""
        self._rel, self._opened = None, None


def _check_declared_columns(
    source: V21Source, plan: Plan, info: dict, data_files: DataFiles
) -> None:
    """Every data file's columns are exactly the non-video features ``info`` declares, and
    lerobot's default features are among them (lerobot 0.6.1 reads the data files with
    ``Dataset.from_parquet(features=<info.json's>)``, and each item's ``timestamp``,
    ``index``, ``episode_index`` and ``task_index``)."""
    features = info["features"]
    absent = [name for name in DEFAULT_FEATURES if name not in features]
    if absent:
        raise source.error(
            f"the output's {INFO_PATH} does not declare {absent[0]!r}, which lerobot's loader "
            f"reads; declare it in the source's {V21_INFO_PATH} features "
            f"(e.g. {DEFAULT_FEATURE_SPECS[absent[0]]})",
            file=V21_INFO_PATH,
        )
    declared = [name for name, spec in features.items() if spec.get("dtype") != "video"]
    for f in plan.data_files:
        rel = data_path(f.chunk, f.file)
        columns = data_files.open(rel)[0].schema_arrow.names
        undeclared = undeclared_columns(columns, features)  # the check's rule, on the output
        if undeclared:
            raise source.error(undeclared_column_message(undeclared[0]), file=V21_INFO_PATH)
        lacking = [name for name in declared if name not in columns]
        if lacking:
            raise source.error(
                f"info.json declares {lacking[0]!r} but output data file {rel} has no such "
                "column; add the column to every episode's parquet, or remove the feature",
                file=V21_INFO_PATH,
            )


def _load_first_and_last_frames(
    source: V21Source, plan: Plan, root: Path, meta: DatasetMeta, data_files: DataFiles
) -> int:
    """Look up the first and last frame of every video file as a LeRobot loader does, from
    the v3.0 files alone: the episode's ``from_timestamp`` in ``meta/episodes`` plus the row's
    ``timestamp`` in the data file, decoded within ``tolerance_s``, and of the size info.json
    declares (lerobot 0.6.1 ``LeRobotDataset._query_videos``: torchcodec decodes into frames
    of that size). Torch-free: importing torch would cost this job seconds and 370 MB.

    The rows' timestamps are read first, a data file at a time, and the last footer is freed
    before any video file is opened: a data file's footer and a video file's index are the
    largest things this job holds (at 76,000 episodes about 140 and 60 MB), one at a time."""
    file_start: dict[tuple[int, int], int] = {}  # data file -> global index of its first row
    for ep in plan.episodes:
        file_start.setdefault(ep.data, ep.dataset_from_index)
    # each camera's video files, each with its first episode's first row and last one's last
    looked_up_rows: list[tuple[str, list[tuple[PlannedEpisode, int]]]] = []
    for key in plan.video_keys:
        held: dict[tuple[int, int], list[PlannedEpisode]] = {}
        for ep in plan.episodes:
            held.setdefault(ep.videos[key], []).append(ep)
        for episodes in held.values():
            rows = [(episodes[0], 0), (episodes[-1], episodes[-1].length - 1)]
            looked_up_rows.append((key, rows))
    timestamps: dict[tuple[int, int], float] = {}  # (episode index, row) -> timestamp
    wanted = {(ep.episode_index, row) for _, rows in looked_up_rows for ep, row in rows}
    for episode_index, row in sorted(wanted):  # in episode order: a data file at a time
        rel = meta.data_file(episode_index)
        parquet, starts = data_files.open(rel)
        first_row = int(meta.episodes["dataset_from_index"][episode_index])
        at = first_row - file_start[plan.episodes[episode_index].data] + row  # in its file
        groups = row_groups_of_rows(starts, at, 1)  # read as a loader reads it
        values = read_data_rows(meta, rel, parquet, groups)["timestamp"]
        timestamps[(episode_index, row)] = float(values[at - starts[groups.start]])
        del parquet, starts  # so that the next data file's footer is not parsed beside this one
    data_files.close()
    tolerance_s = plan.options.tolerance_s
    looked_up = 0
    for key, rows in looked_up_rows:
        declared = declared_stream(meta.info, key)  # what a loader sizes its frames by
        height, width = declared["height"], declared["width"]
        with FrameReader(root / meta.video_file(key, rows[0][0].episode_index)) as reader:
            for ep, row in rows:
                ts = timestamps[(ep.episode_index, row)]
                start = float(meta.episodes[f"videos/{key}/from_timestamp"][ep.episode_index])
                try:
                    frame = reader.video_frame_at(start + ts, tolerance_s)
                except VideoError as exc:
                    raise source.error(
                        f"a loader cannot read frame {row} of camera {key}: {exc.reason}",
                        episode=ep.source_episode_index,
                        file=meta.video_file(key, ep.episode_index),
                    ) from exc
                if (frame.height, frame.width) != (height, width):
                    raise source.error(
                        f"frame {row} of camera {key} is {frame.width}x{frame.height}, but "
                        f"info.json declares {width}x{height}",
                        episode=ep.source_episode_index,
                        file=meta.video_file(key, ep.episode_index),
                    )
                looked_up += 1
    return looked_up

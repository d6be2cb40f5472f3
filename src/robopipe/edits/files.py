"""The jobs of an edit that write one output file each: a data file (rows reindexed) or a
video file (stream copy; re-encoded where a cut falls inside a GOP), each then proven against
its input file in the same process.

A file that keeps every episode of its input file and whose rows keep their indices is
hard-linked (:func:`robopipe.atomic.link_or_copy`), no bytes copied.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from robopipe.atomic import atomic_path, link_or_copy, write_json
from robopipe.conversion.aggregate import episode_slices
from robopipe.conversion.validate import bits_digest
from robopipe.edits.plan import EditFile, EditPlan
from robopipe.edits.reencode import cuts_inside_a_gop, reencode_file
from robopipe.errors import DatasetError
from robopipe.formats.v30_reader import read_meta
from robopipe.layout import data_path, video_path
from robopipe.mp4 import Track, plain_track
from robopipe.quality.dataset import column_array
from robopipe.remux import MP4, PacketDigest, run_digests
from robopipe.stats import quantile_episode_stats

# rows read from an input data file at a time (whatever its row groups)
BATCH_ROWS = 65_536


def write_data_file(plan: EditPlan, chunk: int, file: int, output: Path, report: Path) -> dict:
    """Write the output data file ``chunk``/``file`` to ``output``, prove it, and write the
    proof to ``report``.

    Each kept episode's rows are copied from the input file with ``episode_index``, ``index``
    and ``task_index`` set to the output's, one parquet row group per episode (as lerobot's
    recorder and robopipe's conversion write). The input is read ``BATCH_ROWS`` rows at a
    time, so memory holds one episode and one batch, and each episode's rows are digested as
    written (:func:`robopipe.conversion.validate.bits_digest`). Then every output row group
    is read back and its digest compared with its episode's, every column bit for bit. The
    two files' footers (about 8 KB an episode each in memory, one row group an episode) are
    never held at once: the input's is freed before the writer's is made.

    Returns (and writes to ``report``): ``{"file", "source", "episodes", "rows", "linked"}``,
    and for ``recompute_stats`` ``"episode_stats"`` (:func:`recomputed_episode_stats`).

    Raises:
        DatasetError: an input episode's rows are missing from its file, or the output
            differs from what was read (naming the episode and file).
    """
    f = plan.data_file(chunk, file)
    source = Path(plan.sources[f.source]) / f.path
    name = plan.dataset
    linked = f.whole and plan.identity(f.source)
    if linked:
        with atomic_path(output) as tmp:
            link_or_copy(source, tmp)
    else:
        with atomic_path(output) as tmp:
            digests = _write_rows(plan, f, source, tmp)
        written = pq.ParquetFile(output)
        if written.num_row_groups != len(digests):
            raise DatasetError(name, "row groups differ from the episodes", file=output)
        for group, (episode, digest) in enumerate(digests):
            if bits_digest(written.read_row_group(group, use_threads=False)) != digest:
                raise DatasetError(
                    name, "rows differ from the input's", episode=episode, file=output
                )
    result = {
        "file": data_path(chunk, file),
        "source": str(source),
        "episodes": f.stop - f.first,
        "rows": int(plan.episodes["length"][f.first : f.stop].sum()),
        "linked": linked,
    }
    if plan.recomputed:
        result["episode_stats"] = recomputed_episode_stats(plan, output)
    write_json(report, result)
    return result


def _write_rows(plan: EditPlan, f: EditFile, source: Path, path: Path) -> list[tuple[int, bytes]]:
    """Write output data file ``f``'s episodes to ``path`` from the input file ``source``;
    returns (output episode, :func:`bits_digest` of its rows) per row group, in order. The
    input's reader is freed before the writer closes, whose footer then takes its memory."""
    parquet = pq.ParquetFile(source)
    digests, writer = [], None
    try:
        for episode, table in _episode_tables(plan, f, parquet, source):
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema)
            writer.write_table(table, row_group_size=max(table.num_rows, 1))
            digests.append((episode, bits_digest(table)))
        del parquet
    finally:
        if writer is not None:
            writer.close()
    return digests


def recomputed_episode_stats(plan: EditPlan, path: Path) -> list[dict]:
    """Each episode's stats of the ``plan.recomputed`` features, computed from the rows of
    the data file ``path`` as lerobot 0.6.1's ``recompute_stats`` does (the rows of each
    ``episode_index`` in the file, one run each in a v3.0 data file:
    :func:`robopipe.conversion.aggregate.episode_slices`;
    :func:`robopipe.stats.quantile_episode_stats`).

    Returns ``[{"episode_index": i, "stats": {feature: {stat: list}}}]`` in file order.
    Memory holds those columns of the one file.
    """
    table = pq.read_table(path, columns=["episode_index", *plan.recomputed], use_threads=False)
    return [
        {
            "episode_index": episode["episode_index"][0].as_py(),
            "stats": quantile_episode_stats(
                {k: column_array(episode.column(k)) for k in plan.recomputed}
            ),
        }
        for episode in episode_slices(table)
    ]


def _episode_tables(
    plan: EditPlan, f: EditFile, parquet: pq.ParquetFile, source: Path
) -> Iterator[tuple[int, pa.Table]]:
    """(output episode, its rows as the output holds them) for each episode of ``f``, read
    from ``parquet``, the input file ``source``."""
    e = plan.episodes
    index = np.concatenate(
        [batch.column(0).to_numpy() for batch in _batches(parquet, ["index"])] or [[]]
    ).astype(np.int64, copy=False)
    task_map = np.asarray(plan.task_maps[f.source], np.int64)
    wanted = []
    for episode in range(f.first, f.stop):
        start = int(np.searchsorted(index, e["source_from_index"][episode]))
        length = int(e["length"][episode])
        if start + length > len(index) or index[start] != e["source_from_index"][episode]:
            raise DatasetError(
                plan.source_names[f.source],
                f"the rows of episode {int(e['source_episode'][episode])} are not in this file",
                file=source,
            )
        wanted.append((episode, start, start + length))
    batches = _batches(parquet)
    held, held_start = [], 0  # batches from row held_start on
    for episode, start, stop in wanted:
        pieces, position = [], held_start
        for batch in held:
            lo, hi = max(start, position), min(stop, position + batch.num_rows)
            if hi > lo:
                pieces.append(batch.slice(lo - position, hi - lo))
            position += batch.num_rows
        while position < stop:
            batch = next(batches)
            held.append(batch)
            lo, hi = max(start, position), min(stop, position + batch.num_rows)
            if hi > lo:
                pieces.append(batch.slice(lo - position, hi - lo))
            position += batch.num_rows
        while held and held_start + held[0].num_rows <= stop:  # no later episode needs it
            held_start += held.pop(0).num_rows
        table = pa.Table.from_batches(pieces, schema=parquet.schema_arrow)
        table = table.drop_columns([c for c in plan.removed if c in table.column_names])
        yield episode, _reindexed(table, episode, e, task_map)


def _batches(parquet: pq.ParquetFile, columns: list[str] | None = None) -> Iterator[pa.RecordBatch]:
    """The file's rows in order, in batches of at most ``BATCH_ROWS``, read a run of row
    groups of about that many rows at a time: one ``iter_batches`` over every row group of a
    file of one row group per episode holds reader state per row group (80 MB more at 18,000
    episodes), a run's only that run's."""
    metadata = parquet.metadata
    run, rows = [], 0
    for group in range(metadata.num_row_groups):
        run.append(group)
        rows += metadata.row_group(group).num_rows
        if rows >= BATCH_ROWS or group == metadata.num_row_groups - 1:
            yield from parquet.iter_batches(
                batch_size=BATCH_ROWS, row_groups=run, columns=columns, use_threads=False
            )
            run, rows = [], 0


def _reindexed(table: pa.Table, episode: int, e: dict, task_map: np.ndarray) -> pa.Table:
    n = table.num_rows
    first = int(e["dataset_from_index"][episode])
    values = {
        "episode_index": np.full(n, episode, np.int64),
        "index": np.arange(first, first + n, dtype=np.int64),
        "task_index": (
            np.full(n, e["task_index"][episode], np.int64)  # modify_tasks: the episode's
            if "task_index" in e
            else task_map[table.column("task_index").to_numpy()]
        ),
    }
    for column, array in values.items():
        position = table.schema.get_field_index(column)
        kind = table.schema.field(position).type
        table = table.set_column(position, table.schema.field(position), pa.array(array, kind))
    return table


def write_video_file(
    plan: EditPlan, video_key: str, chunk: int, file: int, output: Path, report: Path
) -> dict:
    """Write the output video file of ``video_key`` ``chunk``/``file`` to ``output`` by stream
    copy (or by re-encoding where a cut falls inside a GOP), prove it, and write the proof and
    where each episode landed to ``report``.

    A file that keeps every episode of its input file is that file, linked. Otherwise each
    kept episode's packets (those whose pts lie in its ``[from_timestamp, to_timestamp)`` of
    the input file) are copied, shifted to follow the previous episode's end, so episode
    ``k`` starts at the sum of the kept episodes' durations before it, in ticks. A cut must
    start at a keyframe: every episode of an mp4 made by robopipe's conversion or by
    lerobot 0.6.1 does (each episode was encoded on its own and starts with a keyframe). Then
    the output's packets are digested per episode and compared with the input's: equal bytes,
    pts, dts and keyframe flags, so every kept frame decodes bit for bit as the input's.
    Where a kept episode starts inside a GOP and the episode before it in the input is not
    right before it in the output, the file is re-encoded instead
    (:mod:`robopipe.edits.reencode`, the same timestamps), and its proof is each episode's
    pts, a keyframe at each episode start and the frames' fidelity.

    Returns (and writes to ``report``): ``{"file", "video_key", "source", "linked",
    "reencoded" (1 for a re-encoded file, else 0), "packets", "episodes":
    [{"episode_index", "from_timestamp", "to_timestamp"}]}`` (seconds in the output file);
    a re-encoded file's also has ``"reencoded_for"`` (the output episodes that start inside
    a GOP) and ``"fidelity"`` (:func:`robopipe.edits.reencode.reencode_file`'s).

    Raises:
        DatasetError: the input is not a plain mp4 (no packet index), an episode's packets
            do not match its length, a re-encode is needed for a codec it does not cover, or
            the output's packets differ from the input's (re-encoded: its timestamps).
    """
    f = plan.video_file(video_key, chunk, file)
    source = Path(plan.sources[f.source]) / f.path
    name = plan.source_names[f.source]
    meta = read_meta(plan.sources[f.source], name=name)
    rows = plan.episodes["source_episode"][f.first : f.stop]
    froms = meta.episodes[f"videos/{video_key}/from_timestamp"][rows]
    tos = meta.episodes[f"videos/{video_key}/to_timestamp"][rows]
    episodes = [int(i) for i in range(f.first, f.stop)]
    extra: dict = {}
    if f.whole:
        with atomic_path(output) as tmp:
            link_or_copy(source, tmp)
        landed = [
            {"episode_index": i, "from_timestamp": float(a), "to_timestamp": float(b)}
            for i, a, b in zip(episodes, froms, tos, strict=True)
        ]
        packets = None
    else:
        track = plain_track(source)
        if track is None:
            raise DatasetError(name, "not a plain mp4 (no packet index to cut it by)", file=source)
        by_pts = np.argsort(track.pts, kind="stable")  # once: each episode a binary search
        in_pts_order = (by_pts, track.pts[by_pts])
        runs = [
            _episode_packets(name, source, track, in_pts_order, int(row), a, b, int(length))
            for row, a, b, length in zip(
                rows, froms, tos, plan.episodes["length"][f.first : f.stop], strict=True
            )
        ]
        offsets = _landing_ticks(runs)
        landed = [
            {
                "episode_index": episode,
                "from_timestamp": float(Fraction(start, track.timescale)),
                "to_timestamp": float(Fraction(start + run[3] - run[2], track.timescale)),
            }
            for episode, run, start in zip(episodes, runs, offsets, strict=True)
        ]
        inside = cuts_inside_a_gop(track, [run[:2] for run in runs])
        if inside:
            extra = _reencode(plan.dataset, source, track, runs, offsets, output, episodes)
            extra["reencoded_for"] = [episodes[k] for k in inside]
        else:
            _copy(plan.dataset, source, track, runs, offsets, output, episodes)
        packets = sum(run[1] - run[0] for run in runs)
    result = {
        "file": video_path(video_key, chunk, file),
        "video_key": video_key,
        "source": str(source),
        "linked": f.whole,
        "reencoded": int(bool(extra)),
        "packets": packets,
        "episodes": landed,
        **extra,
    }
    write_json(report, result, indent=None)
    return result


def _episode_packets(
    name: str,
    source: Path,
    track: Track,
    in_pts_order: tuple[np.ndarray, np.ndarray],
    episode: int,
    start_s: float,
    stop_s: float,
    length: int,
) -> tuple[int, int, int, int]:
    """(first, stop, from_ticks, to_ticks): the packets of one input episode, in decode
    order, and its span in the input file (``from_timestamp``, ``to_timestamp``) in ticks.
    ``in_pts_order``: the packets' indices in pts order (a stable ``argsort``) and their pts,
    so that finding an episode's packets costs a binary search, not a pass over every packet
    of the file (18,000 such passes of 860,000 packets took 31 s)."""
    lo = round(Fraction(float(start_s)) * track.timescale)
    hi = round(Fraction(float(stop_s)) * track.timescale)
    by_pts, pts = in_pts_order
    a, b = np.searchsorted(pts, [lo, hi])
    inside = np.sort(by_pts[a:b])
    if len(inside) != length or (len(inside) and inside[-1] - inside[0] + 1 != length):
        raise DatasetError(
            name,
            f"{len(inside)} packets between {start_s} s and {stop_s} s but {length} rows",
            episode=episode,
            file=source,
        )
    first = int(inside[0])
    return first, first + length, lo, hi


def _landing_ticks(runs) -> list[int]:
    """Where each kept episode starts in the output, in ticks: where the previous one ends
    (each keeps its span in the input, ``to_ticks - from_ticks``)."""
    spans = [to_ticks - from_ticks for _, _, from_ticks, to_ticks in runs]
    return np.concatenate([[0], np.cumsum(spans[:-1], dtype=np.int64)]).tolist()


class av_open:  # noqa: N801 (a context manager used like open)
    """``with av_open(path) as (container, stream)``: an mp4 open in PyAV, its video stream."""

    def __init__(self, path: Path) -> None:
        import av

        self.container = av.open(str(path), format=MP4)

    def __enter__(self):
        return self.container, self.container.streams.video[0]

    def __exit__(self, *exc) -> None:
        self.container.close()


def _copy(name, source: Path, track: Track, runs, offsets, output: Path, episodes) -> None:
    """Copy the runs into ``output`` (:func:`_cut`), then compare its packets with the
    input's, episode by episode."""
    expected = _cut(source, track, runs, offsets, output)
    with av_open(output) as (container, stream):
        lengths = [(run[1] - run[0], offset) for run, offset in zip(runs, offsets, strict=True)]
        digests = list(run_digests(output, container, stream, lengths))
    if digests[-1].packets:
        raise DatasetError(name, "packets after the last episode", file=output)
    for episode, want, got in zip(episodes, expected, digests, strict=False):
        if got.as_dict() != want.as_dict():
            raise DatasetError(name, "packets differ from the input's", episode=episode,
                               file=output)  # fmt: skip


def _cut(source: Path, track: Track, runs, offsets, output: Path) -> list[PacketDigest]:
    """Mux the packet runs of ``source`` into ``output``, each starting at its offset (in
    ticks); return the input's digests of each run."""
    import av

    digests = []
    with (
        av_open(source) as (_, template),
        atomic_path(output) as tmp,
        open(source, "rb") as data_file,
        av.open(str(tmp), "w", format="mp4", options={"movflags": "faststart"}) as out,
    ):
        stream = out.add_stream_from_template(template, opaque=True)
        stream.time_base = template.time_base
        for (first, stop, from_ticks, _), offset in zip(runs, offsets, strict=True):
            at = int(track.offsets[first:stop].min())
            data_file.seek(at)
            ends = track.offsets[first:stop] + track.sizes[first:stop]
            data = memoryview(data_file.read(int(ends.max()) - at))
            digest = PacketDigest()
            digest.add_track(data, track, first, stop, at=at, offset=from_ticks)
            digests.append(digest)
            shift = offset - from_ticks
            for p in range(first, stop):
                pos = int(track.offsets[p]) - at
                packet = av.Packet(data[pos : pos + int(track.sizes[p])])
                packet.pts = int(track.pts[p]) + shift
                packet.dts = int(track.dts[p]) + shift
                packet.duration = int(track.durations[p])
                packet.is_keyframe = bool(track.keyframes[p])
                packet.time_base = template.time_base
                packet.stream = stream
                out.mux_one(packet)
    return digests


def _reencode(name, source: Path, track: Track, runs, offsets, output: Path, episodes) -> dict:
    """Re-encode the kept episodes into ``output`` (:func:`robopipe.edits.reencode.
    reencode_file`), then check its track: each episode's frames at the input's pts shifted
    to its offset, its first frame a keyframe. Returns the fidelity summary."""
    spans = [(lo, hi, offset - lo) for (_, _, lo, hi), offset in zip(runs, offsets, strict=True)]
    fidelity = reencode_file(name, source, track, spans, output)
    got = plain_track(output)
    if got is None:
        raise DatasetError(name, "the re-encoded file has no packet index", file=output)
    order = np.argsort(got.pts, kind="stable")
    pts, keyframes = got.pts[order], got.keyframes[order]
    expected = [track.pts[first:stop] for first, stop, _, _ in runs]
    at = 0
    for episode, want, (_, _, shift) in zip(episodes, expected, spans, strict=True):
        want = np.sort(want) + shift
        if not np.array_equal(pts[at : at + len(want)], want) or not keyframes[at]:
            raise DatasetError(name, "re-encoded frames at other timestamps than the input's "
                               "(or no keyframe first)", episode=episode, file=output)  # fmt: skip
        at += len(want)
    if at != len(pts):
        raise DatasetError(name, "frames after the last episode", file=output)
    return {"fidelity": fidelity}

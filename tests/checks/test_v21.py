"""Fault injection: each fault, put into a copy of cr5 (4 episodes) or of the demo, is found
by the source check, which names its kind, episode and file; the conversion then publishes
nothing and leaves the source as it was."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
from pathlib import Path

import av
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import robopipe.mp4
from robopipe.checks.report import SourceCheckError
from robopipe.checks.v21 import check_source
from robopipe.conversion.serial import convert_dataset
from robopipe.formats.v21_reader import V21Source
from robopipe.options import ConversionOptions
from robopipe.remux import concat_videos
from robopipe.retry import RemoteReadError

EP = 1  # the damaged episode
OPTIONS = {"restamp_timestamps": True}  # cr5's timestamps are off; the demo's are exact


def _info(root: Path) -> dict:
    return json.loads((root / "meta/info.json").read_text())


def _edit_info(root: Path, change) -> None:
    info = _info(root)
    change(info)
    (root / "meta/info.json").write_text(json.dumps(info, indent=4))


def _data(root: Path, ep: int = EP) -> str:
    return _info(root)["data_path"].format(episode_chunk=0, episode_index=ep)


def _camera(root: Path) -> str:
    return sorted(k for k, f in _info(root)["features"].items() if f["dtype"] == "video")[0]


def _video(root: Path, ep: int = EP) -> str:
    info = _info(root)
    return info["video_path"].format(episode_chunk=0, episode_index=ep, video_key=_camera(root))


def _episode_lines(root: Path) -> list[dict]:
    return [json.loads(line) for line in (root / "meta/episodes.jsonl").read_text().splitlines()]


def _write_episode_lines(root: Path, lines: list[dict]) -> None:
    (root / "meta/episodes.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))


def _edit_table(root: Path, change, ep: int = EP) -> None:
    path = root / _data(root, ep)
    pq.write_table(change(pq.read_table(path)), path)


def _reencode(root: Path, *, codec="libsvtav1", pix_fmt="yuv420p", scale=1) -> None:
    """Episode EP's first camera re-encoded: same frames, another codec, pixel format or size."""
    path = root / _video(root)
    frames = []
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        rate = stream.average_rate
        for frame in container.decode(stream):
            frames.append(frame.to_ndarray(format="rgb24"))
    height, width = frames[0].shape[0] // scale, frames[0].shape[1] // scale
    with av.open(str(path), "w") as out:
        stream = out.add_stream(codec, rate=rate)
        stream.width, stream.height, stream.pix_fmt = width, height, pix_fmt
        if codec == "libsvtav1":
            stream.options = {"preset": "12"}
        for array in frames:
            frame = av.VideoFrame.from_ndarray(array, format="rgb24").reformat(width, height)
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)


def _remux(root: Path, *, tick: int = 1) -> None:
    """Episode EP's first camera remuxed with every timestamp doubled: half the frame rate, or
    with ``tick=2``, the same frame times in a time base twice as fine."""
    path = root / _video(root)
    tmp = path.with_suffix(".tmp.mp4")
    with av.open(str(path)) as inp, av.open(str(tmp), "w", format="mp4") as out:
        stream = inp.streams.video[0]
        copy = out.add_stream_from_template(stream, opaque=True)
        copy.time_base = stream.time_base / tick
        for packet in inp.demux(stream):
            if packet.dts is None:
                continue
            packet.pts, packet.dts, packet.stream = packet.pts * 2, packet.dts * 2, copy
            out.mux(packet)
    tmp.replace(path)


def _swap_video(root: Path) -> None:
    lengths = {e["episode_index"]: e["length"] for e in _episode_lines(root)}
    other = next(ep for ep, n in lengths.items() if n != lengths[EP])
    shutil.copyfile(root / _video(root, other), root / _video(root))


def _drop_column(name: str):
    return lambda root: _edit_table(root, lambda t: t.drop_columns([name]))


def _undeclared_column(root: Path) -> None:
    _edit_table(root, lambda t: t.append_column("next.reward", pa.array([0.0] * t.num_rows)))


def _set_int_column(name: str, value: int):
    """Episode EP's ``name`` column set to ``value`` in its last row."""

    def change(table):
        values = table.column(name).to_pylist()
        values[-1] = value
        column = pa.array(values, table.schema.field(name).type)
        return table.set_column(table.schema.get_field_index(name), name, column)

    return lambda root: _edit_table(root, change)


def _float64_state(root: Path) -> None:
    def change(table):
        state = table.column("observation.state").combine_chunks()
        values = pc.cast(state.flatten(), pa.float64())
        column = pa.FixedSizeListArray.from_arrays(values, state.type.list_size)
        return table.set_column(
            table.schema.get_field_index("observation.state"), "observation.state", column
        )

    _edit_table(root, change)


def _shift_timestamps(root: Path) -> None:
    def change(table):
        ts = pc.add(table.column("timestamp"), pa.scalar(0.5, table.schema.field("timestamp").type))
        return table.set_column(table.schema.get_field_index("timestamp"), "timestamp", ts)

    _edit_table(root, change)


def _duplicate_line(root: Path) -> None:
    lines = _episode_lines(root)
    _write_episode_lines(root, [*lines, lines[EP]])


def _remove_line(root: Path) -> None:
    _write_episode_lines(root, [e for e in _episode_lines(root) if e["episode_index"] != 2])


def _out_of_range(root: Path) -> None:
    lines = _episode_lines(root)
    lines[3]["episode_index"] = 9
    _write_episode_lines(root, lines)


def _longer_length(root: Path) -> None:
    lines = _episode_lines(root)
    lines[EP]["length"] += 1
    _write_episode_lines(root, lines)


def _escape_template(root: Path) -> None:
    outside = root.parent / "outside"
    for ep in range(4):
        rel = _video(root, ep)
        (outside / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / rel, outside / rel)
    _edit_info(root, lambda i: i.update(video_path="../outside/" + i["video_path"]))


def _symlink_outside(root: Path) -> None:
    target = root.parent / "elsewhere.mp4"
    shutil.move(root / _video(root), target)
    os.symlink(target, root / _video(root))


def _state_shape(root: Path) -> None:
    def change(info):
        feature = info["features"]["observation.state"]
        feature["shape"] = [feature["shape"][0] + 1]

    _edit_info(root, change)


def _rename_placeholder(root: Path) -> None:
    _edit_info(
        root, lambda i: i.update(data_path=i["data_path"].replace("episode_chunk", "chunk_index"))
    )


def _truncate(rel_of, keep: float = 0.5):
    def damage(root: Path) -> None:
        path = root / rel_of(root)
        path.write_bytes(path.read_bytes()[: int(path.stat().st_size * keep)])

    return damage


def _faststart_then_truncate(rel_of, keep: float):
    def damage(root: Path) -> None:
        path = root / rel_of(root)
        moved = path.with_suffix(".faststart.mp4")
        concat_videos([path], moved)  # one input: a remux with the index at the front
        moved.replace(path)
        _truncate(rel_of, keep)(root)

    return damage


def _replace(rel_of, content: bytes):
    return lambda root: (root / rel_of(root)).write_bytes(content)


def _remove(rel_of):
    return lambda root: (root / rel_of(root)).unlink()


INFO = "meta/info.json"
EPISODES = "meta/episodes.jsonl"

# fault -> (damage, kind, episode, file (a function of the root, or a path), message regex)
FAULTS = {
    "missing mp4": (_remove(_video), "missing_file", EP, _video, "video file is missing"),
    "missing parquet": (_remove(_data), "missing_file", EP, _data, "data file is missing"),
    "empty mp4": (_replace(_video, b""), "empty_file", EP, _video, "video file is empty"),
    "corrupt parquet": (
        _replace(_data, b"PAR1 not a parquet PAR1"),
        "unreadable_file",
        EP,
        _data,
        "unreadable parquet",
    ),
    "truncated parquet": (_truncate(_data), "unreadable_file", EP, _data, "unreadable parquet"),
    "truncated mp4": (
        _truncate(_video),
        "unreadable_file|truncated_file",
        EP,
        _video,
        "cannot read video|truncated",
    ),
    # remuxed with its index at the front (+faststart), then cut: only its last packets go
    "faststart mp4 cut at 90%": (
        _faststart_then_truncate(_video, keep=0.9),
        "truncated_file",
        EP,
        _video,
        r"truncated: its frames are intact up to \d+\.\d+ s of",
    ),
    "smaller video": (
        lambda root: _reencode(root, scale=2),
        "video_size",
        EP,
        _video,
        r"video width is \d+ but info.json says \d+",
    ),
    "other codec": (
        lambda root: _reencode(root, codec="libx264"),
        "video_codec",
        EP,
        _video,
        "video codec is h264 but info.json says av1",
    ),
    "other pixel format": (
        lambda root: _reencode(root, codec="libx264", pix_fmt="yuv444p"),
        "video_pix_fmt",
        EP,
        _video,
        "video pix_fmt is yuv444p but info.json says yuv420p",
    ),
    "other frame rate": (_remux, "video_fps", EP, _video, "video fps is"),
    "other time base": (
        lambda root: _remux(root, tick=2),
        "video_time_base",
        EP,
        _video,
        "video time_base is 1/\\d+ but 3 other episodes of .* have 1/\\d+",
    ),
    "mp4 frames differ from rows": (
        _swap_video,
        "frame_count",
        EP,
        _video,
        r"\d+ frames in the mp4 but \d+ rows in the parquet",
    ),
    "parquet rows differ from length": (
        _longer_length,
        "frame_count",
        EP,
        _data,
        r"parquet has \d+ rows but episodes.jsonl says length=\d+",
    ),
    "duplicate episodes.jsonl line": (
        _duplicate_line,
        "episode_index",
        EP,
        EPISODES,
        f"episode {EP} is listed 2 times",
    ),
    "missing episode": (_remove_line, "episode_index", 2, EPISODES, "episode 2 is not listed"),
    "out-of-range episode": (
        _out_of_range,
        "episode_index",
        9,
        EPISODES,
        "episode 9 is out of range: info.json says total_episodes=4",
    ),
    "missing frame_index": (
        _drop_column("frame_index"),
        "columns",
        EP,
        _data,
        "column 'frame_index' is missing",
    ),
    "missing index": (
        _drop_column("index"),
        "columns",
        EP,
        _data,
        "column 'index' is missing; set `derive_missing_columns: true`",
    ),
    "undeclared column": (
        _undeclared_column,
        "undeclared_column",
        EP,
        _data,
        "the parquet holds a column 'next.reward' that info.json's features do not declare.*"
        "set `undeclared_columns: drop`",
    ),
    "task_index without a task": (
        _set_int_column("task_index", 99),
        "task_index",
        EP,
        _data,
        r"task_index \[99\] has no task in meta/tasks.jsonl \(\d task\(s\)\)",
    ),
    "frame_index not counting": (
        _set_int_column("frame_index", 0),
        "frame_index",
        EP,
        _data,
        re.escape("frame_index does not count 0..length-1"),
    ),
    "index not counting on": (
        _set_int_column("index", 0),
        "index",
        EP,
        _data,
        r"index does not count \d+\.\.\d+, the frames after those of the episodes before it",
    ),
    "rows of another episode": (
        _set_int_column("episode_index", 3),
        "episode_index",
        EP,
        _data,
        re.escape("the parquet holds rows of episode(s) [3]; every row of an episode's file"),
    ),
    "float64 vectors": (
        _float64_state,
        "float64",
        EP,
        _data,
        "'observation.state' is float64 .*`cast_float64: true`",
    ),
    "declared shape differs": (
        _state_shape,
        "feature_shape",
        0,
        lambda root: _data(root, 0),
        "holds vectors of \\d+ but info.json declares shape",
    ),
    "unknown template placeholder": (
        _rename_placeholder,
        "template",
        None,
        INFO,
        r"unknown placeholder\(s\) \{chunk_index\}; set `template_placeholders: true`",
    ),
    "template escapes the root": (
        _escape_template,
        "outside_root",
        0,
        lambda root: _video(root, 0),
        "outside the dataset folder",
    ),
    "symlink out of the root": (
        _symlink_outside,
        "outside_root",
        EP,
        _video,
        "outside the dataset folder",
    ),
    "missing episodes_stats.jsonl": (
        _remove(lambda root: "meta/episodes_stats.jsonl"),
        "stats",
        None,
        "meta/episodes_stats.jsonl",
        "file is missing; set `compute_missing_stats: true`",
    ),
    "already v3.0": (
        lambda root: _edit_info(root, lambda i: i.update(codebase_version="v3.0")),
        "version",
        None,
        INFO,
        "already LeRobot v3.0, there is nothing to convert",
    ),
    "unknown codebase_version": (
        lambda root: _edit_info(root, lambda i: i.update(codebase_version="v1.6")),
        "version",
        None,
        INFO,
        "unknown codebase_version 'v1.6'",
    ),
    "info.json lacks fields": (
        lambda root: _edit_info(root, lambda i: i.pop("total_videos")),
        "info_fields",
        None,
        INFO,
        "lacks required field.*total_videos",
    ),
    "missing info.json": (_remove(lambda root: INFO), "metadata", None, INFO, "file is missing"),
}


def _resolve(file, root):
    return file(root) if callable(file) else file


@pytest.mark.parametrize("fault", list(FAULTS))
def test_fault_is_found_and_nothing_published(fault, small_source, tmp_path, file_tree):
    damage, kind, episode, file, message = FAULTS[fault]
    root = small_source
    damage(root)
    rel = _resolve(file, root)
    report = check_source(root, "broken", ConversionOptions(**OPTIONS))
    found = [p for p in report.problems if re.fullmatch(kind, p.kind)]
    assert found, report.summary()
    problem = found[0]
    assert (problem.episode, problem.file) == (episode, rel), report.summary()
    assert re.search(message, problem.message), problem.message
    line = problem.line("broken")
    assert line.startswith("robopipe: dataset 'broken': ")
    assert f"file {rel}: " in line and (episode is None or f"episode {episode}: " in line)

    before = file_tree(root)
    out = tmp_path / "v3.0"
    with pytest.raises(SourceCheckError) as caught:
        convert_dataset(root, out, name="broken", **OPTIONS)
    assert caught.value.report.to_json()["problems"] == report.to_json()["problems"]
    assert not out.exists()
    assert file_tree(root) == before


VIDEO_FAULTS = [f for f, (_, _, _, file, _) in FAULTS.items() if file is _video]


@pytest.mark.parametrize("fault", VIDEO_FAULTS)
def test_mp4_indexes_give_pyavs_report(fault, small_source, monkeypatch):
    """The check reads an mp4's facts from its index where an earlier mp4 of the same sample
    entry was opened with PyAV: the report is the one PyAV alone gives, for every video fault."""
    FAULTS[fault][0](small_source)
    opened = []
    real_open = av.open
    monkeypatch.setattr(av, "open", lambda *a, **k: opened.append(a[0]) or real_open(*a, **k))
    fast = check_source(small_source, "x", ConversionOptions(**OPTIONS), threads=1).to_json()
    mp4s = list(small_source.glob("videos/**/*.mp4"))
    # PyAV opened each camera's first mp4 and at most the damaged one
    assert len(opened) <= len({p.parent for p in mp4s}) + 1 < len(mp4s)
    monkeypatch.setattr(robopipe.mp4, "plain_track", lambda path: None)
    slow = check_source(small_source, "x", ConversionOptions(**OPTIONS), threads=1).to_json()
    assert fast["problems"] and fast == slow


def test_off_timestamps_name_the_fix(small_source):
    if _info(small_source)["fps"] == 30:  # the demo's timestamps are exact: shift one episode's
        _shift_timestamps(small_source)
    report = check_source(small_source, "ts", ConversionOptions())
    problem = next(p for p in report.problems if p.kind == "timestamps")
    assert problem.file.startswith("data/") and problem.episode is not None
    assert "set `restamp_timestamps: true`" in problem.message


def test_five_faults_are_reported_in_one_run(small_source, tmp_path):
    root = small_source
    _remove(lambda r: _video(r, 0))(root)
    _replace(lambda r: _data(r, 1), b"junk")(root)
    lengths = {e["episode_index"]: e["length"] for e in _episode_lines(root)}
    other = next(ep for ep in (3, 1) if lengths[ep] != lengths[2])
    shutil.copyfile(root / _video(root, other), root / _video(root, 2))
    _edit_table(root, lambda t: t.drop_columns(["frame_index"]), ep=3)
    lines = _episode_lines(root)
    _write_episode_lines(root, [*lines, lines[3]])
    report = check_source(root, "five", ConversionOptions(**OPTIONS))
    got = {(p.kind, p.episode) for p in report.problems}
    assert {
        ("missing_file", 0),
        ("unreadable_file", 1),
        ("frame_count", 2),
        ("columns", 3),
        ("episode_index", 3),
    } <= got, report.summary()
    summary = report.summary()
    for kind in ("missing_file", "unreadable_file", "frame_count", "columns", "episode_index"):
        assert f"problem {kind}: " in summary
    with pytest.raises(SourceCheckError):
        convert_dataset(root, tmp_path / "v3.0", name="five", **OPTIONS)
    assert not (tmp_path / "v3.0").exists()


def test_stray_files_are_notes(small_source, tmp_path):
    (small_source / ".DS_Store").write_bytes(b"\0")
    (small_source / "extra").mkdir()
    (small_source / "extra" / "notes.txt").write_text("x")
    report = check_source(small_source, "stray", ConversionOptions(**OPTIONS))
    assert report.ok, report.summary()
    stray = {n.file for n in report.notes if n.kind == "stray_file"}
    assert {".DS_Store", "extra/notes.txt"} <= stray
    convert_dataset(small_source, tmp_path / "v3.0", name="stray", **OPTIONS)
    assert not (tmp_path / "v3.0" / ".DS_Store").exists()


def test_changes_since_the_last_check_are_notes(small_source):
    options = ConversionOptions(**OPTIONS)
    first = check_source(small_source, "x", options).to_json()
    _float64_state(small_source)  # rewrites episode 1's parquet
    (small_source / _video(small_source, 2)).unlink()
    report = check_source(small_source, "x", options, previous=first)
    notes = {(n.kind, n.file) for n in report.notes}
    assert ("source_changed", _data(small_source)) in notes
    assert ("source_removed", _video(small_source, 2)) in notes


def test_problems_of_skipped_episodes_are_notes(small_source, tmp_path):
    _reencode(small_source, scale=2)  # episode EP: another size
    _remove(lambda root: _video(root, 2))(small_source)
    options = {**OPTIONS, "skip_episodes": (EP, 2)}
    report = check_source(small_source, "skip", ConversionOptions(**options))
    assert report.ok, report.summary()
    assert {(n.kind, n.episode) for n in report.notes} >= {("video_size", EP), ("missing_file", 2)}
    plan = convert_dataset(small_source, tmp_path / "v3.0", name="skip", **options)
    assert [e.source_episode_index for e in plan.episodes] == [0, 3]


def test_channel_first_shapes_are_understood(small_source):
    def channel_first(info):
        for feature in info["features"].values():
            if feature["dtype"] == "video":
                height, width, channels = feature["shape"]
                feature["shape"] = [channels, height, width]
                feature["names"] = ["channels", "height", "width"]
                feature.pop("info", None)  # only the shape says the size

    _edit_info(small_source, channel_first)
    assert check_source(small_source, "cf", ConversionOptions(**OPTIONS)).ok
    _reencode(small_source, scale=2)
    report = check_source(small_source, "cf", ConversionOptions(**OPTIONS))
    assert {(p.kind, p.episode) for p in report.problems} == {("video_size", EP)}


class _GivingUp(io.RawIOBase):
    """A remote file whose every read gave up (as ``robopipe.retry`` raises it)."""

    def __init__(self, path: Path) -> None:
        self.url = f"http://127.0.0.1:1/src/{path.name}"
        self.size, self.position = path.stat().st_size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        self.position = offset + (0, self.position, self.size)[whence]
        return self.position

    def tell(self) -> int:
        return self.position

    def readinto(self, buffer) -> int:
        raise RemoteReadError(f"{self.url}: gave up after 1 attempts in 0.0 s: ClientError: 503")


@pytest.mark.parametrize("suffix", [".parquet", ".mp4"])
def test_a_read_that_gives_up_stops_the_check_not_a_problem(demo_small, monkeypatch, suffix):
    readable = V21Source.readable

    def gives_up(source, path):
        return _GivingUp(path) if str(path).endswith(suffix) else readable(source, path)

    monkeypatch.setattr(V21Source, "readable", gives_up)
    with pytest.raises(RemoteReadError, match=rf"^http://127\.0\.0\.1:1/src/\S+\{suffix}: gave up"):
        check_source(demo_small, "demo", ConversionOptions(**OPTIONS), threads=1)

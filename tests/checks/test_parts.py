"""The source check in parts (rule source_check_part): part jobs over ranges of episode
indices, merged with the metadata's checks, give the report of one whole check, byte for
byte; the merge holds no table of every file (files are read back from the parts, the earlier
report's files are compared as hashes)."""

from __future__ import annotations

import json
import os
import shutil

from robopipe.checks.parts import read_part, write_files, write_part
from robopipe.checks.report import write_report
from robopipe.checks.streams import StreamRuns
from robopipe.checks.v21 import check_part, check_source, merge_parts
from robopipe.formats.v21_reader import load_source
from robopipe.options import ConversionOptions


def _faulty(make_v21, tmp_path):
    """6 episodes: a camera's mp4 of episode 1 missing, episode 3's parquet junk, a stray
    file."""
    root = tmp_path / "src"
    shutil.copytree(make_v21(episodes=6), root)
    source = load_source(root, "ds")
    source.video_file(1, source.video_keys[0]).unlink()
    source.data_file(3).write_bytes(b"junk")
    (root / ".DS_Store").write_bytes(b"\0")
    return root, source


def _merged(root, options, ranges, tmp_path, previous=None):
    paths = []
    for i, (first, stop) in enumerate(ranges):
        paths.append(tmp_path / f"part-{i:03d}.json")
        write_part(check_part(root, "ds", options, first=first, stop=stop), paths[-1])
    return merge_parts(
        root, "ds", options, lambda: (read_part(p) for p in paths), previous=previous
    )


def _written(report, folder):
    folder.mkdir()
    write_report(report, folder / "check.json")
    write_files(report, folder / "check_files.json")
    return [(folder / name).read_bytes() for name in ("check.json", "check_files.json")]


def test_parts_merge_into_the_one_report(make_v21, tmp_path):
    root, _ = _faulty(make_v21, tmp_path)
    for options in (ConversionOptions(), ConversionOptions(skip_episodes=(3,))):
        whole = check_source(root, "ds", options)
        merged = _merged(root, options, [(0, 2), (2, 4), (4, None)], tmp_path)
        assert not merged.ok  # episode 1's missing mp4
        assert merged.summary() == whole.summary()
        tag = len(options.skip_episodes)
        assert _written(merged, tmp_path / f"m{tag}") == _written(whole, tmp_path / f"w{tag}")
    assert {(p.kind, p.episode) for p in whole.notes} >= {("unreadable_file", 3)}
    assert ".DS_Store" in {p.file for p in whole.notes if p.kind == "stray_file"}
    assert {(p.kind, p.episode) for p in whole.problems} == {("missing_file", 1)}


def test_changes_are_read_from_the_earlier_files_file(make_v21, tmp_path):
    root, source = _faulty(make_v21, tmp_path)
    options = ConversionOptions()
    moved = source.video_file(5, source.video_keys[1])
    os.rename(moved, tmp_path / "kept.mp4")
    first = check_source(root, "ds", options)
    write_files(first, tmp_path / "check_files.json")
    os.rename(tmp_path / "kept.mp4", moved)  # appears
    os.utime(source.data_file(2), ns=(1, 1))  # changes
    source.video_file(4, source.video_keys[0]).unlink()  # disappears
    merged = _merged(root, options, [(0, 3), (3, None)], tmp_path, tmp_path / "check_files.json")
    whole = check_source(root, "ds", options, previous=first.to_json())
    changes = [(n.kind, n.file) for n in merged.notes if n.kind.startswith("source_")]
    assert changes == [(n.kind, n.file) for n in whole.notes if n.kind.startswith("source_")]
    rel = os.path.relpath
    assert sorted(changes, key=lambda c: c[1]) == changes
    assert set(changes) == {
        ("source_changed", rel(source.data_file(2), root)),
        ("source_added", rel(moved, root)),
        ("source_removed", rel(source.video_file(4, source.video_keys[0]), root)),
    }
    assert json.loads((tmp_path / "check_files.json").read_text())["files"] == first.files


def test_stream_runs_find_the_odd_episode_across_parts(make_v21):
    source = load_source(make_v21(episodes=6), "ds")
    key = source.video_keys[0]
    usual = ("h264", 48, 32, "yuv420p", "1/15360")
    odd = (*usual[:4], "1/90000")
    parts = []
    for episodes in ((0, 1, 2), (3, 4, 5)):
        runs = StreamRuns(source.video_keys)
        for episode in episodes:
            runs.add(key, episode, odd if episode == 4 else usual)
        parts.append(runs.to_json())
    assert parts[0][key] == [[list(usual), [[0, 3]]]]  # a run, not an entry per episode
    merged = StreamRuns(source.video_keys)
    for part in parts:
        merged.update(part)
    assert merged.runs[key] == {usual: [[0, 4], [5, 6]], odd: [[4, 5]]}
    problems = [p for p in merged.problems(source) if p.kind == "video_time_base"]
    assert [(p.episode, p.file) for p in problems] == [
        (4, os.path.relpath(source.video_file(4, key), source.root))
    ]
    assert problems[0].message.startswith(
        f"video time_base is 1/90000 but 5 other episodes of {key} have 1/15360;"
    )


def test_a_missing_episodes_file_is_named_by_the_merge(make_v21, tmp_path):
    root = tmp_path / "src"
    shutil.copytree(make_v21(episodes=6), root)
    (root / "meta/episodes.jsonl").unlink()
    part = check_part(root, "ds", first=0, stop=3)
    assert part.problems == [] and part.files == {}
    report = merge_parts(root, "ds", None, lambda: [part])
    assert [(p.kind, p.file) for p in report.problems] == [("metadata", "meta/episodes.jsonl")]

"""``robopipe-repeat`` (robopipe.formats.v21_repeat): a v2.1 dataset's episodes repeated."""

from __future__ import annotations

import json

import pyarrow.parquet as pq

from robopipe.formats.v21_reader import load_source
from robopipe.formats.v21_repeat import main, make_repeated


def _jsonl(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_two_episodes_three_times_are_six_renumbered_episodes(make_v21, tmp_path):
    source = make_v21(episodes=3, min_length=10, max_length=16)
    dest = make_repeated(source, tmp_path / "x3", times=3, episodes=2, link=True)
    info = json.loads((dest / "meta/info.json").read_text())
    lengths = [e["length"] for e in _jsonl(source / "meta/episodes.jsonl")][:2]
    assert info["total_episodes"] == 6 and info["total_frames"] == 3 * sum(lengths)
    assert info["total_videos"] == 6 * 2 and info["splits"] == {"train": "0:6"}
    episodes = _jsonl(dest / "meta/episodes.jsonl")
    assert [e["episode_index"] for e in episodes] == list(range(6))
    assert [e["length"] for e in episodes] == lengths * 3
    start = 0
    for episode, stats in enumerate(_jsonl(dest / "meta/episodes_stats.jsonl")):
        table = pq.read_table(dest / f"data/chunk-000/episode_{episode:06d}.parquet")
        index = table["index"].to_pylist()
        assert index == list(range(start, start + table.num_rows))
        assert set(table["episode_index"].to_pylist()) == {episode}
        assert stats["stats"]["index"]["min"] == [start]
        assert stats["stats"]["episode_index"]["max"] == [episode]
        start += table.num_rows
    mp4 = "videos/chunk-000/observation.images.front/episode_{:06d}.mp4"
    assert (dest / mp4.format(5)).stat().st_ino == (source / mp4.format(1)).stat().st_ino
    assert len(load_source(dest, "x3").episodes) == 6


def test_the_command_copies_the_first_episodes(make_v21, tmp_path):
    source = make_v21(episodes=3, min_length=10, max_length=16)
    main([str(source), str(tmp_path / "one"), "--episodes", "1"])
    mp4 = "videos/chunk-000/observation.images.front/episode_000000.mp4"
    copied = tmp_path / "one" / mp4
    assert copied.read_bytes() == (source / mp4).read_bytes()
    assert copied.stat().st_ino != (source / mp4).stat().st_ino
    assert json.loads((tmp_path / "one/meta/info.json").read_text())["total_episodes"] == 1

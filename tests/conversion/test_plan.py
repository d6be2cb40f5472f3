"""The plan: lerobot 0.6.1's file assignment and the shards."""

import json
import math
import os
import random
import shutil

import pytest

from robopipe.conversion.plan import (
    EPISODE_WORK_MB,
    Plan,
    PlannedEpisode,
    assign_files,
    load_plan,
    make_plan,
    make_shards,
    reuse_plan,
    save_parse_time_plan,
    source_signature,
)
from robopipe.errors import DatasetError
from robopipe.formats.v21_reader import load_source
from robopipe.layout import next_chunk_file
from robopipe.options import ConversionOptions


def test_rollover_checks_before_adding():
    # 0.4 + 0.4 + 0.4 >= 1.0: the third episode opens file 1 (check before add, lerobot 0.6.1)
    assert assign_files([0.4, 0.4, 0.4, 0.1], 1.0, 1000) == [(0, 0), (0, 0), (0, 1), (0, 1)]


def test_an_episode_larger_than_the_limit_gets_a_file_of_its_own():
    assert assign_files([5.0, 0.1, 5.0], 1.0, 1000) == [(0, 0), (0, 1), (0, 2)]


def test_chunk_directories_hold_chunks_size_files():
    # lerobot verified: chunk size 3 gives c0/f0..f2 then c1/f0..
    indices = [(0, 0)]
    for _ in range(4):
        indices.append(next_chunk_file(*indices[-1], 3))
    assert indices == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]


def _episode(i, data, front, wrist):
    return PlannedEpisode(
        i, i, 1, i, i + 1, tuple(data), {"front": tuple(front), "wrist": tuple(wrist)}
    )


def test_shards_never_straddle_a_data_file_but_may_span_video_files():
    episodes = [
        _episode(0, [0, 0], [0, 0], [0, 0]),
        _episode(1, [0, 0], [0, 0], [0, 0]),
        _episode(2, [0, 0], [0, 1], [0, 0]),
        _episode(3, [0, 1], [0, 1], [0, 0]),
        _episode(4, [0, 1], [0, 1], [0, 1]),
        _episode(5, [0, 1], [0, 1], [0, 1]),
        _episode(6, [0, 1], [0, 1], [0, 1]),
    ]
    shards = make_shards(episodes, episodes_per_shard=2)
    # data files change before episode 3; the cameras' files (2, 4) do not cut shards
    assert [(s.first, s.stop) for s in shards] == [(0, 2), (2, 3), (3, 5), (5, 7)]
    assert [s.id for s in shards][:2] == ["shard-000000", "shard-000001"]


def _one_stream(sizes_mb, data_file_size_in_mb=100.0, chunks_size=1000):
    """Episodes of one frame each, data files by lerobot's rule, no cameras."""
    files = assign_files(sizes_mb, data_file_size_in_mb, chunks_size)
    return [PlannedEpisode(i, i, 1, i, i + 1, f, {}) for i, f in enumerate(files)]


def _old_shards(episodes, episodes_per_shard):
    """The rule before shards were sized by work: a fixed episode count, cut at data files."""
    bounds, first = [], 0
    for ep in episodes[1:]:
        i = ep.episode_index
        if ep.data != episodes[i - 1].data or i - first >= episodes_per_shard:
            bounds.append((first, i))
            first = i
    bounds.append((first, len(episodes)))
    return bounds


def _bounds(shards):
    return [(s.first, s.stop) for s in shards]


def test_many_tiny_episodes_make_few_shards():
    # 20,000 episodes of 4 KB: 80 MiB, one data file; 250 per shard made 80 start-up-bound jobs
    sizes = [4 / 1024] * 20_000
    episodes = _one_stream(sizes)
    assert {e.data for e in episodes} == {(0, 0)}
    options = ConversionOptions()
    shards = make_shards(
        episodes,
        options.episodes_per_shard,
        sizes_mb=sizes,
        shard_size_in_mb=options.shard_size_in_mb,
    )
    per_shard = math.floor(options.shard_size_in_mb / (4 / 1024 + EPISODE_WORK_MB))
    assert len(shards) == math.ceil(20_000 / per_shard) == 6
    assert [s.stop - s.first for s in shards[:-1]] == [per_shard] * 5
    assert len(_old_shards(episodes, 250)) == 80


def test_big_episodes_are_split_by_the_size_target():
    # 30 MiB episodes in 1000 MiB data files: 6 per shard by size (6 x 30.05 <= 200 < 7 x 30.05)
    sizes = [30.0] * 40
    episodes = _one_stream(sizes, data_file_size_in_mb=1000.0)
    shards = make_shards(episodes, 10_000, sizes_mb=sizes, shard_size_in_mb=200.0)
    assert _bounds(shards)[:3] == [(0, 6), (6, 12), (12, 18)]
    # an episode heavier than the target is a shard of its own
    shards = make_shards(episodes[:3], 10_000, sizes_mb=sizes[:3], shard_size_in_mb=10.0)
    assert _bounds(shards) == [(0, 1), (1, 2), (2, 3)]


def test_episodes_per_shard_bounds_shards_the_size_target_would_allow():
    sizes = [0.01] * 10
    shards = make_shards(_one_stream(sizes), 3, sizes_mb=sizes, shard_size_in_mb=200.0)
    assert _bounds(shards) == [(0, 3), (3, 6), (6, 9), (9, 10)]


def test_shards_never_straddle_a_data_file_whatever_the_target():
    rng = random.Random(0)
    for _ in range(50):
        sizes = [rng.choice([0.001, 0.5, 3.0, 12.0]) for _ in range(rng.randint(1, 300))]
        episodes = _one_stream(sizes, data_file_size_in_mb=rng.choice([1.0, 10.0, 50.0]))
        target = rng.choice([0.1, 2.0, 20.0, 200.0])
        shards = make_shards(episodes, rng.randint(1, 50), sizes_mb=sizes, shard_size_in_mb=target)
        assert shards[0].first == 0 and shards[-1].stop == len(episodes)
        for shard, after in zip(shards, shards[1:], strict=False):
            assert shard.stop == after.first
        for shard in shards:
            assert len({e.data for e in episodes[shard.first : shard.stop]}) == 1
            work = sum(sizes[shard.first : shard.stop]) + EPISODE_WORK_MB * (
                shard.stop - shard.first
            )
            assert shard.stop - shard.first == 1 or work <= target


def test_without_sizes_shards_follow_the_old_rule():
    rng = random.Random(1)
    sizes = [rng.uniform(0.0, 3.0) for _ in range(500)]
    episodes = _one_stream(sizes, data_file_size_in_mb=40.0)
    for per_shard in (1, 7, 250):
        assert _bounds(make_shards(episodes, per_shard)) == _old_shards(episodes, per_shard)


@pytest.mark.parametrize(
    ("shard_options", "shards"),
    [
        ({}, 2),  # the defaults: a shard per data file
        ({"shard_size_in_mb": 0.12}, 4),  # two episodes of ~0.003 + 0.05 MiB per shard
        ({"shard_size_in_mb": 0.001}, 6),
        ({"shard_size_in_mb": 200.0, "episodes_per_shard": 2}, 4),
        ({"episodes_per_shard": 1}, 6),
    ],
)
def test_shard_options_never_move_an_episode_to_another_file(make_v21, shard_options, shards):
    source = load_source(make_v21(episodes=6), "demo")
    files = {"data_file_size_in_mb": 0.01, "video_file_size_in_mb": 0.01, "chunks_size": 2}
    # the old rule: 250 episodes per shard; the files by lerobot's rollover
    old = make_plan(source, ConversionOptions(**files, episodes_per_shard=250))
    new = make_plan(source, ConversionOptions(**files, **shard_options))
    assert [e.data for e in old.episodes] == [(0, 0)] * 3 + [(0, 1)] * 3
    assert _bounds(old.shards) == _old_shards(old.episodes, 250) == [(0, 3), (3, 6)]
    assert len(new.shards) == shards
    assert [(e.data, e.videos) for e in new.episodes] == [(e.data, e.videos) for e in old.episodes]
    assert [(f.chunk, f.file) for f in new.data_files] == [
        (f.chunk, f.file) for f in old.data_files
    ]
    assert new.video_files == old.video_files
    for shard in new.shards:
        assert len({e.data for e in new.episodes[shard.first : shard.stop]}) == 1


def test_shard_size_must_be_positive():
    with pytest.raises(ValueError, match="shard_size_in_mb"):
        ConversionOptions(shard_size_in_mb=0)


def test_plan_of_a_generated_dataset(make_v21):
    source = load_source(make_v21(episodes=6), "demo")
    plan = make_plan(source, ConversionOptions(data_file_size_in_mb=0.002, episodes_per_shard=4))
    lengths = [e["length"] for e in source.episodes]
    assert [e.length for e in plan.episodes] == lengths
    assert plan.episodes[-1].dataset_to_index == sum(lengths) == plan.total_frames
    assert len(plan.data_files) > 1
    covered = sorted(s for f in plan.data_files for s in f.shards)
    assert covered == [s.id for s in plan.shards]
    for shard in plan.shards:
        first, stop = shard.first, shard.stop
        assert stop - first <= 4
        assert len({tuple(e.data) for e in plan.episodes[first:stop]}) == 1


def test_skipped_episodes_are_renumbered(make_v21):
    source = load_source(make_v21(episodes=6), "demo")
    plan = make_plan(source, ConversionOptions(skip_episodes=(1, 4)))
    assert [e.source_episode_index for e in plan.episodes] == [0, 2, 3, 5]
    assert [e.episode_index for e in plan.episodes] == [0, 1, 2, 3]
    assert plan.episodes[1].dataset_from_index == source.episodes[0]["length"]


def test_skipping_an_unknown_episode_is_an_error(make_v21):
    source = load_source(make_v21(episodes=6), "demo")
    with pytest.raises(Exception, match=r"dataset 'demo'.*skip_episodes.*\[9\]"):
        make_plan(source, ConversionOptions(skip_episodes=(9,)))


def test_plan_round_trips_through_json(make_v21, tmp_path):
    source = load_source(make_v21(episodes=6), "demo")
    plan = make_plan(source, ConversionOptions(data_file_size_in_mb=0.002, skip_episodes=(2,)))
    plan.save(tmp_path / "plan.json")
    assert load_plan(tmp_path / "plan.json") == plan
    assert plan.file_paths()[0] == "data/chunk-000/file-000.parquet"


def test_options_from_config_layers_and_unknown_keys():
    options = ConversionOptions.from_config({"chunks_size": 5}, {"chunks_size": 7}, None)
    assert options.chunks_size == 7 and options.data_file_size_in_mb == 100
    with pytest.raises(ValueError, match="episodes_per_batch"):
        ConversionOptions.from_config({"episodes_per_batch": 3})


def _saved_parse_time_plan(make_v21, tmp_path, options):
    """A copy of a v2.1 demo, and its parse-time plan saved as the main Snakemake saves it."""
    root = tmp_path / "src"
    shutil.copytree(make_v21(episodes=6), root)
    source = load_source(root, "demo")
    signature = source_signature(root)
    save_parse_time_plan(make_plan(source, options, check_stats=False), signature, tmp_path / "p")
    return root, tmp_path / "p"


def test_the_plan_job_reuses_the_parse_time_plan_of_unchanged_files(make_v21, tmp_path):
    options = ConversionOptions(data_file_size_in_mb=0.002, episodes_per_shard=4)
    root, saved = _saved_parse_time_plan(make_v21, tmp_path, options)
    source = load_source(root, "demo")
    assert reuse_plan(saved, source, options) == make_plan(source, options)
    # another dataset name, source folder or options: not this plan
    assert reuse_plan(saved, load_source(root, "other"), options) is None
    assert reuse_plan(saved, source, ConversionOptions(data_file_size_in_mb=0.002)) is None
    moved = tmp_path / "moved"
    shutil.copytree(root, moved, copy_function=os.link)
    assert reuse_plan(saved, load_source(moved, "demo"), options) is None
    # missing, or not a saved plan: none either
    assert reuse_plan(tmp_path / "absent", source, options) is None
    (tmp_path / "bad").write_text("{}")
    assert reuse_plan(tmp_path / "bad", source, options) is None


@pytest.mark.parametrize("change", ["rewrite_parquet", "add_mp4", "touch_episodes"])
def test_a_changed_source_file_makes_the_plan_again(make_v21, tmp_path, change):
    options = ConversionOptions()
    root, saved = _saved_parse_time_plan(make_v21, tmp_path, options)
    parquet = next(root.glob("data/*/episode_000001.parquet"))
    if change == "rewrite_parquet":  # same size, new mtime: a footer may differ
        data = parquet.read_bytes()
        parquet.unlink()
        parquet.write_bytes(data)
        os.utime(parquet, ns=(0, 1))
    elif change == "add_mp4":
        mp4 = next(root.glob("videos/**/*.mp4"))
        shutil.copy(mp4, mp4.with_name("episode_000099.mp4"))
    else:
        episodes = root / "meta" / "episodes.jsonl"
        episodes.write_text(episodes.read_text())
        os.utime(episodes, ns=(0, 1))
    assert reuse_plan(saved, load_source(root, "demo"), options) is None


def test_a_reused_plan_still_checks_the_stats(make_v21, tmp_path):
    options = ConversionOptions()
    root, saved = _saved_parse_time_plan(make_v21, tmp_path, options)
    stats = root / "meta" / "episodes_stats.jsonl"
    lines = stats.read_text().splitlines()
    stats.write_text("\n".join(lines[:-1]) + "\n")
    # planned after the change (the parse-time plan does not read the stats)
    plan = Plan.from_json(json.loads(saved.read_text())["plan"])
    save_parse_time_plan(plan, source_signature(root), saved)
    with pytest.raises(DatasetError, match="no stats for this episode"):
        reuse_plan(saved, load_source(root, "demo"), options)

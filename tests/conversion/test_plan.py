"""The plan: lerobot 0.6.1's file assignment and the shards."""

import pytest

from robopipe.conversion.options import ConversionOptions
from robopipe.conversion.plan import PlannedEpisode, assign_files, load_plan, make_plan, make_shards
from robopipe.formats.v21_reader import load_source
from robopipe.layout import next_chunk_file


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

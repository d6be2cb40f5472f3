"""The plan: lerobot 0.6.1's file assignment and the shards."""

import pytest

from robopipe.layout import next_chunk_file
from robopipe.conversion.plan import PlanOptions, assign_files, make_plan, make_shards
from robopipe.formats.v21_reader import load_source


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
    return {"episode_index": i, "data": data, "videos": {"front": front, "wrist": wrist}}


def test_shards_never_straddle_a_file_of_any_stream():
    episodes = [
        _episode(0, [0, 0], [0, 0], [0, 0]),
        _episode(1, [0, 0], [0, 0], [0, 0]),
        _episode(2, [0, 0], [0, 1], [0, 0]),
        _episode(3, [0, 1], [0, 1], [0, 0]),
        _episode(4, [0, 1], [0, 1], [0, 1]),
        _episode(5, [0, 1], [0, 1], [0, 1]),
        _episode(6, [0, 1], [0, 1], [0, 1]),
    ]
    shards = make_shards(episodes, episodes_per_batch=2)
    assert [s["episodes"] for s in shards] == [[0, 2], [2, 3], [3, 4], [4, 6], [6, 7]]
    assert [s["id"] for s in shards][:2] == ["shard-000000", "shard-000001"]


def test_plan_of_a_generated_dataset(make_v21):
    source = load_source(make_v21(episodes=6), "demo")
    plan = make_plan(source, PlanOptions(data_file_size_in_mb=0.002, episodes_per_batch=4))
    lengths = [e["length"] for e in source.episodes]
    assert [e["length"] for e in plan["episodes"]] == lengths
    assert plan["episodes"][-1]["dataset_to_index"] == sum(lengths) == plan["total_frames"]
    assert len(plan["files"]["data"]) > 1
    covered = sorted(s for f in plan["files"]["data"] for s in f["shards"])
    assert covered == [s["id"] for s in plan["shards"]]
    for shard in plan["shards"]:
        first, stop = shard["episodes"]
        assert stop - first <= 4
        assert len({tuple(e["data"]) for e in plan["episodes"][first:stop]}) == 1


def test_skipped_episodes_are_renumbered(make_v21):
    source = load_source(make_v21(episodes=6), "demo")
    plan = make_plan(source, PlanOptions(skip_episodes=(1, 4)))
    assert [e["source_episode_index"] for e in plan["episodes"]] == [0, 2, 3, 5]
    assert [e["episode_index"] for e in plan["episodes"]] == [0, 1, 2, 3]
    assert plan["episodes"][1]["dataset_from_index"] == source.episodes[0]["length"]


def test_skipping_an_unknown_episode_is_an_error(make_v21):
    source = load_source(make_v21(episodes=6), "demo")
    with pytest.raises(Exception, match=r"dataset 'demo'.*skip_episodes.*\[9\]"):
        make_plan(source, PlanOptions(skip_episodes=(9,)))

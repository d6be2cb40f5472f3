import pytest

from robopipe.loading.partition import assign_episodes, group_episodes_by_files, partition_episodes


def test_lpt_balances_and_sorts_bins():
    bins = partition_episodes([5, 1, 4, 3, 3], 2)
    # 5 -> bin0, 4 -> bin1, ep3 (3) -> bin1 (7), ep4 (3) -> bin0 (8), 1 -> bin1 (8)
    assert bins == [[0, 4], [1, 2, 3]]
    assert sorted(sum(bins, [])) == [0, 1, 2, 3, 4]


def test_lpt_ties_go_to_lower_index_and_bin():
    assert partition_episodes([2, 2, 2, 2], 2) == [[0, 2], [1, 3]]


@pytest.mark.parametrize(("lengths", "n"), [([1, 2], 3), ([1, 0], 1), ([1], 0)])
def test_lpt_rejects_impossible(lengths, n):
    with pytest.raises(ValueError):
        partition_episodes(lengths, n)


def test_groups_are_connected_components():
    ids = [[("d", 0)], [("d", 0), ("v", 1)], [("v", 1)], [("v", 2)], [("d", 3), ("v", 2)]]
    assert group_episodes_by_files(ids) == [[0, 1, 2], [3, 4]]


def test_assign_keeps_file_groups_when_enough():
    ids = [[("data", 0, 0), ("cam", 0, e // 2)] for e in range(8)]
    slots = assign_episodes([10] * 8, ids, world_size=2, num_workers=2)
    assert sorted(slots) == [[0, 1], [2, 3], [4, 5], [6, 7]]


def test_assign_splits_groups_when_too_few():
    ids = [[("data", 0, 0), ("cam", 0, 0)] for _ in range(5)]
    slots = assign_episodes([10, 20, 30, 40, 50], ids, world_size=1, num_workers=2)
    assert all(slots) and sorted(sum(slots, [])) == list(range(5))
    loads = [sum([10, 20, 30, 40, 50][e] for e in s) for s in slots]
    assert max(loads) - min(loads) <= 10


def test_assign_errors_when_a_worker_would_be_idle():
    with pytest.raises(ValueError, match="disjoint non-empty"):
        assign_episodes([5, 5, 5], [[("data", 0, 0)]] * 3, world_size=2, num_workers=2)

"""robopipe.sources.local_v21: what a local v2.1 folder's check and jobs read, and the
signatures that rerun exactly the jobs whose files changed."""

import os
import shutil

from robopipe.formats.v21_reader import load_source
from robopipe.layout import V21_EPISODES_STATS_PATH, V21_INFO_PATH
from robopipe.sources import LocalV21, open_source


def _source(root, **conversion) -> LocalV21:
    source = open_source("d", {"path": str(root), "conversion": conversion})
    assert type(source) is LocalV21
    return source


def test_files_and_their_signatures(make_v21):
    root = make_v21(episodes=5)
    source = _source(root)
    assert source.parse_time_plan and source.plan_stage == "convert"
    size = (root / V21_INFO_PATH).stat().st_size
    assert source.signatures_of([str(root / V21_INFO_PATH)])[V21_INFO_PATH][0] == size
    assert source.signatures_of([str(root / "nothing.parquet")]) == {"nothing.parquet": None}
    assert f"{root}/{V21_EPISODES_STATS_PATH}" in source.meta_inputs()
    assert f"{root}/{V21_EPISODES_STATS_PATH}" not in source.plan_inputs()
    assert f"{root}/{V21_INFO_PATH}" in source.plan_inputs()
    key = source.v21.video_keys[0]
    v21 = load_source(root, "d")
    assert source.paths(range(5), key) == [str(v21.video_file(i, key)) for i in range(5)]
    assert source.paths([3]) == [str(v21.data_file(3))]
    assert source.data_signatures([0, 1]) != source.data_signatures([0, 2])
    assert source.video_signatures([0], key) != source.data_signatures([0])


def test_check_digests_see_changed_and_added_files(make_v21, tmp_path):
    root = tmp_path / "src"
    shutil.copytree(make_v21(episodes=5), root)
    source = _source(root)
    assert source.check_ranges() == [(0, None)] and source.check_parts() == []
    part, tree = source.check_part_signatures(0, None), source.check_tree_digest()
    whole = source.check_signatures()
    v21 = load_source(root, "d")
    os.utime(v21.video_file(3, v21.video_keys[0]), ns=(1, 1))  # rewritten in place
    assert _source(root).check_part_signatures(0, None) != part
    assert _source(root).check_signatures() != whole
    assert _source(root).check_part_signatures(0, 3) == source.check_part_signatures(0, 3)
    assert _source(root).check_tree_digest() == tree
    (root / ".DS_Store").write_bytes(b"")
    assert _source(root).check_tree_digest() != tree
    # the lengths a part checks against
    part = _source(root).check_part_signatures(0, 3)
    os.utime(root / "meta/episodes.jsonl", ns=(1, 1))
    assert _source(root).check_part_signatures(0, 3) != part


def test_big_sources_are_checked_in_parts(make_v21, tmp_path):
    root = make_v21(episodes=5)
    source = _source(root, check_episodes_per_job=2)
    assert source.check_ranges() == [(0, 2), (2, 4), (4, None)]
    assert source.check_parts() == [f"results/d/check_parts/part-{i:03d}.json" for i in range(3)]
    # the check job merges the parts: its own signature leaves the episodes' files to them
    assert source.check_signatures() == source.check_tree_digest()
    assert _source(root, check_episodes_per_job=5).check_ranges() == [(0, None)]


def test_unreadable_metadata_has_no_part_signature(tmp_path):
    source = _source(tmp_path)
    assert source.info == {} and source.check_part_signatures(0, None) == ""
    assert source.plan_inputs() == [str(tmp_path)]

"""robopipe.workflow.sources: kinds, folders, options and the parse-time plan of sources."""

import os
import shutil

import pytest

from robopipe.formats.v21_reader import load_source
from robopipe.layout import V21_EPISODES_STATS_PATH, V21_INFO_PATH
from robopipe.workflow.sources import Datasets, UnplannableSource, digest


def config_of(**datasets):
    return {"datasets": datasets, "conversion": {"episodes_per_shard": 2}}


def test_kinds_and_source_folders(tmp_path):
    datasets = Datasets(
        config_of(
            local={"path": str(tmp_path)},
            hub={"repo_id": "lerobot/pusht"},
            demo={"demo": {"episodes": 5}},
            lift={"robomimic": {"path": "lift.hdf5", "task": "Lift"}},
            gen={"robomimic": {"generate": {"demos": 7}, "codec": "h264_lossless"}},
        )
    )
    assert datasets.names() == ["local", "hub", "demo", "lift", "gen"]
    assert [datasets.kind(n) for n in datasets.names()] == [
        "path",
        "repo_id",
        "demo",
        "robomimic",
        "robomimic",
    ]
    assert datasets.source_dir("local") == str(tmp_path)
    assert datasets.source_dir("hub") == "results/hub/source.sqlite"  # the plan job lists it
    assert datasets.source_dir("demo") == "results/demo/demo"
    assert datasets.source_dir("lift") == "results/lift/robomimic_v21"
    assert datasets.hub("hub") == ("lerobot/pusht", "v2.1")
    assert datasets.configured_episodes("demo") == 5
    assert datasets.configured_episodes("gen") == 7
    assert datasets.configured_episodes("lift") is None
    assert datasets.configured_episodes("hub") is None
    assert datasets.robomimic_hdf5("lift") == "lift.hdf5"
    assert datasets.robomimic_hdf5("gen") == "results/gen/robomimic/generated.hdf5"
    assert datasets.robomimic_options("lift") == {"task": "Lift"}
    assert datasets.robomimic_options("gen") == {"codec": "h264_lossless"}
    assert datasets.meta_files("hub") == []


def test_remote_v21_listing_and_cache():
    datasets = Datasets(
        config_of(
            hub={"repo_id": "lerobot/pusht"},
            kept={
                "repo_id": "me/ds",
                "revision": "v2.1",
                "cache_dir": "$TMPDIR/robopipe/kept",
                "keep_cache": True,
            },
            demo={"demo": {}},
        )
    )
    assert datasets.is_remote_v21("hub") and not datasets.is_remote_v21("demo")
    assert datasets.remote_listing("hub") == {
        "url": "hf://datasets/lerobot/pusht@v2.1",
        "cache": "results/hub/source_cache",
        "storage_options": {},
    }
    assert datasets.remote_listing("kept")["cache"] == "$TMPDIR/robopipe/kept"
    assert datasets.remote_listing("demo") == {}
    assert datasets.cache_to_remove("hub") == "results/hub/source_cache"
    assert datasets.cache_to_remove("kept") == "" and datasets.cache_to_remove("demo") == ""


def test_options_layer_dataset_over_config():
    config = config_of(a={"demo": {}, "conversion": {"episodes_per_shard": 5}}, b={"demo": {}})
    datasets = Datasets(config)
    assert datasets.options("a").episodes_per_shard == 5
    assert datasets.options("b").episodes_per_shard == 2


def test_push_options_without_push_section():
    datasets = Datasets(config_of(a={"demo": {}, "push": {"url": "s3://b/a"}}, b={"demo": {}}))
    assert datasets.push_options("a") == {"url": "s3://b/a"}
    with pytest.raises(ValueError, match="'b' has no push"):
        datasets.push_options("b")


def test_local_plan_signatures_and_videos(make_v21):
    root = make_v21(episodes=5)
    datasets = Datasets(config_of(d={"path": str(root)}))
    plan = datasets.local_plan("d")
    assert len(plan.episodes) == 5
    assert [len(plan.shard_episodes(s.id)) for s in plan.shards] == [2, 2, 1]
    assert datasets.local_plan("d") is plan  # cached
    size = (root / V21_INFO_PATH).stat().st_size
    info = str(root / V21_INFO_PATH)
    assert datasets.signatures_of("d", [info])[V21_INFO_PATH][0] == size
    assert f"{root}/{V21_EPISODES_STATS_PATH}" in datasets.meta_files("d")
    key = plan.video_keys[0]
    files = datasets.video_file_episodes("d", key)
    videos = [
        path for chunk, file in files for path in datasets.source_videos("d", key, chunk, file)
    ]
    assert videos == [str(load_source(root, "d").video_file(i, key)) for i in range(5)]
    missing = str(root / "nothing.parquet")
    assert datasets.signatures_of("d", [missing]) == {"nothing.parquet": None}


def test_check_digests_see_changed_and_added_files(make_v21, tmp_path):
    root = tmp_path / "src"
    shutil.copytree(make_v21(episodes=5), root)
    config = config_of(d={"path": str(root)})
    datasets = Datasets(config)
    assert datasets.check_ranges("d") == [(0, None)]
    part, tree = datasets.check_part_digest("d", 0, None), datasets.check_tree_digest("d")
    source = load_source(root, "d")
    os.utime(source.video_file(3, source.video_keys[0]), ns=(1, 1))  # rewritten in place
    assert Datasets(config).check_part_digest("d", 0, None) != part
    assert Datasets(config).check_part_digest("d", 0, 3) == datasets.check_part_digest("d", 0, 3)
    assert Datasets(config).check_tree_digest("d") == tree
    (root / ".DS_Store").write_bytes(b"")
    assert Datasets(config).check_tree_digest("d") != tree
    # the lengths a part checks against
    part = Datasets(config).check_part_digest("d", 0, 3)
    os.utime(root / "meta/episodes.jsonl", ns=(1, 1))
    assert Datasets(config).check_part_digest("d", 0, 3) != part


def test_big_sources_are_checked_in_parts(make_v21, tmp_path):
    root = make_v21(episodes=5)
    config = {"datasets": {"d": {"path": str(root), "conversion": {"check_episodes_per_job": 2}}}}
    assert Datasets(config).check_ranges("d") == [(0, 2), (2, 4), (4, None)]
    config["datasets"]["d"]["conversion"]["check_episodes_per_job"] = 5
    assert Datasets(config).check_ranges("d") == [(0, None)]


def test_unplannable_source_names_every_problem(make_v21, tmp_path):
    root = tmp_path / "broken"
    shutil.copytree(make_v21(episodes=3), root)
    for parquet in root.glob("data/*/*.parquet"):
        parquet.write_bytes(b"not a parquet")
    datasets = Datasets(config_of(broken={"path": str(root)}))
    with pytest.raises(UnplannableSource) as caught:
        datasets.local_plan("broken")
    text = "\n".join(caught.value.lines)
    assert "broken" in text
    assert "episode_000000.parquet" in text and "episode_000002.parquet" in text


def test_digest_is_order_independent():
    assert digest({"a": 1, "b": [2]}) == digest({"b": [2], "a": 1})
    assert digest({"a": 1}) != digest({"a": 2})


def test_a_v30_folder_is_read_where_it_is(tmp_path):
    root = tmp_path / "v30"
    (root / "meta").mkdir(parents=True)
    (root / "meta" / "info.json").write_text('{"codebase_version": "v3.0", "total_episodes": 7}')
    for rel in ("data/chunk-000/file-001.parquet", "data/chunk-000/file-000.parquet",
                "videos/cam/chunk-000/file-000.mp4", "videos/cam/chunk-000/notes.txt"):  # fmt: skip
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(b"x")
    v21 = tmp_path / "v21"
    (v21 / "meta").mkdir(parents=True)
    (v21 / "meta" / "info.json").write_text('{"codebase_version": "v2.1"}')
    datasets = Datasets(
        config_of(new={"path": str(root)}, old={"path": str(v21)}, demo={"demo": {}})
    )
    assert datasets.is_v30("new")
    assert not datasets.is_v30("old") and not datasets.is_v30("demo")
    assert datasets.dataset_info("new") == f"{root}/meta/info.json"
    assert datasets.dataset_info("old") == "results/old/v3.0/meta/info.json"
    assert datasets.ready("new") == ["results/new/check.json"]
    assert datasets.ready("old") == ["results/old/v3.0/meta/info.json"]
    assert datasets.validation("new") == "results/new/check.json"
    assert datasets.validation("old") == "results/old/validation.json"
    assert datasets.configured_episodes("new") == 7
    assert datasets.v30_files("new") == (
        ["data/chunk-000/file-000.parquet", "data/chunk-000/file-001.parquet"],
        ["videos/cam/chunk-000/file-000.mp4"],
    )


def test_a_folder_without_info_is_not_v30(tmp_path):
    datasets = Datasets(config_of(empty={"path": str(tmp_path)}))
    assert not datasets.is_v30("empty")
    assert datasets.local_info("empty") == {}

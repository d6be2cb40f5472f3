"""robopipe.sources: the class each config entry gets, and what each kind says of itself."""

import json

import pytest

from robopipe.errors import DatasetError
from robopipe.sources import Demo, LocalV21, LocalV30, RemoteV21, RemoteV30, Robomimic, open_source
from robopipe.sources.base import digest


def _folder(tmp_path, version):
    (tmp_path / "meta").mkdir(parents=True)
    (tmp_path / "meta/info.json").write_text(json.dumps({"codebase_version": version}))
    return tmp_path


@pytest.mark.parametrize(
    ("entry", "kind"),
    [
        ({"repo_id": "lerobot/pusht"}, RemoteV21),  # the default revision is v2.1
        ({"repo_id": "lerobot/pusht", "revision": "v3.0"}, RemoteV30),
        ({"demo": {"episodes": 5}}, Demo),
        ({"robomimic": {"path": "lift.hdf5"}}, Robomimic),
    ],
)
def test_each_entry_gets_its_kind_without_a_read(entry, kind):
    source = open_source("d", entry)
    assert type(source) is kind
    assert source._info is None  # nothing was read


def test_a_folder_s_version_picks_its_kind(tmp_path):
    assert type(open_source("a", {"path": str(_folder(tmp_path / "a", "v3.0"))})) is LocalV30
    assert type(open_source("b", {"path": str(_folder(tmp_path / "b", "v2.1"))})) is LocalV21
    # an unknown or missing version is a v2.1 source whose check names the problem
    assert type(open_source("c", {"path": str(_folder(tmp_path / "c", "v9"))})) is LocalV21
    assert type(open_source("e", {"path": str(tmp_path / "empty")})) is LocalV21
    url = {"url": f"file://{_folder(tmp_path / 'f', 'v3.0')}"}
    assert type(open_source("f", url)) is RemoteV30
    url = {"url": f"file://{_folder(tmp_path / 'g', 'v2.1')}/"}
    source = open_source("g", url)
    assert type(source) is RemoteV21 and source.url == f"file://{tmp_path / 'g'}"


def test_an_unreadable_remote_info_is_a_dataset_error(tmp_path):
    with pytest.raises(DatasetError, match="dataset 'ds': file file://.*meta/info.json"):
        open_source("ds", {"url": f"file://{tmp_path}/absent"})


def test_converted_and_v30_sources_say_where_their_v30_lives(tmp_path):
    old = open_source("old", {"path": str(_folder(tmp_path / "old", "v2.1"))})
    new = open_source("new", {"path": str(_folder(tmp_path / "new", "v3.0"))})
    assert old.converted and not new.converted
    assert old.dataset_info() == "results/old/v3.0/meta/info.json"
    assert new.dataset_info() == f"{tmp_path}/new/meta/info.json"
    assert old.ready() == ["results/old/v3.0/meta/info.json"]
    assert new.ready() == ["results/new/check.json"]
    assert old.validation() == "results/old/validation.json"
    assert new.validation() == "results/new/check.json"
    assert old.check_inputs() == [f"{tmp_path}/old/meta/info.json"]
    assert new.check_inputs() == [f"{tmp_path}/new/meta/info.json"]
    assert old.check_location() == new.check_location().replace("new", "old")


def test_sources_a_rule_makes(tmp_path):
    demo = open_source("demo", {"demo": {"episodes": 5}})
    lift = open_source("lift", {"robomimic": {"path": "lift.hdf5", "task": "Lift"}})
    gen = open_source("gen", {"robomimic": {"generate": {"demos": 7}, "codec": "h264_lossless"}})
    assert demo.folder == "results/demo/demo" and demo.check_inputs() == ["results/demo/demo"]
    assert demo.plan_inputs() == ["results/demo/demo"] and demo.meta_inputs() == []
    assert demo.demo_options()["cameras"] == (
        "observation.images.front",
        "observation.images.wrist",
    )
    assert lift.folder == "results/lift/robomimic_v21"
    assert (demo.known_episodes(), gen.known_episodes(), lift.known_episodes()) == (5, 7, None)
    assert lift.hdf5() == "lift.hdf5" and gen.hdf5() == "results/gen/robomimic/generated.hdf5"
    assert demo.hdf5() is None
    assert lift.robomimic_options() == {"task": "Lift"}
    assert gen.robomimic_options() == {"codec": "h264_lossless"}
    assert (demo.plan_stage, lift.plan_stage) == ("source", "robomimic")
    assert not demo.parse_time_plan and demo.data_signatures([0]) == ""


def test_remote_v21_listing_and_cache():
    hub = open_source("hub", {"repo_id": "lerobot/pusht"})
    kept = open_source(
        "kept",
        {"repo_id": "me/ds", "revision": "v2.1", "cache_dir": "$TMPDIR/rp", "keep_cache": True},
    )
    assert hub.folder == "results/hub/source.sqlite"  # the plan job lists it
    assert hub.check_inputs() == ["results/hub/plan.json"] and hub.plan_inputs() == []
    assert hub.remote_listing() == {
        "url": "hf://datasets/lerobot/pusht@v2.1",
        "cache": "results/hub/source_cache",
        "storage_options": {},
    }
    assert kept.remote_listing()["cache"] == "$TMPDIR/rp"
    assert hub.cache_to_remove() == "results/hub/source_cache"
    assert kept.cache_to_remove() == "" and open_source("d", {"demo": {}}).cache_to_remove() == ""
    assert open_source("d", {"demo": {}}).remote_listing() == {}
    assert hub.known_episodes() is None


def test_options_layer_dataset_over_config():
    source = open_source(
        "a", {"demo": {}, "conversion": {"episodes_per_shard": 5}}, {"episodes_per_shard": 2}
    )
    assert source.options.episodes_per_shard == 5
    assert open_source("b", {"demo": {}}, {"episodes_per_shard": 2}).options.episodes_per_shard == 2


def test_push_options_without_push_section():
    assert open_source("a", {"demo": {}, "push": {"url": "s3://b/a"}}).push_options() == {
        "url": "s3://b/a"
    }
    with pytest.raises(ValueError, match="'b' has no push"):
        open_source("b", {"demo": {}}).push_options()


def test_digest_is_order_independent():
    assert digest({"a": 1, "b": [2]}) == digest({"b": [2], "a": 1})
    assert digest({"a": 1}) != digest({"a": 2})

"""robopipe.workflow.quality: each dataset's quality batches, the episodes a batch job reads,
the merged `quality:` options, and the config schema's quality section."""

import os
import re
import shutil
from pathlib import Path

import pytest
import yaml

from robopipe.config_check import config_problems
from robopipe.quality import CHECKS, QualityOptions
from robopipe.workflow import quality
from robopipe.workflow.sources import Datasets


def no_checkpoint(name):
    raise AssertionError("a v2.1 source's batches need no checkpoint")


SCHEMA = Path(__file__).resolve().parents[2] / "workflow/schemas/config.schema.yaml"


@pytest.fixture(scope="module")
def schema():
    return yaml.safe_load(SCHEMA.read_text())


def test_a_v21_sources_batches_are_its_plans_shards(make_v21, tmp_path):
    datasets = Datasets(
        {
            "datasets": {"d": {"path": str(make_v21(episodes=5))}},
            "conversion": {"episodes_per_shard": 2},
        }
    )
    plan = datasets.plan("d")
    assert quality.batch_ids(datasets, "d", no_checkpoint) == [s.id for s in plan.shards]
    assert (
        quality.batch_files(datasets, "d", no_checkpoint)[0]
        == "results/d/quality/batches/shard-000000.json"
    )
    assert quality.batch_inputs(datasets, "d") == {"plan": "results/d/plan.json"}
    plan.save(tmp_path / "plan.json")
    shard = plan.shards[1].id
    assert quality.batch_episodes(shard, plan=str(tmp_path / "plan.json")) == [2, 3]


def test_a_changed_mp4_changes_its_batchs_signature_only(make_v21, tmp_path):
    root = shutil.copytree(make_v21(episodes=5), tmp_path / "d")
    config = {"datasets": {"d": {"path": str(root)}}, "conversion": {"episodes_per_shard": 2}}
    datasets = Datasets(config)
    shards = [s.id for s in datasets.plan("d").shards]
    before = [quality.batch_signatures(datasets, "d", s) for s in shards]
    mp4 = next(Path(root).glob("videos/chunk-000/*/episode_000003.mp4"))
    os.utime(mp4, ns=(0, 0))
    after = [quality.batch_signatures(Datasets(config), "d", s) for s in shards]
    assert [a != b for a, b in zip(after, before, strict=True)] == [False, True, False]


def test_a_v30_sources_batches_are_its_data_files(v30, tmp_path):
    assert quality.v30_batches(str(v30)) == {"chunk-000_file-000": [0, 1, 2, 3]}
    batches = quality.v30_batches(str(v30), selected=[3, 1])
    assert batches == {"chunk-000_file-000": [1, 3]}
    assert quality.v30_batches(str(v30), selected=[]) == {}
    quality.write_batches(batches, tmp_path / "batches.json")
    datasets = Datasets({"datasets": {"d": {"path": str(v30)}}})
    ids = quality.batch_ids(datasets, "d", lambda name: str(tmp_path / "batches.json"))
    assert ids == ["chunk-000_file-000"]
    assert quality.batch_inputs(datasets, "d") == {"batches": "results/d/quality/batches.json"}
    assert quality.batch_signatures(datasets, "d", ids[0]) == ""
    assert quality.batch_episodes(ids[0], batches=str(tmp_path / "batches.json")) == [1, 3]
    assert quality.v30_batch("data/chunk-001/file-012.parquet") == "chunk-001_file-012"
    with pytest.raises(ValueError, match="not a LeRobot v3.0 data file"):
        quality.v30_batch("data/episode_000001.parquet")


def test_a_datasets_quality_section_overrides_the_defaults_key_by_key():
    config = {
        "quality": {"fail_on": "error", "frozen_camera_s": 3, "severity": {"nan_inf": "warning"}},
        "datasets": {
            "a": {
                "path": "a",
                "quality": {"frozen_camera_s": 1.5, "severity": {"idle_episode": False}},
            },
            "b": {"path": "b"},
        },
    }
    a = quality.quality_options(config, config["datasets"]["a"])
    assert a.fail_on == "error" and a.frozen_camera_s == 1.5
    assert a.severity == {"nan_inf": "warning", "idle_episode": "off"}  # YAML's bare off
    assert quality.quality_options(config, config["datasets"]["b"]).frozen_camera_s == 3.0
    assert "fail_on" not in quality.job_options(a)
    assert QualityOptions.from_config(quality.job_options(a)).frozen_camera_s == 1.5
    with pytest.raises(ValueError, match="frozen_camera_s"):
        quality.quality_options({}, {"path": "a", "quality": {"frozen_camra_s": 1}})


def test_the_schema_knows_every_option_and_check(schema):
    section = schema["definitions"]["quality"]["properties"]
    defaults = QualityOptions().to_config()
    assert set(section) == set(defaults)
    for key, value in defaults.items():  # the description gives the default
        if isinstance(value, float):
            assert f"(default {value:g})" in section[key]["description"], key
    assert set(CHECKS) <= set(section["severity"]["properties"])


def test_a_misspelt_quality_key_is_named_with_the_nearest(schema):
    config = {
        "quality": {"fail_om": "error"},
        "datasets": {"d": {"path": "x", "quality": {"severity": {"frozen_camra": "off"}}}},
    }
    assert config_problems(config, schema) == [
        "config: quality: unknown key 'fail_om'; did you mean 'fail_on'?",
        "config: datasets.d.quality.severity: unknown key 'frozen_camra'; did you mean "
        "'frozen_camera'?",
    ]
    bad = {"quality": {"fail_on": "always"}, "datasets": {}}
    assert config_problems(bad, schema)[0].startswith(
        "config: quality.fail_on: 'always' is not one"
    )


def test_a_batch_of_more_than_batch_episodes_is_checked_in_parts(make_v21, v30, tmp_path):
    datasets = Datasets(
        {
            "datasets": {"d": {"path": str(make_v21(episodes=5))}},
            "conversion": {"episodes_per_shard": 4},
        }
    )
    ids = quality.batch_ids(datasets, "d", no_checkpoint, batch_episodes=3)
    assert ids == ["shard-000000-part-000", "shard-000000-part-001", "shard-000001"]
    assert all(re.fullmatch(quality.QUALITY_BATCH_PATTERN, i) for i in ids)
    plan = str(tmp_path / "plan.json")
    datasets.plan("d").save(plan)
    parts = [quality.batch_episodes(i, plan=plan, batch_episodes=3) for i in ids]
    assert parts == [[0, 1, 2], [3], [4]]
    signature = quality.batch_signatures(datasets, "d", "shard-000000")
    assert quality.batch_signatures(datasets, "d", ids[1]) == signature

    quality.write_batches(quality.v30_batches(str(v30)), tmp_path / "batches.json")
    v30_ids = quality.batch_ids(
        Datasets({"datasets": {"d": {"path": str(v30)}}}),
        "d",
        lambda name: str(tmp_path / "batches.json"),
        batch_episodes=2,
    )
    assert v30_ids == ["chunk-000_file-000-part-000", "chunk-000_file-000-part-001"]
    batches = str(tmp_path / "batches.json")
    assert [quality.batch_episodes(i, batches=batches, batch_episodes=2) for i in v30_ids] == [
        [0, 1],
        [2, 3],
    ]
    with pytest.raises(ValueError, match="batch_episodes must be an integer > 0"):
        QualityOptions(batch_episodes=0)

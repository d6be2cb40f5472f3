"""robopipe.workflow.sources: the configured datasets' sources built once, their plans (made
at parse time, or read from the plan checkpoint) and what the rules derive from a plan."""

import json
import shutil

import pytest

from robopipe.conversion.plan import make_plan
from robopipe.formats.v21_reader import load_source
from robopipe.options import ConversionOptions
from robopipe.workflow.sources import Datasets, UnplannableSource


def config_of(**datasets):
    return {"datasets": datasets, "conversion": {"episodes_per_shard": 2}}


def test_sources_are_built_once_in_config_order(tmp_path):
    datasets = Datasets(config_of(local={"path": str(tmp_path)}, hub={"repo_id": "x/y"}))
    assert datasets.names() == ["local", "hub"]
    assert datasets["local"] is datasets["local"]
    assert datasets.problems == []


def test_an_unreadable_remote_source_is_a_problem_line(tmp_path):
    datasets = Datasets(config_of(ds={"url": f"file://{tmp_path}/absent"}, demo={"demo": {}}))
    assert len(datasets.problems) == 1
    assert datasets.problems[0].startswith("robopipe: dataset 'ds': file file://")
    assert "demo" in datasets.sources and "ds" not in datasets.sources


def test_parse_time_plan_and_what_jobs_read(make_v21):
    root = make_v21(episodes=5)
    datasets = Datasets(config_of(d={"path": str(root)}))
    plan = datasets.plan("d")
    assert len(plan.episodes) == 5 and datasets.known_episodes("d") == 5
    assert [len(plan.shard_episodes(s.id)) for s in plan.shards] == [2, 2, 1]
    assert datasets.plan("d") is plan  # made once
    assert datasets.plan_layout("d") == plan.layout_digest()
    source = datasets["d"]
    first = plan.shards[0].id
    assert datasets.shard_signatures("d", first) == source.data_signatures([0, 1])
    key = plan.video_keys[0]
    episodes = [i for chunk, file in sorted({e.videos[key] for e in plan.episodes})
                for i in datasets.source_videos("d", key, chunk, file)]  # fmt: skip
    assert episodes == list(range(5))
    chunk, file = plan.episodes[0].videos[key]
    assert datasets.video_signatures("d", key, chunk, file) == source.video_signatures(
        datasets.source_videos("d", key, chunk, file), key
    )
    assert datasets.stats_shards("d") == []
    assert datasets.files("d")[0] == ["data/chunk-000/file-000.parquet"]
    assert datasets.conversion_benchmarks("d")[0].startswith("results/jobs/d/")


def test_a_cluster_job_reads_the_written_plan_and_no_episode_metadata(
    make_v21, tmp_path, monkeypatch
):
    root = shutil.copytree(make_v21(episodes=5), tmp_path / "d")  # its metadata goes below
    written = make_plan(load_source(root, "d"), ConversionOptions(episodes_per_shard=1))
    monkeypatch.chdir(tmp_path)
    skipping = {"path": str(root), "conversion": {"skip_episodes": [1, 3]}}
    before = Datasets(config_of(d={"path": str(root)}, s=skipping), in_job=True)
    assert before.plan_layout("d") == ""  # the plan job's own start: no plan made
    assert before.known_episodes("d") == 5 and before.known_episodes("s") == 3
    assert before._parse_time_plan.cache_info().currsize == 0
    (tmp_path / "results/d").mkdir(parents=True)
    written.save(tmp_path / "results/d/plan.json")
    local = Datasets(config_of(d={"path": str(root)}))
    expected = local.shard_signatures("d", "shard-000000")
    assert len(local.plan("d").shards) == 3  # made from the source: 2 episodes a shard
    (root / "meta/episodes.jsonl").unlink()  # a job starts without the episodes' metadata
    in_job = Datasets(config_of(d={"path": str(root)}), in_job=True)
    # the rerun-trigger params are the main Snakemake's: a job reads no plan for them
    assert in_job.plan_layout("d") == "" and in_job.shard_signatures("d", "shard-000000") == ""
    assert in_job.video_signatures("d", written.video_keys[0], 0, 0) == ""
    assert in_job.known_episodes("d") == 5
    assert in_job._written_plan.cache_info().currsize == 0
    plan = in_job.plan("d")
    assert len(plan.shards) == 5 and plan.layout_digest() == written.layout_digest()
    assert local["d"].data_signatures([0, 1]) == expected


def test_a_checkpoint_plan_is_read_from_the_plan_file(make_v21, tmp_path):
    plan_file = tmp_path / "plan.json"
    options = ConversionOptions(episodes_per_shard=2, compute_missing_stats=True)
    make_plan(load_source(make_v21(episodes=3), "demo"), options).save(plan_file)
    asked = []
    datasets = Datasets(
        config_of(demo={"demo": {}, "conversion": {"compute_missing_stats": True}}),
        checkpoint_plan=lambda name: asked.append(name) or plan_file,
    )
    assert datasets.known_episodes("demo") is None and asked == []  # no plan asked for
    assert datasets.shard_signatures("demo", "shard-000000") == "" and asked == []
    assert datasets.plan_layout("demo") == ""
    assert len(datasets.plan("demo").episodes) == 3 and asked == ["demo"]
    assert datasets.stats_shards("demo") == [
        "results/demo/shards/shard-000000",
        "results/demo/shards/shard-000001",
    ]


def test_v30_sources_are_not_planned(tmp_path):
    (tmp_path / "meta").mkdir()
    (tmp_path / "meta/info.json").write_text(json.dumps({"codebase_version": "v3.0"}))
    datasets = Datasets(config_of(new={"path": str(tmp_path)}))
    assert datasets.files("new") == ([], [])
    assert datasets.conversion_benchmarks("new") == []
    assert datasets.sizes_info("new", copies=False) == f"{tmp_path}/meta/info.json"
    remote = Datasets(config_of(hub={"repo_id": "x/y", "revision": "v3.0"}))
    assert remote.sizes_info("hub", copies=False) == []
    assert remote.sizes_info("hub", copies=True) == "results/hub/local_copy/meta/info.json"


def test_unplannable_source_names_every_problem(make_v21, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the report: results/logs/broken/check.json
    root = tmp_path / "broken"
    shutil.copytree(make_v21(episodes=3), root)
    for parquet in root.glob("data/*/*.parquet"):
        parquet.write_bytes(b"not a parquet")
    refused = []
    datasets = Datasets(config_of(broken={"path": str(root)}), refuse=refused.append)
    with pytest.raises(UnplannableSource) as caught:
        datasets.plan("broken")
    assert refused == [caught.value.lines]
    text = "\n".join(caught.value.lines)
    assert "broken" in text
    assert "episode_000000.parquet" in text and "episode_000002.parquet" in text


def _without_seven_mp4s(make_v21, root):
    """A copy of a 10-episode v2.1 dataset at ``root`` lacking 7 mp4s (of both cameras), as a
    snapshot that lost them; returns their paths relative to ``root``."""
    shutil.copytree(make_v21(episodes=10), root)
    source = load_source(root, "g1")
    front, wrist = source.video_keys
    gone = [(0, front), (3, front), (6, wrist), (9, front), (2, wrist), (5, front), (8, wrist)]
    missing = sorted(str(source.video_file(e, k).relative_to(root)) for e, k in gone)
    for rel in missing:
        (root / rel).unlink()
    return missing


def test_a_refused_source_writes_every_problem_to_its_report(make_v21, tmp_path, monkeypatch):
    missing = _without_seven_mp4s(make_v21, tmp_path / "g1")
    monkeypatch.chdir(tmp_path)
    datasets = Datasets(config_of(g1={"path": str(tmp_path / "g1")}))
    with pytest.raises(UnplannableSource) as caught:
        datasets.plan("g1")
    text = "\n".join(caught.value.lines)
    assert "7 problem(s)" in text and "(all of them in results/logs/g1/check.json)" in text
    assert sum(rel in text for rel in missing) == 5  # the terminal shows the first ones
    report = json.loads((tmp_path / "results/logs/g1/check.json").read_text())
    assert not report["ok"] and report["counts"] == {"missing_file": 7}
    assert sorted(p["file"] for p in report["problems"]) == missing
    assert sorted(p["episode"] for p in report["problems"]) == [0, 2, 3, 5, 6, 8, 9]

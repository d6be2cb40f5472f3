"""The Snakemake path of a Hub source: `fetch`, then the `plan` checkpoint, then conversion."""

import json
import re

import pytest

pytestmark = pytest.mark.slow

DATASET = ("meta", "data", "videos")

CONFIG = {
    "datasets": {
        "hubds": {
            "repo_id": "local/demo",
            "revision": "v2.1",
            "conversion": {"video_file_size_in_mb": 0.02},  # as the v30 fixture
        }
    }
}


def test_convert_fetches_from_hf_endpoint(
    v21, v30, hub_standin, net_log, tmp_path, run_snakemake, file_tree
):
    hub = hub_standin({"local/demo": {"v2.1": v21}})
    env = net_log.env(hub.client_env(tmp_path / "hf_home"))
    workdir = tmp_path / "work"
    workdir.mkdir()

    dry = run_snakemake(workdir, CONFIG, "convert", "-n", "--quiet", "rules", env=env)
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", dry.stdout, re.M))
    assert (counts["fetch"], counts["plan"]) == ("1", "1")
    assert "shard" not in counts  # the plan is a checkpoint: shards are known after the fetch
    assert hub.requests == []

    run_snakemake(workdir, CONFIG, "convert", "--cores", "2", env=env)
    results = workdir / "results"
    assert (results / "hubds/v3.0/meta/info.json").is_file()
    assert file_tree(results / "hubds/v3.0") == file_tree(v30)
    assert "fetched local/demo@v2.1" in (results / "logs/hubds/fetch.log").read_text()
    assert (results / "jobs/hubds/fetch/fetch.tsv").is_file()
    downloads = [r for r in hub.requests if r.method == "GET" and "/resolve/" in r.path]
    assert len(downloads) == len(file_tree(v21))
    net_log.assert_only_local()


def test_push_back_tags_v30_keeps_v21_and_second_push_commits_nothing(
    repo, hub_standin, net_log, tmp_path, run_snakemake, file_tree
):
    hub = hub_standin({"local/demo": {"main": repo, "v2.1": repo}}, token="hf_push")
    env = net_log.env(hub.client_env(tmp_path / "hf_home", token="hf_push"))
    config = {
        "datasets": {"hubds": {**CONFIG["datasets"]["hubds"], "push": {"repo_id": "local/demo"}}}
    }
    old = hub.sha("local/demo", "v2.1")
    workdir = tmp_path / "work"

    run_snakemake(workdir, config, "push", "--cores", "2", env=env)
    results = workdir / "results/hubds"
    record = json.loads((results / "push.json").read_text())
    tree = hub.tree("local/demo", "v3.0")
    assert {p: d for p, d in tree.items() if p.split("/")[0] in DATASET} == file_tree(
        results / "v3.0"
    )
    assert set(tree) - set(file_tree(results / "v3.0")) == {"README.md", ".gitattributes"}
    assert hub.sha("local/demo", "v3.0") == hub.sha("local/demo", "main") == record["revision"]
    assert hub.sha("local/demo", "v2.1") == old and hub.tree("local/demo", "v2.1") == file_tree(
        repo
    )
    commits = len(hub.repo("local/demo").commits)

    run_snakemake(workdir, config, "push", "--cores", "1", "--forcerun", "push_dataset", env=env)
    again = json.loads((results / "push.json").read_text())
    assert again["commits"] == [] and again["revision"] == record["revision"]
    assert len(hub.repo("local/demo").commits) == commits
    net_log.assert_only_local()

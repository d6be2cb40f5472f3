"""The Snakemake path of a Hub v2.1 source: the `plan` checkpoint lists it and reads its
metadata (meta files, parquet footers), then each shard and aggregate job fetches the files it
reads into the cache; publish removes the cache."""

import itertools
import json
import os
import re

import pytest

from robopipe.conversion.plan import load_plan

pytestmark = pytest.mark.slow

DATASET = ("meta", "data", "videos")

CONFIG = {
    "datasets": {
        "hubds": {
            "repo_id": "local/demo",
            "revision": "v2.1",
            # as the v30 fixture; several shards, so shard jobs overlap the downloads
            "conversion": {"video_file_size_in_mb": 0.02, "episodes_per_shard": 2},
        }
    }
}


def _resolved(request) -> str | None:
    """The repo path a ``/resolve/`` request read, or None for another request."""
    if "/resolve/" not in request.path:
        return None
    return request.path.split("/resolve/", 1)[1].split("/", 1)[1]


def _reads(requests) -> list[tuple[str, int, int]]:
    """``(repo path, first byte, last byte)`` of every GET of a file, in request order."""
    reads = []
    for r in requests:
        if r.method == "GET" and (path := _resolved(r)) is not None:
            first, last = map(int, re.fullmatch(r"bytes=(\d+)-(\d+)", r.range).groups())
            reads.append((path, first, last))
    return reads


def _footer_reads(path, rel) -> list[tuple[str, int, int]]:
    """The two reads of a parquet's footer: its last 8 bytes (footer length and magic), then
    the footer."""
    data = path.read_bytes()
    length = int.from_bytes(data[-8:-4], "little")
    size = len(data)
    return [(rel, size - 8, size - 1), (rel, size - 8 - length, size - 9)]


def test_convert_fetches_each_file_once_in_the_jobs_that_read_it(
    v21, v30, hub_standin, net_log, tmp_path, run_snakemake, file_tree
):
    hub = hub_standin({"local/demo": {"v2.1": v21}}, lfs=("*.mp4", "*.parquet"))
    env = net_log.env(hub.client_env(tmp_path / "hf_home"))
    workdir = tmp_path / "work"
    workdir.mkdir()

    dry = run_snakemake(workdir, CONFIG, "convert", "-n", "--quiet", "rules", env=env)
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", dry.stdout, re.M))
    assert counts["plan"] == "1" and "fetch" not in counts
    assert "shard" not in counts  # the plan is a checkpoint: shards are known after it
    assert hub.requests == []

    # the plan alone: the listing, the meta files whole, and each parquet's footer
    run_snakemake(workdir, CONFIG, "results/hubds/plan.json", "--cores", "1", env=env)
    source = file_tree(v21)
    sizes = {p: (v21 / p).stat().st_size for p in source}
    parquets = [p for p in source if p.endswith(".parquet")]
    planned = hub.requests
    assert not any("/revision/" in r.path for r in planned)  # no snapshot_download
    meta = sorted((p, 0, sizes[p] - 1) for p in source if p.startswith("meta/"))
    footers = sorted(r for p in parquets for r in _footer_reads(v21 / p, p))
    assert sorted(_reads(planned)) == sorted(meta + footers)
    plan_bytes = sum(last + 1 - first for _, first, last in _reads(planned))
    print(f"plan: {plan_bytes} of {sum(sizes.values())} bytes")

    # the check: range reads of parquet columns and mp4 headers and ends, no download
    run_snakemake(workdir, CONFIG, "check", "--cores", "1", env=env)
    results = workdir / "results"
    checked = hub.requests[len(planned) :]
    cached = {p.name for p in (results / "hubds/source_cache").glob("*/*")}
    assert cached == {".locks", "meta"}  # no data or video file fetched whole
    assert {p.split("/")[0] for p, _, _ in _reads(checked)} == {"data", "videos"}

    done = len(hub.requests)
    run_snakemake(workdir, CONFIG, "convert", "--cores", "2", env=env)
    assert file_tree(results / "hubds/v3.0") == file_tree(v30)
    fetched = _reads(hub.requests[done:])
    # every byte of every data and video file fetched once, by the jobs (meta/: by the plan)
    covered: dict[str, list[tuple[int, int]]] = {}
    for path, first, last in fetched:
        covered.setdefault(path, []).append((first, last))
    assert sorted(covered) == sorted(p for p in source if not p.startswith("meta/"))
    for path, ranges in covered.items():
        ranges.sort()
        assert ranges[0][0] == 0 and ranges[-1][1] == sizes[path] - 1, path
        assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(ranges)), path
    # the first shard's first file was fetched before the last file of the dataset
    plan = load_plan(results / "hubds/plan.json")
    first = plan.shard_episodes(plan.shards[0].id)[0].source_episode_index
    first_parquet = next(p for p in parquets if p.endswith(f"episode_{first:06d}.parquet"))
    order = list(dict.fromkeys(path for path, _, _ in fetched))
    assert order.index(first_parquet) < len(order) - 1
    assert not (results / "hubds/source_cache").exists()  # removed by publish
    assert "removed the source cache" in (results / "logs/hubds/publish.log").read_text()
    check = json.loads((results / "hubds/check.json").read_text())
    assert check["ok"] and check["source"].startswith("hf://datasets/local/demo@")
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


def test_convert_from_an_s3_url_fetches_in_the_jobs(
    v21, v30, s3_server, net_log, tmp_path, run_snakemake, file_tree
):
    s3_server.fs.put(str(v21), s3_server.url("v21"), recursive=True)
    config = {
        "datasets": {
            "s3ds": {
                "url": s3_server.url("v21"),
                "storage_options": s3_server.storage_options,
                "cache_dir": str(tmp_path / "node_cache"),
                "keep_cache": True,
                "conversion": CONFIG["datasets"]["hubds"]["conversion"],
            }
        }
    }
    workdir = tmp_path / "work"
    env = net_log.env(dict(os.environ))
    run_snakemake(workdir, config, "convert", "--cores", "2", env=env)
    assert file_tree(workdir / "results/s3ds/v3.0") == file_tree(v30)
    (cached,) = (tmp_path / "node_cache").iterdir()  # kept: keep_cache
    source = {p: d for p, d in file_tree(v21).items() if p.split("/")[0] in DATASET}
    assert {p: d for p, d in file_tree(cached).items() if not p.startswith(".")} == source
    net_log.assert_only_local()

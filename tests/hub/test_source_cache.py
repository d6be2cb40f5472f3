"""robopipe.source_cache against the Hub stand-in and a moto S3 server: the listing, footers by
range reads, each file fetched once into the cache, resumed, verified; plan and check of a
remote source from its metadata."""

import threading

import pyarrow.parquet as pq
import pytest

from robopipe.checks.v21 import check_source
from robopipe.conversion.plan import make_plan, plan_remote
from robopipe.errors import DatasetError
from robopipe.formats.v21_reader import load_source
from robopipe.options import ConversionOptions
from robopipe.source_cache import list_remote, load_manifest, remove_cache

LFS = ("*.mp4", "*.parquet")
TOPS = ("meta", "data", "videos")


@pytest.fixture
def serve(hub_standin, hf_client, monkeypatch):
    """``serve(folder, **kwargs)``: the stand-in serving ``folder`` as ``local/demo@v2.1``,
    the in-process client pointed at it (huggingface_hub reads HF_ENDPOINT on import)."""
    from huggingface_hub import constants

    def start(folder, **kwargs):
        standin = hub_standin({"local/demo": {"v2.1": folder}}, **kwargs)
        monkeypatch.setattr(constants, "ENDPOINT", standin.endpoint)
        template = standin.endpoint + "/{repo_id}/resolve/{revision}/{filename}"
        monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", template)
        return standin

    return start


@pytest.fixture
def hub(v21, serve):
    """``v21`` as ``local/demo@v2.1`` on the stand-in, parquets and mp4s in LFS."""
    return serve(v21, lfs=LFS)


def _gets(hub, rel: str) -> list:
    return [r for r in hub.requests if r.method == "GET" and r.path.endswith(f"/{rel}")]


def test_listing_has_sizes_and_lfs_sha256(hub, v21, tmp_path, file_tree):
    remote = list_remote("hubds", str(tmp_path / "cache"), repo_id="local/demo", revision="v2.1")
    tree = file_tree(v21)
    assert sorted(remote.files) == sorted(tree)
    for rel, (size, sha256) in remote.files.items():
        assert size == (v21 / rel).stat().st_size
        assert sha256 == (tree[rel] if rel.endswith((".mp4", ".parquet")) else None)
    assert remote.url == f"hf://datasets/local/demo@{hub.sha('local/demo', 'v2.1')}"
    assert not any("/resolve/" in r.path and r.method == "GET" for r in hub.requests)


def test_unknown_revision_or_repo_is_one_line(hub, tmp_path):
    for repo_id, revision, what in (
        ("local/demo", "v9.9", "revision"),
        ("local/absent", "v2.1", "dataset repository"),
    ):
        with pytest.raises(DatasetError) as raised:
            list_remote("hubds", str(tmp_path), repo_id=repo_id, revision=revision)
        assert str(raised.value) == (
            f"dataset 'hubds': {what} not found on the Hub: {repo_id}@{revision}"
        )


def test_footer_by_range_reads_equals_pyarrow(hub, v21, tmp_path):
    remote = list_remote("hubds", str(tmp_path / "cache"), repo_id="local/demo", revision="v2.1")
    rel = next(p for p in remote.files if p.endswith(".parquet"))
    got = remote.parquet_metadata(rel)
    assert got.equals(pq.read_metadata(v21 / rel))
    reads = _gets(hub, rel)
    assert len(reads) == 2 and all(r.range for r in reads)  # last 8 bytes, then the footer
    assert not (remote.root / rel).exists()


def test_each_file_fetched_once_by_concurrent_jobs(hub, v21, tmp_path, file_tree):
    manifest = tmp_path / "source.sqlite"
    list_remote("hubds", str(tmp_path / "cache"), repo_id="local/demo", revision="v2.1").save(
        manifest
    )
    wanted = [p for p in load_manifest(manifest).files if p.startswith(("data/", "videos/"))]
    # four "jobs", each its own RemoteSource as each job process loads the manifest
    jobs = [threading.Thread(target=load_manifest(manifest).fetch, args=(wanted,)) for _ in "abcd"]
    for job in jobs:
        job.start()
    for job in jobs:
        job.join()
    tree = file_tree(v21)
    cached = file_tree(load_manifest(manifest).root)
    assert {p: cached[p] for p in wanted} == {p: tree[p] for p in wanted}
    for rel in wanted:
        assert len(_gets(hub, rel)) == 1, rel


def test_interrupted_download_resumes(hub, v21, tmp_path):
    remote = list_remote("hubds", str(tmp_path / "cache"), repo_id="local/demo", revision="v2.1")
    rel = next(p for p in remote.files if p.endswith(".mp4"))
    size = remote.size(rel)
    data = (v21 / rel).read_bytes()
    partial = remote.root / rel
    partial = partial.with_name(f".{partial.name}.part")
    partial.parent.mkdir(parents=True)
    partial.write_bytes(data[: size // 2])  # what a killed job left
    assert remote.fetch([rel])[0].read_bytes() == data
    (get,) = _gets(hub, rel)
    assert get.range == f"bytes={size // 2}-{size - 1}"  # the rest only
    assert not partial.exists()


def test_corrupt_download_is_an_error_and_not_cached(hub, tmp_path):
    remote = list_remote("hubds", str(tmp_path / "cache"), repo_id="local/demo", revision="v2.1")
    rel = next(p for p in remote.files if p.endswith(".mp4"))
    remote.files[rel][1] = "0" * 64  # the Hub's sha256 differs from the bytes served
    with pytest.raises(DatasetError, match="do not match the Hub's sha256") as raised:
        remote.fetch([rel])
    assert f"file {rel}" in str(raised.value)
    assert not (remote.root / rel).exists()


def test_plan_and_check_read_metadata_only(hub, v21, tmp_path):
    options = ConversionOptions(video_file_size_in_mb=0.02)
    manifest = tmp_path / "source.sqlite"
    url = "hf://datasets/local/demo@v2.1"
    plan = plan_remote(manifest, "hubds", options, url=url, cache=str(tmp_path / "cache"))
    local = make_plan(load_source(v21, "hubds"), options)
    assert plan.to_json() == {**local.to_json(), "source": str(manifest)}
    report = check_source(manifest, "hubds", options, threads=2)
    assert report.ok, report.summary()
    assert report.source.startswith("hf://datasets/local/demo@")
    cached = {p.name for p in (tmp_path / "cache").glob("*/*")}
    assert cached == {".locks", "meta"}  # nothing but meta/ fetched whole
    for r in hub.requests:
        if "/resolve/" in r.path and r.path.split("/", 6)[-1].startswith(("data/", "videos/")):
            assert r.range is not None, r


def test_check_names_a_missing_remote_file(serve, v21, tmp_path):
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(v21, broken)
    (broken / "data/chunk-000/episode_000003.parquet").unlink()
    serve(broken)
    manifest = tmp_path / "source.sqlite"
    list_remote("hubds", str(tmp_path / "cache"), url="hf://datasets/local/demo@v2.1").save(
        manifest
    )
    report = check_source(manifest, "hubds", ConversionOptions())
    assert [(p.kind, p.episode, p.file) for p in report.problems] == [
        ("missing_file", 3, "data/chunk-000/episode_000003.parquet")
    ]


def test_s3_url_is_listed_read_and_fetched(s3_server, v21, tmp_path, file_tree):
    s3_server.fs.put(str(v21), s3_server.url("v21"), recursive=True)
    url = s3_server.url("v21")
    remote = list_remote(
        "s3ds", str(tmp_path / "cache"), url=url, storage_options=s3_server.storage_options
    )
    tree = file_tree(v21)
    assert sorted(remote.files) == sorted(p for p in tree if p.split("/")[0] in TOPS)
    parquet = next(p for p in remote.files if p.endswith(".parquet"))
    assert remote.parquet_metadata(parquet).equals(pq.read_metadata(v21 / parquet))
    assert not (remote.root / parquet).exists()
    rels = [p for p in remote.files if p.endswith(".mp4")][:2]
    assert [p.read_bytes() for p in remote.fetch(rels)] == [(v21 / p).read_bytes() for p in rels]
    before = len(s3_server.requests())
    remote.fetch(rels)  # cached: no request
    assert len(s3_server.requests()) == before
    assert remove_cache(remote.cache) and not remote.root.exists()

"""hf://buckets/ URLs (huggingface_hub's HfFileSystem on storage buckets) against the Hub
stand-in: listings, paths-info and Range reads, and a v3.0 dataset in a bucket checked and
loaded as the local copy."""

import fsspec
import pytest
import torch
from huggingface_hub import HfApi
from huggingface_hub.errors import BucketNotFoundError

from robopipe.checks.v30 import check_v30
from robopipe.loading import MapDataset, StreamingDataset

BUCKET = "me/robot-data"
KEY = "observation.images.wrist"


def _files(root):
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def test_bucket_listing_info_and_range_reads(v30, hub_standin, net_log, hf_client):
    hub = hub_standin({}, buckets={BUCKET: v30}, page_size=3)
    api = HfApi(endpoint=hub.endpoint)
    info = api.bucket_info(BUCKET)
    assert (info.id, info.total_files) == (BUCKET, len(_files(v30)))
    assert info.size == sum(p.stat().st_size for p in v30.rglob("*") if p.is_file())
    assert [f.path for f in api.list_bucket_tree(BUCKET, recursive=True)] == _files(v30)
    mp4 = next(p for p in _files(v30) if p.endswith(".mp4"))
    found = list(api.get_bucket_paths_info(BUCKET, [mp4, "meta/missing.json"]))
    assert [(f.path, f.size) for f in found] == [(mp4, (v30 / mp4).stat().st_size)]
    with pytest.raises(BucketNotFoundError):
        api.bucket_info("me/no-such-bucket")

    fs, root = fsspec.core.url_to_fs(hub.bucket_url(BUCKET), endpoint=hub.endpoint)
    assert fs.ls(f"{root}/meta", detail=False) == [
        f"{root}/meta/{p.name}" for p in sorted((v30 / "meta").iterdir())
    ]
    assert fs.find(root) == [f"{root}/{p}" for p in _files(v30)]  # over 3-entry pages
    assert fs.info(f"{root}/{mp4}")["size"] == (v30 / mp4).stat().st_size
    assert fs.isdir(f"{root}/videos") and not fs.exists(f"{root}/videos/none.mp4")
    local = (v30 / mp4).read_bytes()
    assert fs.cat_file(f"{root}/{mp4}", 100, 900) == local[100:900]
    assert fs.cat_file(f"{root}/meta/info.json") == (v30 / "meta/info.json").read_bytes()
    reads = [r for r in hub.requests if r.path.endswith(mp4.split("/")[-1])]
    assert reads and all(r.status == 206 for r in reads if r.method == "GET")
    with pytest.raises(FileNotFoundError):
        fsspec.open(hub.bucket_url("me/no-such-bucket", "x"), endpoint=hub.endpoint).open()
    net_log.assert_only_local()


def test_a_dataset_in_a_bucket_is_checked_and_loaded_as_the_local_one(
    v30, hub_standin, net_log, hf_client
):
    hub = hub_standin({}, buckets={BUCKET: v30.parent})
    url, options = hub.bucket_url(BUCKET, v30.name), {"endpoint": hub.endpoint}
    report = check_v30(url, "hubds", storage_options=options, threads=2)
    assert report.ok, report.summary()
    assert report.episodes == check_v30(v30, "hubds").episodes == 8

    local, remote = MapDataset(v30), MapDataset(url, storage_options=options)
    assert len(remote) == len(local)
    for i in (0, len(local) // 2, len(local) - 1):
        a, b = local[i], remote[i]
        assert a.keys() == b.keys()
        assert all(torch.equal(a[k], b[k]) for k in a if isinstance(a[k], torch.Tensor))

    def streamed(root, storage_options=None):
        ds = StreamingDataset(root, storage_options=storage_options, shuffle_buffer=8, seed=2)
        return [(int(item["index"]), item[KEY]) for item in ds]

    near, far = streamed(v30), streamed(url, options)
    assert [i for i, _ in far] == [i for i, _ in near]
    assert all(torch.equal(a, b) for (_, a), (_, b) in zip(far, near, strict=True))
    assert any(r.status == 206 for r in hub.requests if r.path.endswith(".mp4"))
    net_log.assert_only_local()


def test_the_standin_as_a_child_process_serves_buckets(v30, net_log, hf_client):
    from robopipe.bench.measure import SERVER_PIDS
    from robopipe.harness.hub_standin import serve_hub_process

    with serve_hub_process({"local/demo": {"main": v30}}, buckets={BUCKET: v30}) as hub:
        assert len(SERVER_PIDS) >= 1
        for url in (hub.bucket_url(BUCKET, "meta/info.json"), hub.url("local/demo", "main")):
            fs, path = fsspec.core.url_to_fs(url, endpoint=hub.endpoint)
            if url.endswith(".json"):
                assert fs.cat_file(path) == (v30 / "meta/info.json").read_bytes()
            else:
                assert fs.find(path) == [f"{path}/{p}" for p in _files(v30)]
    net_log.assert_only_local()

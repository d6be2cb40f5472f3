"""hf:// URLs (huggingface_hub's HfFileSystem) against the Hub stand-in, and the streaming
loader over a v3.0 dataset served as a Hub repo."""

import hashlib
import subprocess
import sys

import fsspec
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from robopipe.loading import StreamingDataset

KEY = "observation.images.wrist"
MP4 = f"videos/chunk-000/{KEY}/episode_000003.mp4"


def test_ls_info_find_and_range_reads(v21, hub_standin, net_log, hf_client):
    hub = hub_standin({"local/demo": {"v2.1": v21}}, page_size=4)
    options = {"endpoint": hub.endpoint}
    with fsspec.open(hub.url("local/demo", "v2.1", "meta/info.json"), **options) as f:
        assert f.read() == (v21 / "meta/info.json").read_bytes()

    fs, root = fsspec.core.url_to_fs(hub.url("local/demo", "v2.1"), **options)
    assert fs.ls(f"{root}/meta", detail=False) == [
        f"{root}/meta/{p.name}" for p in sorted((v21 / "meta").iterdir())
    ]
    local_files = sorted(p.relative_to(v21).as_posix() for p in v21.rglob("*") if p.is_file())
    assert fs.find(root) == [f"{root}/{p}" for p in local_files]  # over 4-entry pages
    assert fs.info(f"{root}/{MP4}")["size"] == (v21 / MP4).stat().st_size

    local = (v21 / MP4).read_bytes()
    with fs.open(f"{root}/{MP4}", block_size=512) as f:
        f.seek(len(local) // 2)
        middle = f.read(700)
        f.seek(-100, 2)
        tail = f.read()
    assert middle == local[len(local) // 2 : len(local) // 2 + 700]
    assert tail == local[-100:]
    ranged = [r for r in hub.requests if r.path.endswith(MP4)]
    assert ranged and all(r.status == 206 and r.range.startswith("bytes=") for r in ranged)
    net_log.assert_only_local()


def test_unknown_revision_is_file_not_found(v21, hub_standin, hf_client):
    hub = hub_standin({"local/demo": {"v2.1": v21}})
    with pytest.raises(FileNotFoundError, match="revision not found"):
        fsspec.open(hub.url("local/demo", "v9.9", "meta/info.json"), endpoint=hub.endpoint).open()


def test_hf_endpoint_from_the_environment(v21, hub_standin, net_log, tmp_path):
    """The way a job uses the stand-in: HF_ENDPOINT set before huggingface_hub is imported."""
    hub = hub_standin({"local/demo": {"v2.1": v21}})
    url = hub.url("local/demo", "v2.1", MP4)
    code = f"import fsspec, hashlib; print(hashlib.sha256(fsspec.open({url!r}).open().read())"
    code += ".hexdigest())"
    env = net_log.env(hub.client_env(tmp_path / "hf_home"))
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == hashlib.sha256((v21 / MP4).read_bytes()).hexdigest()
    net_log.assert_only_local()


def test_streaming_over_hf_yields_the_local_items(v30, hub_standin, net_log, hf_client):
    hub = hub_standin({"local/demo": {"v3.0": v30}})

    def items(url, storage_options=None):
        ds = StreamingDataset(url, storage_options=storage_options, shuffle_buffer=12, seed=1)
        batches = DataLoader(ds, batch_size=5, num_workers=2)
        return [(int(i), f) for b in batches for i, f in zip(b["index"], b[KEY], strict=True)]

    local = items(v30)
    remote = items(hub.url("local/demo", "v3.0"), {"endpoint": hub.endpoint})
    assert [i for i, _ in remote] == [i for i, _ in local]
    assert all(torch.equal(a, b) for (_, a), (_, b) in zip(remote, local, strict=True))
    assert np.unique([i for i, _ in remote]).size == len(local)
    assert len({p for p in (v30 / "videos" / KEY).rglob("*.mp4")}) >= 2  # videos roll over
    assert any(r.status == 206 for r in hub.requests if r.path.endswith(".mp4"))
    net_log.assert_only_local()

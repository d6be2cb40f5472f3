"""The stand-in answers as the Hub does where huggingface_hub depends on it."""

import http.client
import os
import subprocess
from urllib.parse import urlsplit

import pytest
from huggingface_hub import HfApi, hf_hub_download
from huggingface_hub.errors import RemoteEntryNotFoundError

from robopipe.harness.hub_standin import serve_folder_to_this_process

MP4 = "videos/chunk-000/observation.images.front/episode_000000.mp4"


def _head(endpoint: str, path: str, headers: dict | None = None) -> http.client.HTTPResponse:
    connection = http.client.HTTPConnection(urlsplit(endpoint).netloc, timeout=10)
    connection.request("HEAD", path, headers=headers or {})
    return connection.getresponse()


def test_resolve_headers_are_git_etag_commit_and_size_without_xet(v21, hub_standin):
    hub = hub_standin({"local/demo": {"v2.1": v21}})
    response = _head(hub.endpoint, f"/datasets/local/demo/resolve/v2.1/{MP4}")
    git_blob_id = subprocess.run(
        ["git", "hash-object", str(v21 / MP4)], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert response.status == 200
    assert response.headers["ETag"] == f'"{git_blob_id}"'
    assert response.headers["X-Repo-Commit"] == hub.sha("local/demo", "v2.1")
    assert int(response.headers["Content-Length"]) == (v21 / MP4).stat().st_size
    assert not [k for k in response.headers if k.lower().startswith("x-xet")]
    assert "Link" not in response.headers  # a rel="xet-auth" link would turn Xet on

    ranged = _head(
        hub.endpoint, f"/datasets/local/demo/resolve/v2.1/{MP4}", {"Range": "bytes=10-19"}
    )
    assert (ranged.status, ranged.headers["Content-Length"]) == (206, "10")


def test_commit_sha_is_a_revision_and_missing_files_are_entry_not_found(
    v21, hub_standin, hf_client, tmp_path
):
    hub = hub_standin({"local/demo": {"v2.1": v21}})
    api = HfApi(endpoint=hub.endpoint)
    sha = api.dataset_info("local/demo", revision="v2.1").sha
    assert sha == hub.sha("local/demo", "v2.1")
    info = api.dataset_info("local/demo", revision=sha)
    assert sorted(s.rfilename for s in info.siblings) == sorted(
        p.relative_to(v21).as_posix() for p in v21.rglob("*") if p.is_file()
    )
    with pytest.raises(RemoteEntryNotFoundError):
        hf_hub_download(
            "local/demo",
            "meta/absent.json",
            repo_type="dataset",
            revision="v2.1",
            endpoint=hub.endpoint,
            local_dir=tmp_path / "out",
        )


def test_served_bytes_count_ranges_and_whole_files(v21, hub_standin):
    hub = hub_standin({"local/demo": {"v2.1": v21}})
    _head(hub.endpoint, f"/datasets/local/demo/resolve/v2.1/{MP4}")  # a HEAD carries no body
    before = len(hub.requests)
    path = f"/datasets/local/demo/resolve/v2.1/{MP4}"
    for headers in ({"Range": "bytes=10-19"}, {}):
        connection = http.client.HTTPConnection(urlsplit(hub.endpoint).netloc, timeout=10)
        connection.request("GET", path, headers=headers)
        connection.getresponse().read()
    assert hub.served_bytes(hub.requests[before:]) == 10 + (v21 / MP4).stat().st_size
    assert hub.served_bytes(hub.requests[:before]) == 0


def test_a_folder_served_to_this_process_points_its_environment_there_and_back(v21, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "https://huggingface.co")
    monkeypatch.setenv("HF_HOME", "/nowhere/hf_home")
    with serve_folder_to_this_process(v21, "v2.1") as hub:
        assert os.environ["HF_ENDPOINT"] == hub.endpoint
        assert os.environ["HF_HOME"] != "/nowhere/hf_home"
        response = _head(hub.endpoint, f"/datasets/local/ds/resolve/v2.1/{MP4}")
        assert response.status == 200
        assert response.getheader("X-Linked-Size") == str((v21 / MP4).stat().st_size)  # LFS
    assert os.environ["HF_ENDPOINT"] == "https://huggingface.co"
    assert os.environ["HF_HOME"] == "/nowhere/hf_home"

"""robopipe.conversion.push against the Hub stand-in: lerobot's conventions over a v2.1 repo,
idempotence, refusal of another dataset, a killed push resumed."""

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from huggingface_hub import HfApi, snapshot_download

from robopipe.conversion.push import PushTarget, dataset_card, push_dataset
from robopipe.conversion.serial import convert_dataset
from robopipe.errors import DatasetError
from robopipe.loading import MapDataset

TOKEN = "hf_standin_token"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def token(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    return TOKEN


def test_push_over_a_v21_repo_tags_v30_and_keeps_v21(
    repo, v30, hub_standin, hf_client, token, net_log, tmp_path, file_tree, validation_of
):
    hub = hub_standin({"local/demo": {"main": repo, "v2.1": repo}}, token=token)
    old = hub.sha("local/demo", "v2.1")
    target = PushTarget(repo_id="local/demo", commit_message="v3.0 by robopipe")
    record = push_dataset(
        v30, target, name="hubds", validation=validation_of(v30), endpoint=hub.endpoint
    )

    card = dataset_card(
        json.loads((v30 / "meta/info.json").read_text()), "local/demo", "apache-2.0"
    )
    expected = {
        **file_tree(v30),
        "README.md": sha256(card.encode()),
        ".gitattributes": sha256((repo / ".gitattributes").read_bytes()),
    }
    assert hub.tree("local/demo", "v3.0") == dict(sorted(expected.items()))
    assert hub.sha("local/demo", "v3.0") == hub.sha("local/demo", "main") == record["revision"]
    assert hub.sha("local/demo", "v2.1") == old
    assert hub.tree("local/demo", "v2.1") == file_tree(repo)  # the old tree, still reachable
    assert record["commits"] == [record["revision"]] and record["tag"] == "v3.0"
    assert record["files"] == len(file_tree(v30)) and record["uploaded_files"] == len(expected) - 1
    assert record["deleted_files"] == sum(
        p.startswith(("data/", "videos/")) or p.endswith(".jsonl") for p in file_tree(repo)
    )
    api = HfApi(endpoint=hub.endpoint)
    assert api.list_repo_commits("local/demo", repo_type="dataset")[0].title == "v3.0 by robopipe"
    mp4 = next(p for p in file_tree(v30) if p.endswith(".mp4"))
    assert hub.repo("local/demo").resolve("v3.0").files[mp4].lfs  # negotiated LFS upload

    download = tmp_path / "download"
    snapshot_download(
        "local/demo",
        repo_type="dataset",
        revision="v3.0",
        local_dir=download,
        endpoint=hub.endpoint,
    )
    shutil.rmtree(download / ".cache")
    assert file_tree(download) == dict(sorted(expected.items()))
    pushed, local = MapDataset(str(download)), MapDataset(str(v30))
    assert len(pushed) == len(local)
    for i in (0, len(local) // 2, len(local) - 1):
        for key, value in local[i].items():
            assert np.array_equal(np.asarray(pushed[i][key]), np.asarray(value)), key

    writes = [r for r in hub.requests if r.method in ("POST", "PUT", "DELETE")]
    assert all(r.authorized for r in writes if not r.path.startswith("/lfs-upload/"))
    before = len(hub.requests)
    again = push_dataset(
        v30, target, name="hubds", validation=validation_of(v30), endpoint=hub.endpoint
    )
    assert again["revision"] == record["revision"] and again["commits"] == []
    assert again["uploaded_files"] == again["deleted_files"] == 0
    later = hub.requests[before:]
    assert not [r for r in later if r.method in ("PUT", "DELETE") or "/commit/" in r.path]
    assert not [r for r in later if "/tag/" in r.path]
    net_log.assert_only_local()


def test_a_repo_holding_another_dataset_is_refused_unless_overwrite(
    v21, v30, hub_standin, hf_client, token, tmp_path, file_tree, validation_of
):
    other = tmp_path / "other"
    convert_dataset(
        v21, other, name="other", video_file_size_in_mb=0.005, data_file_size_in_mb=0.001
    )
    assert file_tree(other) != file_tree(v30)
    hub = hub_standin({}, token=token)
    push = {"name": "hubds", "endpoint": hub.endpoint}
    push_dataset(
        v30, PushTarget(repo_id="me/ds", private=True), validation=validation_of(v30), **push
    )
    assert hub.repo("me/ds").private
    first = hub.sha("me/ds", "main")

    with pytest.raises(DatasetError) as refused:
        push_dataset(other, PushTarget(repo_id="me/ds"), validation=validation_of(other), **push)
    assert str(refused.value) == (
        "dataset 'hubds': push: hf://datasets/me/ds (branch main) already holds a different "
        "dataset; push it elsewhere, or set push.overwrite: true to replace it"
    )
    assert hub.sha("me/ds", "main") == hub.sha("me/ds", "v3.0") == first

    target = PushTarget(repo_id="me/ds", overwrite=True)
    record = push_dataset(other, target, validation=validation_of(other), **push)
    tree = hub.tree("me/ds", "v3.0")
    assert {p: d for p, d in tree.items() if p.split("/")[0] in ("meta", "data", "videos")} == (
        file_tree(other)
    )
    assert record["deleted_files"] == len(set(file_tree(v30)) - set(file_tree(other)))


def test_pr_and_branch(v30, hub_standin, hf_client, token, validation_of):
    hub = hub_standin({}, token=token)
    push = {"name": "hubds", "endpoint": hub.endpoint, "validation": validation_of(v30)}
    record = push_dataset(
        v30, PushTarget(repo_id="me/ds", branch="conv", files_per_commit=5), **push
    )
    assert validation_of(v30) == {"data_files": 1, "video_files": 8}
    assert len(record["commits"]) == 3  # 9 data and video files in 2 commits, then meta/
    assert hub.sha("me/ds", "conv") == hub.sha("me/ds", "v3.0") == record["commits"][-1]
    assert list(hub.tree("me/ds", "main")) == [".gitattributes"]  # main is untouched

    pr = push_dataset(v30, PushTarget(repo_id="me/ds", create_pr=True), **push)
    assert pr["pr_url"].endswith("/datasets/me/ds/discussions/1") and pr["tag"] is None
    assert hub.sha("me/ds", "refs/pr/1") == pr["revision"]
    assert hub.tree("me/ds", "refs/pr/1") == hub.tree("me/ds", "conv")
    assert list(hub.tree("me/ds", "main")) == [".gitattributes"]


def test_a_commit_that_fails_with_503_is_retried_once(v30, hub_standin, hf_client, validation_of):
    hub = hub_standin({})
    hub.fail_next("POST", "/commit/")
    push = {"name": "hubds", "endpoint": hub.endpoint, "validation": validation_of(v30)}
    record = push_dataset(v30, PushTarget(repo_id="me/ds"), **push)
    commits = [r for r in hub.requests if "/commit/" in r.path]
    assert [r.status for r in commits] == [503, 200]
    assert len(record["commits"]) == 1 and hub.sha("me/ds", "v3.0") == record["revision"]


def test_a_push_without_validation_of_these_files_is_refused(
    v30, hub_standin, hf_client, validation_of
):
    hub = hub_standin({})
    validation = {**validation_of(v30), "video_files": 1}
    with pytest.raises(DatasetError, match="its validation checked"):
        push_dataset(v30, PushTarget(repo_id="me/ds"), name="hubds", validation=validation)
    assert hub.requests == []


PUSH_SCRIPT = """
import json, sys
from robopipe.conversion.push import PushTarget, push_dataset
root, validation = sys.argv[1], json.loads(sys.argv[2])
record = push_dataset(root, PushTarget(repo_id="me/many"), name="many", validation=validation)
print(json.dumps(record))
"""


@pytest.fixture(scope="module")
def many(make_v21, tmp_path_factory):
    """A v3.0 dataset of 304 files: 100 episodes, each in its own data and video files."""
    source = make_v21(
        episodes=100, height=16, width=16, min_length=3, max_length=5, fps=10, codec="h264"
    )
    root = tmp_path_factory.mktemp("many") / "many"
    convert_dataset(
        source, root, name="many", data_file_size_in_mb=1e-6, video_file_size_in_mb=1e-6
    )
    return root


def test_a_killed_push_resumes_uploading_only_what_was_missing(
    many, hub_standin, net_log, tmp_path, file_tree, validation_of
):
    hub = hub_standin({}, token=TOKEN)
    env = net_log.env(hub.client_env(tmp_path / "hf_home", token=TOKEN))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [env.get("PYTHONPATH"), *sys.path]))
    command = [sys.executable, "-c", PUSH_SCRIPT, str(many), json.dumps(validation_of(many))]
    lfs = {sha256(p.read_bytes()) for p in many.rglob("*") if p.suffix in (".parquet", ".mp4")}
    assert len(lfs) > 300

    hub.hold_uploads_after(120)
    first = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while len(hub.uploads()) < 120 and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    hub.release()
    done = hub.uploads()
    assert len(done) == 120
    assert len(hub.repo("me/many").commits) == 1  # the initial commit only: nothing committed

    second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr
    resumed = hub.uploads()[len(done) :]
    assert set(resumed) == lfs - set(done) and len(resumed) == len(set(resumed))
    tree = hub.tree("me/many", "v3.0")
    assert {p: d for p, d in tree.items() if p.split("/")[0] in ("meta", "data", "videos")} == (
        file_tree(many)
    )
    net_log.assert_only_local()

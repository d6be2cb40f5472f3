"""A Hub push at scale (issue 22, "Push at scale"): 50,000 files pushed to the stand-in by
``robopipe.conversion.push`` in a subprocess, killed midway and run again. The rerun finishes
the dataset, no file is uploaded twice over both runs, and both runs together make
``ceil(files / files_per_commit) + 1`` commits, ``meta/`` in the last.

The 50,000-file case is marked slow (about 60 s on an idle 2-core machine, several minutes on
a loaded one); the 2,000-file case runs the same checks in a few seconds.
"""

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from robopipe.conversion.push import LocalFile, _addition, _batches, hash_files

TOKEN = "hf_standin_token"
REPO = "me/large"
CAMERA = "observation.images.cam"
CHUNK_FILES = 1000  # files per chunk folder, as lerobot's layout (chunks_size)

PUSH_SCRIPT = """
import json, sys
from robopipe.conversion.push import PushTarget, push_dataset
root, validation, per_commit = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
target = PushTarget(repo_id="me/large", files_per_commit=per_commit)
print(json.dumps(push_dataset(root, target, name="large", validation=validation)))
"""


def make_dataset(root: Path, files: int) -> dict[str, int]:
    """A v3.0-shaped folder of ``files`` tiny data and video files (half each, 1,000 per chunk
    folder) and a ``meta/``; returns its validation counts (what the push checks). Each file's
    bytes are its own, so each is one LFS object."""
    (root / "meta/episodes/chunk-000").mkdir(parents=True)
    info = {"codebase_version": "v3.0", "fps": 10, "total_episodes": files // 2}
    (root / "meta/info.json").write_text(json.dumps(info))
    (root / "meta/stats.json").write_text("{}")
    (root / "meta/tasks.parquet").write_bytes(b"PAR1\0tasks")
    (root / "meta/episodes/chunk-000/file-000.parquet").write_bytes(b"PAR1\0episodes")
    counts = {"data_files": files // 2, "video_files": files - files // 2}
    kinds = [("data", "parquet", counts["data_files"])]
    kinds.append((f"videos/{CAMERA}", "mp4", counts["video_files"]))
    for top, ext, count in kinds:
        for i in range(count):
            chunk, index = divmod(i, CHUNK_FILES)
            folder = root / top / f"chunk-{chunk:03d}"
            if index == 0:
                folder.mkdir(parents=True)
            (folder / f"file-{index:03d}.{ext}").write_bytes(b"\0%s %d" % (ext.encode(), i))
    return counts


@pytest.mark.parametrize(
    "bulk, last, size", [(0, 3, 5), (5, 0, 5), (4, 1, 5), (6, 2, 5), (50_000, 5, 10_000)]
)
def test_commits_are_at_most_ceil_files_over_files_per_commit_plus_one(bulk, last, size):
    batches = _batches(list(range(bulk)), [-1 - i for i in range(last)], size)
    assert len(batches) <= math.ceil(bulk / size) + 1
    assert [x for batch in batches for x in batch] == [*range(bulk), *(-1 - i for i in range(last))]
    assert all(len(batch) <= size for batch in batches[:-1])
    if len(batches) > 1:  # meta/, the card and the deletions in the last commit, alone
        assert batches[-1] == [-1 - i for i in range(last)]


def test_files_are_hashed_once_for_the_comparison_and_the_upload(tmp_path):
    files = {f"data/{i}.parquet": tmp_path / f"{i}.parquet" for i in range(20)}
    for i, path in enumerate(files.values()):
        path.write_bytes(b"\0%d" % i)
    local = hash_files(files, threads=4)
    assert local == {p: LocalFile.hash(path) for p, path in files.items()}
    assert list(local) == list(files)
    given = LocalFile(files["data/0.parquet"], 2, "ab" * 32, "")  # not the file's sha256
    addition = _addition(given, "data/0.parquet")
    assert addition.upload_info.sha256 == bytes.fromhex("ab" * 32)  # taken, not read again


@pytest.mark.parametrize(
    "files, per_commit",
    [
        pytest.param(2_000, 500, id="2k"),
        pytest.param(50_000, 10_000, id="50k", marks=pytest.mark.slow),
    ],
)
def test_a_push_killed_and_rerun_uploads_each_file_once_in_bounded_commits(
    files, per_commit, fast_tmp, hub_standin, net_log, tmp_path, file_tree
):
    root = fast_tmp / "large"
    validation = make_dataset(root, files)
    expected = file_tree(root)
    lfs = {digest for path, digest in expected.items() if not path.endswith(".json")}
    assert len(lfs) == files + 2  # the data and video files, meta/'s two parquet files

    hub = hub_standin({}, token=TOKEN, storage_dir=fast_tmp)
    env = net_log.env(hub.client_env(tmp_path / "hf_home", token=TOKEN))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [env.get("PYTHONPATH"), *sys.path]))
    command = [sys.executable, "-c", PUSH_SCRIPT, str(root), json.dumps(validation)]
    command.append(str(per_commit))

    # killed in the third batch's uploads: two commits of data and video files made
    kill_after = 2 * per_commit + per_commit // 2
    hub.hold_uploads_after(kill_after)
    start = time.monotonic()
    with open(tmp_path / "first.err", "wb") as err:
        first = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=err)
        deadline = start + 600
        while hub.upload_count() < kill_after and first.poll() is None:
            assert time.monotonic() < deadline, "the first push made no progress"
            time.sleep(0.05)
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    killed_at = time.monotonic() - start
    hub.release()
    assert hub.upload_count() == kill_after, (tmp_path / "first.err").read_text()
    half = hub.tree(REPO, "main")
    assert sum(p.startswith(("data/", "videos/")) for p in half) == 2 * per_commit
    assert not [p for p in half if p.startswith("meta/")]  # never looks like a dataset
    assert "v3.0" not in hub.repo(REPO).tags
    assert len(hub.repo(REPO).commits) == 1 + 2  # the repo's initial commit, two batches

    second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr
    record = json.loads(second.stdout)
    uploads = hub.uploads()
    assert len(uploads) == len(set(uploads))  # no file uploaded twice, over both runs
    assert set(uploads) == lfs
    bound = math.ceil(files / per_commit) + 1
    assert len(hub.repo(REPO).commits) == 1 + bound
    assert len(record["commits"]) == bound - 2
    assert record["uploaded_files"] == files + 4 + 1 - 2 * per_commit  # + meta/, README.md
    tree = hub.tree(REPO, "v3.0")
    assert {p: d for p, d in tree.items() if p.split("/")[0] in ("meta", "data", "videos")} == (
        expected
    )
    assert hub.sha(REPO, "v3.0") == hub.sha(REPO, "main") == record["revision"]
    net_log.assert_only_local()
    print(
        f"\n{files + 4} files, {files // per_commit} x {per_commit} per commit: first push "
        f"killed after {kill_after} uploads at {killed_at:.1f} s; rerun {record['seconds']} s, "
        f"{record['uploaded_files']} files uploaded; {bound} commits in all"
    )

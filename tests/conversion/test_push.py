"""robopipe.conversion.push to fsspec URLs: a local folder and moto's S3 server on 127.0.0.1.
(The Hub is tested against its stand-in in tests/hub/test_hub_push.py.)"""

import hashlib
from types import SimpleNamespace

import pytest

from robopipe.conversion.push import PushTarget, _with_retries, push_dataset
from robopipe.conversion.serial import convert_dataset
from robopipe.errors import DatasetError


@pytest.fixture(scope="module")
def datasets(make_v21, tmp_path_factory):
    """Two v3.0 datasets of the same source, cut into files differently."""
    source = make_v21(episodes=6, cameras=2, fps=10, min_length=12, max_length=30)
    root = tmp_path_factory.mktemp("push")
    convert_dataset(source, root / "tiny", name="tiny", video_file_size_in_mb=0.02)
    convert_dataset(source, root / "other", name="other", video_file_size_in_mb=0.01)
    return root / "tiny", root / "other"


@pytest.fixture
def push(validation_of):
    """``push(root, url, **target options) -> push.json record``."""

    def run(root, url, **options):
        target = PushTarget(url=str(url), **options)
        return push_dataset(root, target, name="tiny", validation=validation_of(root))

    return run


def test_folder_push_is_idempotent_and_resumes_by_size(push, datasets, tmp_path, file_tree):
    tiny, other = datasets
    target = tmp_path / "bucket" / "tiny"
    record = push(tiny, target)
    assert file_tree(target) == file_tree(tiny)
    assert record["uploaded_files"] == record["files"] == len(file_tree(tiny))
    assert record["uploaded_bytes"] == record["bytes"]
    assert (record["target"], record["revision"]) == (str(target), None)

    again = push(tiny, target)
    assert again["uploaded_files"] == again["deleted_files"] == 0

    mp4 = next(p for p in file_tree(tiny) if p.endswith(".mp4"))
    (target / mp4).write_bytes((tiny / mp4).read_bytes()[:100])  # as a killed copy leaves it
    (target / "data/chunk-000/file-000.parquet").unlink()
    (target / "data/chunk-000/file-009.parquet").write_bytes(b"left over")
    resumed = push(tiny, target)
    assert (resumed["uploaded_files"], resumed["deleted_files"]) == (2, 1)
    assert file_tree(target) == file_tree(tiny)


def test_another_dataset_is_refused_unless_overwrite(push, datasets, tmp_path, file_tree):
    tiny, other = datasets
    target = tmp_path / "tiny"
    push(tiny, target)
    with pytest.raises(DatasetError) as refused:
        push(other, target)
    assert str(refused.value) == (
        f"dataset 'tiny': push: {target} already holds a different dataset; push it "
        "elsewhere, or set push.overwrite: true to replace it"
    )
    assert file_tree(target) == file_tree(tiny)
    push(other, target, overwrite=True)
    assert file_tree(target) == file_tree(other)


def test_s3_push(push, datasets, s3_server, file_tree):
    tiny, _ = datasets
    url = s3_server.url("datasets/tiny")
    record = push(tiny, url, storage_options=s3_server.storage_options)
    fs, prefix = s3_server.fs, f"{s3_server.bucket}/datasets/tiny"
    pushed = {
        path[len(prefix) + 1 :]: hashlib.sha256(fs.cat_file(path)).hexdigest()
        for path in fs.find(prefix)
    }
    assert pushed == file_tree(tiny)

    def puts():
        return [r for r in s3_server.requests() if r.startswith(f"PUT /{prefix}/")]

    assert len(puts()) == record["uploaded_files"] == len(pushed)
    before = puts()
    again = push(tiny, url, storage_options=s3_server.storage_options)
    assert again["uploaded_files"] == 0 and puts() == before


class _Flaky:
    """A push that raises each error of ``errors`` in turn, then returns "done"."""

    def __init__(self, *errors):
        self.errors, self.calls = list(errors), 0

    def __call__(self):
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"


@pytest.fixture
def sleeps(monkeypatch):
    """The waits between attempts, in seconds (nothing actually sleeps)."""
    waits = []
    monkeypatch.setattr("time.sleep", waits.append)
    return waits


def _hub_error(message: str, status: int):
    """The Hub client's HTTP error with a response of ``status`` (whatever HTTP library the
    installed huggingface_hub builds its responses with)."""
    from huggingface_hub.errors import HfHubHTTPError

    error = HfHubHTTPError.__new__(HfHubHTTPError)
    Exception.__init__(error, message)
    error.response = SimpleNamespace(status_code=status)
    return error


def test_transient_errors_are_retried_with_growing_waits(sleeps, caplog):
    push = _Flaky(ConnectionError("reset"), TimeoutError("slow"), _hub_error("busy", 503))
    with caplog.at_level("WARNING", logger="robopipe.conversion.push"):
        assert _with_retries(PushTarget(url="s3://b/x", retries=3), push) == "done"
    assert (push.calls, sleeps) == (4, [1, 2, 4])
    assert [r.getMessage() for r in caplog.records] == [
        "push to s3://b/x: reset; retrying in 1 s",
        "push to s3://b/x: slow; retrying in 2 s",
        "push to s3://b/x: busy; retrying in 4 s",
    ]


def test_other_errors_are_not_retried(sleeps):
    for error in (ValueError("bad"), _hub_error("forbidden", 403)):
        push = _Flaky(error)
        with pytest.raises(type(error)) as raised:
            _with_retries(PushTarget(url="s3://b/x"), push)
        assert raised.value is error and push.calls == 1 and sleeps == []


def test_retries_stop_at_the_targets_count_with_waits_capped(sleeps):
    errors = [ConnectionError(f"lost {i}") for i in range(9)]
    push = _Flaky(*errors)
    with pytest.raises(ConnectionError) as raised:
        _with_retries(PushTarget(url="s3://b/x", retries=7), push)
    assert raised.value is errors[7] and push.calls == 8
    assert sleeps == [1, 2, 4, 8, 16, 30, 30]
    push = _Flaky(ConnectionError("lost"))
    with pytest.raises(ConnectionError):
        _with_retries(PushTarget(url="s3://b/x", retries=0), push)
    assert push.calls == 1

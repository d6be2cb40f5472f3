"""The local copy of a remote v3.0 dataset: fetched whole over plain http (nginx lists no
folders: the files its metadata names are fetched), byte for byte, checked, moved into place;
a rerun after an interruption fetches only what it lacks; a copy that fails the check is not
moved in; faults on the way are retried (robopipe.retry), and give up after the budget's
attempts."""

import re
import shutil

import pytest

from robopipe.bench import servers
from robopipe.bench.latency import Faults, delaying_proxy
from robopipe.bench.servers import serve_nginx
from robopipe.conversion.serial import convert_dataset
from robopipe.errors import DatasetError
from robopipe.local_copy import make_local_copy, remote_files
from robopipe.retry import RemoteReadError, RetryBudget, retries

pytestmark = pytest.mark.skipif(servers.nginx_binary() is None, reason="nginx is not installed")


@pytest.fixture(scope="module")
def v30(make_v21, tmp_path_factory):
    root = tmp_path_factory.mktemp("local_copy") / "ds"
    convert_dataset(make_v21(episodes=3), root, name="ds")
    return root


def test_a_copy_over_plain_http_resumes_and_is_checked(v30, tmp_path, file_tree):
    dest = tmp_path / "copy"
    staging = tmp_path / ".copy.download"
    kept = "data/chunk-000/file-000.parquet"  # an earlier run's
    (staging / kept).parent.mkdir(parents=True)
    shutil.copyfile(v30 / kept, staging / kept)
    with serve_nginx(v30.parent) as server:
        log = server.prefix / "access.log"
        # no file list given: its metadata names every file (nginx lists none)
        report = make_local_copy(f"{server.url}/ds", "ds", dest)
        fetched = set(re.findall(r'"GET (\S+) ', log.read_text()))
    assert report.ok and file_tree(dest) == file_tree(v30)  # every file, byte for byte
    assert not staging.exists()
    assert f"/ds/{kept}" not in fetched  # kept from the interrupted run
    assert "/ds/meta/stats.json" in fetched and any(f.endswith(".mp4") for f in fetched)


def test_a_copy_that_fails_the_check_is_not_moved_in(v30, tmp_path):
    served = tmp_path / "served" / "ds"
    shutil.copytree(v30, served)
    victim = sorted(served.glob("videos/*/*/*.mp4"))[0]
    victim.write_bytes(victim.read_bytes()[:1000])
    with (
        serve_nginx(served.parent) as server,
        pytest.raises(DatasetError, match="fails the check"),
    ):
        make_local_copy(f"{server.url}/ds", "ds", tmp_path / "copy")
    assert not (tmp_path / "copy").exists()
    assert (tmp_path / ".copy.download" / victim.relative_to(served)).is_file()  # kept


def test_a_copy_through_faults_is_complete_and_checked(v30, tmp_path, file_tree):
    budget = RetryBudget(attempts=30, seconds=60, read_timeout_s=0.5)
    faults = Faults(0.5, stall_s=1.5, retry_after_s=0, seed=1)  # every kind
    with serve_nginx(v30.parent) as server:
        with delaying_proxy(server.url, 0, faults) as proxy:
            url = f"{proxy.url}/ds"
            before = retries()
            report = make_local_copy(url, "ds", tmp_path / "copy", retry_budget=budget)
            retried = retries() - before
            injected = {k: v for k, v in proxy.totals().items() if k.startswith("faults_") and v}
        with delaying_proxy(server.url) as counting:
            remote_files(f"{counting.url}/ds")
            listing = counting.totals()["requests"]
        # every request after the metadata, the listing and the sizes fails: the first
        # download gives up
        with (
            delaying_proxy(server.url, 0, Faults(1.0, ("503",), start_after=listing)) as failing,
            pytest.raises(RemoteReadError) as caught,
        ):
            copy = tmp_path / "given_up"
            one = RetryBudget(attempts=1)
            make_local_copy(f"{failing.url}/ds", "ds", copy, retry_budget=one)
    assert report.ok and file_tree(tmp_path / "copy") == file_tree(v30)
    # some faults end inside fsspec (a HEAD retried as a GET, nginx's missing listing)
    assert len(injected) == 5 and retried > 0, (injected, retried)
    line = str(caught.value)
    assert "\n" not in line and line.startswith(f"{failing.url}/ds/")
    assert "gave up after 1 attempts" in line and "ClientResponseError: 503" in line

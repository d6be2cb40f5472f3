"""The v3.0 check and a remote v3.0 source's files through injected faults
(robopipe.bench.latency.Faults between the client and a server on 127.0.0.1): the existence
tests and listings (``isdir``, ``exists``, ``glob``, ``find``) are retried as the reads are
(robopipe.retry), so the check of a faulty server gives the fault-free report; a budget of one
attempt stops it with one line naming the URL and the last error, wherever the read that gives
up is (a network give-up is never reported as an unreadable file, a damaged file still is). A
remote v3.0 source names its files by its metadata, so a plain http server (nginx lists no
folder) has them all."""

import shutil
from collections import Counter

import pytest

from robopipe.bench import servers
from robopipe.bench.latency import Faults, delaying_proxy
from robopipe.checks import v30 as v30_check
from robopipe.checks.v30 import check_v30
from robopipe.conversion.serial import convert_dataset
from robopipe.formats import v30_reader
from robopipe.formats.v30_reader import open_url
from robopipe.retry import RemoteReadError, RetryBudget, retries
from robopipe.sources import LocalV30, RemoteV30, open_source

BUDGET = RetryBudget(attempts=30, seconds=60, read_timeout_s=0.5)
# huggingface_hub's clients wait HF_HUB_DOWNLOAD_TIMEOUT (10 s) for a stalled response, so the
# Hub's faults are the four kinds that end at once
HUB_KINDS = ("429", "503", "reset", "truncate")
NGINX_SEED = 13  # its draws fault isdir, glob and find of the check over nginx (asserted)
HUB_SEED = 3  # its draws fault the source's existence tests and reads (asserted)
LISTINGS = ("isdir", "info", "glob", "find")
METADATA_READS = ("info", "cat_file")  # a remote v3.0 source's: exists() and cat_file()
DATA = "data/chunk-000/file-000.parquet"
EPISODES = "meta/episodes/chunk-000/file-000.parquet"
TASKS = "meta/tasks.parquet"

needs_nginx = pytest.mark.skipif(servers.nginx_binary() is None, reason="nginx is not installed")


@pytest.fixture(scope="module")
def v30(make_v21, tmp_path_factory):
    """A 4-episode v3.0 dataset of several data and video files (so listings find several)."""
    root = tmp_path_factory.mktemp("v30_faults") / "ds"
    sizes = dict(data_file_size_in_mb=0.001, video_file_size_in_mb=0.001)
    convert_dataset(make_v21(episodes=4), root, name="ds", **sizes)
    return root


@pytest.fixture
def hub(v30, monkeypatch):
    """The Hub stand-in serving ``v30`` as repo ``local/ds`` at revision ``v3.0``."""
    from huggingface_hub import constants

    from robopipe.harness.hub_standin import serve_hub

    monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", True)
    with serve_hub({"local/ds": {"v3.0": v30}}) as standin:
        yield standin


class FailedCalls:
    """Counts, per method name, the calls of ``fs``'s ``methods`` that raised (each a fault
    that reached the caller: retried or not)."""

    def __init__(self, fs, methods) -> None:
        self.counts: Counter = Counter()
        for name in methods:
            setattr(fs, name, self._counted(name, getattr(fs, name)))

    def _counted(self, name, method):
        def call(*args, **kwargs):
            try:
                return method(*args, **kwargs)
            except Exception:
                self.counts[name] += 1
                raise

        return call


@needs_nginx
def test_the_check_retries_its_listings_through_faults(v30):
    local = check_v30(v30, "ds")
    assert local.ok, local.summary()
    faults = Faults(0.4, stall_s=1.5, retry_after_s=0, seed=NGINX_SEED)
    with (
        servers.serve_nginx(v30.parent) as server,
        delaying_proxy(server.url, 0, faults) as proxy,
    ):
        fs, root = open_url(f"{proxy.url}/ds", {"skip_instance_cache": True}, BUDGET)
        failed = FailedCalls(fs, LISTINGS)
        before = retries()
        report = check_v30(root, "ds", fs=fs, retry_budget=BUDGET)
        injected = {k: v for k, v in proxy.totals().items() if k.startswith("faults_") and v}
    assert report.ok, report.summary()
    assert report.files.keys() == local.files.keys()
    assert [f[0] for f in report.files.values()] == [f[0] for f in local.files.values()]
    assert report.notes == local.notes
    assert len(injected) == 5 and retries() - before >= sum(failed.counts.values())
    # faults reached the existence test of the folder, the data files' glob and the stray
    # files' find (nginx lists no folder: both find nothing, once they get an answer)
    assert {"isdir", "glob", "find"} <= set(failed.counts), (failed.counts, injected)


@needs_nginx
@pytest.mark.parametrize("kind", ["503", "stall"])
def test_a_budget_of_one_attempt_stops_the_check_with_one_line(v30, kind):
    budget = RetryBudget(attempts=1, seconds=60, read_timeout_s=0.5)
    with (
        servers.serve_nginx(v30.parent) as server,
        delaying_proxy(server.url, 0, Faults(1.0, (kind,), stall_s=2.0)) as proxy,
    ):
        url = f"{proxy.url}/ds"
        with pytest.raises(RemoteReadError) as caught:
            check_v30(url, "ds", retry_budget=budget)
    message = str(caught.value)
    assert "\n" not in message
    # the first request: the existence test of the dataset's folder
    assert message.startswith(f"{url}: gave up after 1 attempts in ")
    assert "(budget 1 attempts, 60 s): " in message


@pytest.fixture(scope="module")
def reads_at(v30):
    """``{(file, n): requests}``: the requests the check of ``v30`` over nginx makes before its
    ``n``-th read of ``file`` (1: the first) begins, for every parquet and mp4 it reads
    (counted by a fault-free proxy; one thread, so the requests come in one order)."""
    starts: dict[tuple[str, int], int] = {}
    seen: Counter = Counter()
    with (
        servers.serve_nginx(v30.parent) as server,
        delaying_proxy(server.url) as proxy,
        pytest.MonkeyPatch.context() as patch,
    ):

        def note(rel: str) -> None:
            seen[rel] += 1
            starts[rel, seen[rel]] = proxy.totals()["requests"]

        def open_noted(checker, rel):
            note(rel)
            return opened(checker, rel)

        def read_tasks_noted(meta):
            note(TASKS)
            return read_tasks(meta)

        opened, read_tasks = v30_check._Checker.open, v30_check.read_tasks
        patch.setattr(v30_check._Checker, "open", open_noted)
        patch.setattr(v30_check, "read_tasks", read_tasks_noted)
        report = check_v30(f"{proxy.url}/ds", "ds")
    assert report.ok, report.summary()
    return starts


@needs_nginx
@pytest.mark.parametrize(
    "rel, n",
    [
        (EPISODES, 1),  # the episodes' columns
        (TASKS, 1),  # the tasks
        (DATA, 1),  # a data file's footer
        (DATA, 2),  # its small columns
        ("video", 1),  # an mp4's header
    ],
)
def test_a_read_that_gives_up_stops_the_check_not_a_problem(v30, reads_at, rel, n):
    if rel == "video":
        rel = min(r for r, _ in reads_at if r.endswith(".mp4"))
    # its faults are 503s, which end at once: a generous read timeout keeps a slow answer of a
    # loaded machine before the faulted read from giving up first (CI: 0.8 s on the root)
    budget = RetryBudget(attempts=1, seconds=60, read_timeout_s=10)
    # every request from that read on fails: its first request gives up at once
    faults = Faults(1.0, ("503",), start_after=reads_at[rel, n])
    with (
        servers.serve_nginx(v30.parent) as server,
        delaying_proxy(server.url, 0, faults) as proxy,
        pytest.raises(RemoteReadError) as caught,
    ):
        check_v30(f"{proxy.url}/ds", "ds", retry_budget=budget)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{proxy.url}/ds/{rel}: gave up after 1 attempts in "), message
    assert "(budget 1 attempts, 60 s): " in message


@needs_nginx
def test_a_damaged_remote_data_file_is_still_a_problem(v30, tmp_path):
    served = tmp_path / "ds"
    shutil.copytree(v30, served)
    victim = served / DATA
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])  # no footer
    with servers.serve_nginx(tmp_path) as server:
        report = check_v30(f"{server.url}/ds", "ds", retry_budget=BUDGET)
    unreadable = [p for p in report.problems if p.kind == "unreadable_file"]
    assert unreadable and {p.file for p in unreadable} == {DATA}, report.summary()
    assert all("unreadable parquet" in p.message for p in unreadable)


@needs_nginx
def test_a_remote_v30_source_over_plain_http_names_its_files(v30):
    expected = LocalV30("ds", {"path": str(v30)}).files()
    assert len(expected[0]) > 1 and len(expected[1]) > 1
    with servers.serve_nginx(v30.parent) as server:  # nginx lists no folder
        source = open_source("ds", {"url": f"{server.url}/ds"})
        assert type(source) is RemoteV30
        assert source.files() == expected
        log = server.prefix / "access.log"
        before = len(log.read_text())
        assert source.files() == expected  # read once
        assert log.read_text()[before:] == ""


def _remote_source(endpoint: str, **conversion) -> RemoteV30:
    """The Hub stand-in's ``local/ds`` at ``v3.0`` as a source (its version named by its
    revision: opening it reads nothing), read at ``endpoint`` with ``conversion`` options."""
    entry = {
        "repo_id": "local/ds",
        "revision": "v3.0",
        "storage_options": {"endpoint": endpoint, "skip_instance_cache": True},
        "conversion": conversion,
    }
    source = open_source("ds", entry)
    assert type(source) is RemoteV30
    return source


def test_a_remote_v30_sources_files_are_read_within_its_budget(v30, hub, monkeypatch):
    expected = LocalV30("ds", {"path": str(v30)}).files()
    assert expected[0] and expected[1]
    reads = []

    def spied(*args):
        fs, root = open_url(*args)
        reads.append(FailedCalls(fs, METADATA_READS))
        return fs, root

    monkeypatch.setattr(v30_reader, "open_url", spied)
    faults = Faults(0.5, HUB_KINDS, retry_after_s=0, seed=HUB_SEED)
    with delaying_proxy(hub.endpoint, 0, faults) as proxy:
        source = _remote_source(proxy.url, retry_attempts=30, retry_seconds=60)
        assert source.files() == expected
        injected = {k: v for k, v in proxy.totals().items() if k.startswith("faults_") and v}
    failed = reads[0].counts
    assert injected and set(failed) == set(METADATA_READS), (failed, injected)
    # the source's own budget: one attempt
    with (
        delaying_proxy(hub.endpoint, 0, Faults(1.0, ("503",))) as proxy,
        pytest.raises(RemoteReadError) as caught,
    ):
        _remote_source(proxy.url, retry_attempts=1).files()
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("datasets/local/ds@v3.0/meta/info.json: gave up after 1 attempts")
    assert "HfHubHTTPError: " in message

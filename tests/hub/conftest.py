"""Fixtures for the Hub tests: the stand-in Hub server, a network log, demo datasets.

``hub_standin(repos, page_size=1000) -> HubStandin``
    Starts :mod:`robopipe.harness.hub_standin`'s server on a free port of 127.0.0.1 serving
    ``repos`` ({repo id: {revision: folder}}); every server started is stopped at teardown.
``net_log``
    Logs the hosts this process and its subprocesses resolve or connect to
    (``tests/hub/netaudit/sitecustomize.py``); ``net_log.env(env)`` adds it to a
    subprocess's environment, ``net_log.assert_only_local()`` checks what was logged.
``fast_tmp``
    A temporary folder on tmpfs (``/dev/shm``) where there is one, else ``tmp_path``: for
    tests that write tens of thousands of small files.
``repo``
    ``v21`` as a Hub repo holds it: plus a ``README.md`` and a ``.gitattributes``.
``v21`` / ``v30``
    A small v2.1 demo dataset (8 episodes, 2 cameras) and its v3.0 conversion, whose videos
    roll over into several files (the same source as tests/loading's ``rollover``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from robopipe.conversion.serial import convert_dataset
from robopipe.harness.hub_standin import serve_hub

NETAUDIT = Path(__file__).parent / "netaudit"
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}


@pytest.fixture
def hub_standin():
    """Factory ``hub_standin(repos, page_size=...) -> HubStandin``; servers stop at teardown."""
    with contextlib.ExitStack() as stack:
        yield lambda repos, **kwargs: stack.enter_context(serve_hub(repos, **kwargs))


class NetLog:
    """The hosts logged by the audit hook into ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def env(self, env: dict[str, str]) -> dict[str, str]:
        """``env`` plus what makes a subprocess log its connections here."""
        pythonpath = os.pathsep.join(filter(None, [str(NETAUDIT), env.get("PYTHONPATH")]))
        return {**env, "PYTHONPATH": pythonpath, "ROBOPIPE_NET_LOG": str(self.path)}

    def hosts(self) -> set[str]:
        if not self.path.exists():
            return set()
        return {line.split()[1] for line in self.path.read_text().splitlines()}

    def assert_only_local(self) -> None:
        """Hosts were contacted, all of them on this machine."""
        hosts = self.hosts()
        assert "127.0.0.1" in hosts and hosts <= LOCAL_HOSTS, f"hosts contacted: {hosts}"


@pytest.fixture
def net_log(tmp_path, monkeypatch) -> NetLog:
    """Log this process's (and its subprocesses') network use for the test's duration."""
    spec = importlib.util.spec_from_file_location("netaudit", NETAUDIT / "sitecustomize.py")
    spec.loader.exec_module(importlib.util.module_from_spec(spec))  # installs the hook once
    log = NetLog(tmp_path / "net.log")
    monkeypatch.setenv("ROBOPIPE_NET_LOG", str(log.path))
    return log


@pytest.fixture
def hf_client(tmp_path, monkeypatch) -> Path:
    """An in-process huggingface_hub client that contacts no host but the endpoint it is
    given: telemetry off, Xet off (the stand-in serves LFS uploads) and a temporary cache
    (yielded; it holds the refs snapshot_download records). huggingface_hub reads
    HF_HUB_DISABLE_TELEMETRY, HF_HUB_DISABLE_XET and HF_HOME when imported, so its module
    constants are patched. With telemetry on, building the user agent fetches
    ``{constants.ENDPOINT}/api/agent-harnesses`` (utils/_detect_agent.py:196): huggingface.co
    unless HF_ENDPOINT was set before the import."""
    from huggingface_hub import constants

    cache = tmp_path / "hf_home" / "hub"
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", True)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
    return cache


@pytest.fixture
def fast_tmp(tmp_path) -> Iterator[Path]:
    """A temporary folder in RAM (``/dev/shm``) if there is one, else ``tmp_path``."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path
        return
    with tempfile.TemporaryDirectory(prefix="robopipe-test-", dir=shm) as folder:
        yield Path(folder)


@pytest.fixture
def repo(v21, tmp_path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(v21, root)
    (root / "README.md").write_text("---\nlicense: apache-2.0\n---\n")
    (root / ".gitattributes").write_text("*.mp4 filter=lfs diff=lfs merge=lfs -text\n")
    return root


@pytest.fixture(scope="session")
def v21(make_v21) -> Path:
    return make_v21(episodes=8, cameras=2, fps=10, min_length=12, max_length=30)


@pytest.fixture(scope="session")
def v30(v21, tmp_path_factory) -> Path:
    output = tmp_path_factory.mktemp("hub_v30") / "hubds"
    convert_dataset(v21, output, name="hubds", video_file_size_in_mb=0.02)
    return output

"""Fixtures shared by the whole test suite.

``make_v21``
    Session-scoped factory of small LeRobot v2.1 datasets written by
    :func:`robopipe.demo.generate_demo`. Call it with keyword arguments; datasets are cached
    per argument set for the whole session, so tests that ask for the same parameters share
    one dataset (treat it as read-only; copy it before changing it)::

        def test_x(make_v21):
            root = make_v21(episodes=6, cameras=2, height=32, width=48,
                            min_length=10, max_length=30, codec="libsvtav1", fps=30, seed=0)

    Returns the dataset's root ``Path``. ``cameras`` is a tuple of video keys or a number of
    cameras: 1 and 2 give the demo's own keys (``observation.images.front``, then
    ``observation.images.wrist``), more add ``observation.images.cam2``, ``...cam3``, ...
    The defaults are the ones shown above; every other ``generate_demo`` keyword (``tasks``,
    ``preset``) is passed through.

``snakemake_cmd`` / ``run_snakemake`` / ``file_tree``
    The real workflow run in a scratch working directory: ``snakemake -s <repo>/Snakefile
    -d <workdir> --configfile <workdir>/config.yaml ARGS`` (the default config is merged
    under the given one). ``file_tree(root)`` maps every file under a folder to the SHA-256
    of its bytes, to compare two outputs.

``validation_of``
    ``validation_of(root)``: the data and video file counts that the validate step writes for
    a v3.0 folder (what ``robopipe.conversion.push`` checks before it pushes).

``s3_server``
    A moto S3 server on 127.0.0.1 with one empty bucket: ``.url(path)`` is
    ``s3://<bucket>/<path>``, ``.storage_options`` what s3fs needs to reach it, ``.fs`` an
    s3fs file system on it, ``.requests()`` the request lines it has served
    (``"GET /<bucket>/<key> HTTP/1.1"``).

``small_source`` (with ``cr5_small`` and ``demo_small``)
    A private copy (``tmp_path/src``, real file copies, never links, so that damaging it cannot
    touch the original) of a small v2.1 dataset to damage, parametrised over 4 episodes of the
    real cr5 recording (skipped where ``../shared`` is absent) and 4 generated demo episodes.

``shared_datasets``
    The folder of real datasets, ``../shared/datasets`` relative to the repository root, as
    a resolved ``Path``; the test is skipped when that folder is absent (a fresh clone).

``no_leftover_processes`` (session, automatic)
    At the end of the session, every process the tests started and left running is killed
    and named in an error: a test ends the processes it starts.

After pytest's summary, the interpreter has ``EXIT_WATCHDOG_S`` seconds to exit: a thread
still waiting then (on a read, a lock, a child) has every thread's stack written to stderr,
and the process exits with status 1 (``faulthandler.dump_traceback_later``).
"""

from __future__ import annotations

import faulthandler
import hashlib
import logging
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import psutil
import pytest
import yaml

from robopipe.demo import demo_cameras, generate_demo
from robopipe.formats.v21_repeat import make_repeated

REPO_ROOT = Path(__file__).resolve().parent.parent
EXIT_WATCHDOG_S = 60  # the most seconds the interpreter may take to exit after the summary
# processes that belong to the interpreter itself and end with it
INTERPRETER_HELPERS = ("multiprocessing.resource_tracker", "multiprocessing.forkserver")


@pytest.fixture(scope="session", autouse=True)
def no_leftover_processes():
    """Kill the processes the session's tests left running, and name them in an error."""
    yield
    left = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() == psutil.STATUS_ZOMBIE:
                continue
            command = " ".join(child.cmdline())
        except psutil.NoSuchProcess:
            continue
        if not any(helper in command for helper in INTERPRETER_HELPERS):
            left.append((child, command))
    for child, _ in left:
        child.terminate()
    _, alive = psutil.wait_procs([child for child, _ in left], timeout=10)
    for child in alive:
        child.kill()
    if left:
        named = "; ".join(f"{child.pid} {command[:200]}" for child, command in left)
        pytest.fail(f"{len(left)} processes were left running by the tests (killed): {named}")


def pytest_collection_modifyitems(config, items):
    """The tests on the local SLURM cluster share one pytest-xdist worker (``--dist
    loadgroup``), so that the session's one cluster start serves them all and no other
    worker starts or stops the cluster under them."""
    for item in items:
        if "slurm_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("slurm"))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """After the summary: the interpreter exits within ``EXIT_WATCHDOG_S`` seconds, or names
    what keeps it (every thread's stack) and exits with status 1. Not in a pytest-xdist
    worker, which waits idle for the others until the controller ends it (within 10 s of the
    end, stuck or not)."""
    if hasattr(config, "workerinput"):
        return
    faulthandler.dump_traceback_later(EXIT_WATCHDOG_S, exit=True, file=sys.__stderr__)


@pytest.fixture(scope="session")
def make_v21(tmp_path_factory):
    """Factory ``make_v21(**params) -> Path`` of cached small v2.1 demo datasets."""
    cache: dict[tuple, Path] = {}

    def make(
        *,
        episodes: int = 6,
        cameras: int | tuple[str, ...] = 2,
        height: int = 32,
        width: int = 48,
        min_length: int = 10,
        max_length: int = 30,
        codec: str = "libsvtav1",
        fps: int = 30,
        seed: int = 0,
        **kwargs,
    ) -> Path:
        if isinstance(cameras, int):
            cameras = demo_cameras(cameras)
        params = dict(
            episodes=episodes,
            cameras=tuple(cameras),
            height=height,
            width=width,
            min_length=min_length,
            max_length=max_length,
            codec=codec,
            fps=fps,
            seed=seed,
            **{k: tuple(v) if isinstance(v, list) else v for k, v in kwargs.items()},
        )
        key = tuple(sorted(params.items()))
        if key not in cache:
            root = tmp_path_factory.mktemp("v21") / f"demo{len(cache)}"
            cache[key] = generate_demo(root, **params)
        return cache[key]

    return make


@pytest.fixture(scope="session")
def shared_datasets() -> Path:
    """``../shared/datasets`` next to the repository, or skip the test when it is absent."""
    path = (REPO_ROOT / ".." / "shared" / "datasets").resolve()
    if not path.is_dir():
        pytest.skip(f"real datasets not available ({path} is missing)")
    return path


@pytest.fixture(scope="session")
def cr5_small(shared_datasets, tmp_path_factory) -> Path:
    """The first 4 episodes of cr5 (640x480 AV1, 10 fps, timestamps off frame_index / fps)."""
    dest = tmp_path_factory.mktemp("cr5") / "cr5x4"
    return make_repeated(shared_datasets / "cr5_banana_plate_v21", dest, episodes=4)


@pytest.fixture(scope="session")
def demo_small(make_v21) -> Path:
    """4 generated episodes with 2 cameras (32x48 AV1, 30 fps)."""
    return make_v21(episodes=4, min_length=10, max_length=16)


@pytest.fixture(params=["cr5", "demo"])
def small_source(request, tmp_path) -> Path:
    """A private copy of a 4-episode dataset, cr5's or the demo's."""
    base = request.getfixturevalue(f"{request.param}_small")
    return Path(shutil.copytree(base, tmp_path / "src"))


SNAKEFILE = REPO_ROOT / "Snakefile"


def snakemake_command(workdir: Path, config: dict, *args: str) -> list[str]:
    """The snakemake command line for ``config`` (written to ``workdir/config.yaml``)."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    return [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(SNAKEFILE),
        "-d",
        str(workdir),
        *args,
        "--configfile",  # last: it takes every word that follows
        str(workdir / "config.yaml"),
    ]


@pytest.fixture(scope="session")
def snakemake_cmd():
    """``snakemake_cmd(workdir, config, *args) -> list[str]``: see :func:`snakemake_command`."""
    return snakemake_command


@pytest.fixture(scope="session")
def run_snakemake():
    """``run_snakemake(workdir, config, *args, check=True, env=None, timeout=600)
    -> CompletedProcess`` (text output; ``env`` replaces the environment)."""

    def run(workdir: Path, config: dict, *args: str, check=True, env=None, timeout=600):
        result = subprocess.run(
            snakemake_command(workdir, config, *args),
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"snakemake failed:\n{result.stdout}\n{result.stderr}")
        return result

    return run


def dataset_tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` by relative path, with the SHA-256 of its bytes (so that two
    trees compare byte for byte, and a failed comparison names the files that differ); the
    ``.snakemake_timestamp`` Snakemake leaves in a directory output is left out."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(Path(root).rglob("*"))
        if p.is_file() and p.name != ".snakemake_timestamp"
    }


# bench settings for workflow tests: a few tiny batches, seconds per scenario
QUICK_BENCH = {
    "batch_size": 4,
    "warmup_batches": 2,
    "steady_s": 0.5,
    "probe_samples": 8,
    "ceiling_frames": 10,
}


@pytest.fixture(scope="session")
def quick_bench():
    """``config["bench"]`` settings (no matrix) that make each scenario take about a second."""
    return dict(QUICK_BENCH)


@pytest.fixture(scope="session")
def file_tree():
    """``file_tree(root) -> {relative path: sha256}``: see :func:`dataset_tree`."""
    return dataset_tree


@pytest.fixture(scope="session")
def validation_of():
    """``validation_of(root) -> {"data_files", "video_files"}``: see the module docstring."""

    def count(root: Path) -> dict[str, int]:
        return {
            "data_files": len(list(Path(root).glob("data/*/*.parquet"))),
            "video_files": len(list(Path(root).glob("videos/*/*/*.mp4"))),
        }

    return count


class S3Server:
    """A running moto S3 server on 127.0.0.1 with one bucket: the ``s3_server`` fixture's value
    (see the module docstring)."""

    def __init__(self, endpoint: str, bucket: str) -> None:
        import s3fs

        self.bucket = bucket
        self.storage_options = {
            "key": "testing",
            "secret": "testing",
            "client_kwargs": {"endpoint_url": endpoint},
        }
        self.fs = s3fs.S3FileSystem(**self.storage_options)
        self.lines: list[str] = []

    def url(self, path: str) -> str:
        return f"s3://{self.bucket}/{path}"

    def requests(self) -> list[str]:
        return list(self.lines)


class _RequestLines(logging.Handler):
    def __init__(self, lines: list[str]) -> None:
        super().__init__()
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        if len(record.args) >= 3:  # werkzeug: (request line, status, size)
            self.lines.append(re.sub(r"\x1b\[[0-9;]*m", "", str(record.args[0])))  # colours


@pytest.fixture
def s3_server():
    """A moto S3 server on 127.0.0.1 with a new empty bucket (moto keeps buckets per process,
    whatever the server): see ``S3Server``."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    s3 = S3Server(f"http://{host}:{port}", f"robopipe-{uuid.uuid4().hex[:12]}")
    log = logging.getLogger("werkzeug")  # moto's server logs each request line here
    handler = _RequestLines(s3.lines)
    log.addHandler(handler)
    try:
        s3.fs.mkdir(s3.bucket)
        yield s3
    finally:
        log.removeHandler(handler)
        server.stop()

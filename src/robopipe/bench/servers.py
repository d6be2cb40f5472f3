"""Serve a local dataset folder on 127.0.0.1 over HTTP (Debian's nginx) or S3 (moto).

The benchmark's ``http`` and ``s3`` sources use these when config gives no remote URL, and the
tests use them to check that streaming from a real server yields the same items as the
local path. :class:`RangeRequestHandler` (Python's ``http.server`` with Range requests) is
what the Hub stand-in (:mod:`robopipe.harness.hub_standin`) builds on.

Both servers run as child processes (:func:`serve_process`, which also runs the Hub stand-in
for the benchmark: :func:`robopipe.harness.hub_standin.serve_hub_process`), whose pids
``robopipe.bench.measure.SERVER_PIDS`` lists, so that a loader's CPU seconds
(``robopipe.bench.measure.tree_cpu_s``) leave out the server's, as they would for a remote
server. moto is costly per request: it reads an object's whole value to answer a ranged GET
(``FakeKey.value``, under the object's lock, so one request at a time per object): about
100 ms and 85 CPU ms for 18 KB of cr5's 154 MB mp4, against nginx's 0.3 ms
(docs/benchmarks.md).
"""

from __future__ import annotations

import contextlib
import grp
import http.server
import os
import pwd
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

from robopipe.bench.measure import SERVER_PIDS

RANGE = re.compile(r"bytes=(\d*)-(\d*)$")


class RangeRequestHandler(http.server.SimpleHTTPRequestHandler):
    """Static files with ``Range: bytes=a-b`` support (206 Partial Content), no listings."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # noqa: A002 - quiet server
        pass

    def list_directory(self, path):
        self.send_error(404, "no listing")
        return None

    def send_head(self):
        path = self.translate_path(self.path)
        if not os.path.isfile(path):
            self.send_error(404, "not found")
            return None
        size = os.path.getsize(path)
        start, end = 0, size - 1
        match = RANGE.match(self.headers.get("Range", ""))
        if match and (match[1] or match[2]):
            if match[1]:
                start = int(match[1])
                end = min(int(match[2]), size - 1) if match[2] else size - 1
            else:
                start = max(0, size - int(match[2]))
            if start >= size:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return None
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        else:
            self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(end - start + 1))
        self.end_headers()
        f = open(path, "rb")  # noqa: SIM115 - closed by copyfile
        f.seek(start)
        self._remaining = end - start + 1
        return f

    def copyfile(self, source, outputfile):
        with source:
            while self._remaining > 0:
                chunk = source.read(min(1 << 20, self._remaining))
                if not chunk:
                    break
                outputfile.write(chunk)
                self._remaining -= len(chunk)


class QuietServer(http.server.ThreadingHTTPServer):
    """A threaded HTTP server on daemon threads that logs no client disconnects."""

    daemon_threads = True

    def handle_error(self, request, client_address):
        """Clients that close a connection mid-transfer (range readers do) are not errors."""


NGINX_CONF = """\
{user}worker_processes 1;
daemon off;
master_process on;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    default_type application/octet-stream;
    sendfile on;
    tcp_nopush on;
    keepalive_timeout 75s;
    server_tokens off;
    client_body_temp_path {prefix}/client_body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    log_format counted '$bytes_sent $request_length $status "$request"';
    access_log {prefix}/access.log counted;
    server {{
        listen 127.0.0.1:{port};
        root {root};
        autoindex off;
        location / {{
            limit_except GET {{ deny all; }}
            try_files $uri =404;
        }}
    }}
}}
"""
NGINX_MISSING = "nginx is not installed: `bash tools/install.sh` installs it (Debian package nginx)"


class NginxServer:
    """Debian's nginx serving a folder read-only on 127.0.0.1, run as the current user.

    Its config, pid file and logs live in a temporary prefix folder; it runs in the
    foreground (``daemon off``) as a child process. Static files get ``sendfile`` and Range
    requests (206) as nginx always serves them; folders and other methods than GET/HEAD are
    refused. :meth:`totals` reads the access log: bytes sent (headers included) and requests.
    """

    def __init__(self, root: str | Path, prefix: str | Path) -> None:
        self.root = Path(root).resolve()
        self.prefix = Path(prefix)
        self.port: int | None = None
        self.process: subprocess.Popen | None = None
        self._log_offset = 0
        self._totals = {"bytes_fetched": 0, "requests": 0}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, attempts: int = 5) -> NginxServer:
        """Start on a free port (another on a port clash).

        Raises:
            RuntimeError: nginx is missing, or did not start (its error log is quoted).
        """
        binary = nginx_binary()
        if binary is None:
            raise RuntimeError(NGINX_MISSING)
        user = ""
        if os.geteuid() == 0:  # workers would otherwise run as nobody, who may not read root
            user = (
                f"user {pwd.getpwuid(os.geteuid()).pw_name} {grp.getgrgid(os.getegid()).gr_name};\n"
            )
        for _ in range(attempts):
            self.port = _free_port()
            conf = self.prefix / "nginx.conf"
            conf.write_text(
                NGINX_CONF.format(user=user, prefix=self.prefix, port=self.port, root=self.root)
            )
            error_log = self.prefix / "error.log"
            self.process = subprocess.Popen(
                [binary, "-p", str(self.prefix), "-c", str(conf), "-e", str(error_log)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            if self._wait_ready():
                return self
            _, stderr = self.process.communicate()
            text = stderr.decode(errors="replace").strip()
            if error_log.exists():
                text += "\n" + error_log.read_text(errors="replace").strip()
            if "Address already in use" not in text:
                raise RuntimeError(f"nginx did not start: {text.strip()[-2000:]}")
        raise RuntimeError(f"nginx did not start: no free port after {attempts} attempts")

    def _wait_ready(self, timeout_s: float = 10.0) -> bool:
        if _listening(self.process, self.port, timeout_s):
            SERVER_PIDS.add(self.process.pid)
            return True
        self.stop()
        return False

    def stop(self) -> None:
        _stop(self.process)  # SIGTERM: nginx's fast shutdown

    def totals(self) -> dict[str, int]:
        """Bytes sent to clients (headers included) and requests, from the access log."""
        path = self.prefix / "access.log"
        if path.exists():
            with open(path, "rb") as f:
                f.seek(self._log_offset)
                data = f.read()
            complete = data[: data.rfind(b"\n") + 1]
            self._log_offset += len(complete)
            for line in complete.splitlines():
                sent = line.split(b" ", 1)[0]
                if sent.isdigit():
                    self._totals["bytes_fetched"] += int(sent)
                    self._totals["requests"] += 1
        return dict(self._totals)


def nginx_binary() -> str | None:
    """The nginx executable: on PATH, or where Debian puts it (/usr/sbin is not on every PATH)."""
    return shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if os.access(p, os.X_OK)), None
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(process: subprocess.Popen, port: int, timeout_s: float) -> bool:
    """Whether ``process`` accepts connections on 127.0.0.1:``port`` within ``timeout_s``
    (False once it has exited)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        with (
            contextlib.suppress(OSError),
            socket.create_connection(("127.0.0.1", port), timeout=0.5),
        ):
            return True
        time.sleep(0.02)
    return False


def _stop(process: subprocess.Popen | None) -> None:
    """SIGTERM ``process`` (SIGKILL after 10 s) and reap it."""
    if process is None:
        return
    SERVER_PIDS.discard(process.pid)
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.contextmanager
def serve_nginx(root: str | Path) -> Iterator[NginxServer]:
    """Serve ``root`` with nginx at ``http://127.0.0.1:<free port>``; yield the server.

    Raises:
        RuntimeError: nginx is not installed (the message names ``tools/install.sh``) or did
            not start.
    """
    with tempfile.TemporaryDirectory(prefix="robopipe-nginx-") as prefix:
        server = NginxServer(root, prefix).start()
        try:
            yield server
        finally:
            server.stop()


@contextlib.contextmanager
def serve_http(root: str | Path) -> Iterator[str]:
    """Serve ``root`` with nginx at ``http://127.0.0.1:<free port>``; yield that base URL."""
    with serve_nginx(root) as server:
        yield server.url


@contextlib.contextmanager
def serve_process(
    name: str, command: Callable[[int], list[str]], attempts: int = 5, timeout_s: float = 60.0
) -> Iterator[str]:
    """Run a server (``command(port)``: its argv, listening on 127.0.0.1:``port``) as a child
    process at a free port, listed in :data:`SERVER_PIDS` while it runs; yield its URL
    ``http://127.0.0.1:<port>``; SIGTERM it on exit.

    Raises:
        RuntimeError: the server did not start (``name`` and its stderr are quoted).
    """
    for _ in range(attempts):
        port = _free_port()
        process = subprocess.Popen(
            command(port),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        if _listening(process, port, timeout_s=timeout_s):
            break
        _stop(process)
        text = process.stderr.read().decode(errors="replace")
        if "Address already in use" not in text:
            raise RuntimeError(f"{name} did not start: {text.strip()[-2000:]}")
    else:
        raise RuntimeError(f"{name} did not start: no free port after {attempts} attempts")
    SERVER_PIDS.add(process.pid)
    # a server may log every request on stderr (werkzeug does): drain it so that a full pipe
    # never stalls it
    drain = threading.Thread(target=process.stderr.read, daemon=True)
    drain.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        _stop(process)
        drain.join(timeout=10)


@contextlib.contextmanager
def serve_moto() -> Iterator[str]:
    """Run moto's S3 server (``python -m moto.server``) as a child process on 127.0.0.1 at a
    free port (:func:`serve_process`); yield its endpoint URL ``http://127.0.0.1:<port>``.

    Raises:
        RuntimeError: the server did not start (its stderr is quoted).
    """
    with serve_process(
        "moto's server",
        lambda port: [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
    ) as endpoint:
        yield endpoint


@contextlib.contextmanager
def serve_s3(root: str | Path) -> Iterator[tuple[str, dict]]:
    """Upload ``root`` to a new bucket of a moto S3 server (:func:`serve_moto`, a child
    process) on 127.0.0.1; yield (``s3://<bucket>/<name>``, s3fs storage options)."""
    import s3fs

    with serve_moto() as endpoint:
        options = {
            "key": "testing",
            "secret": "testing",
            "client_kwargs": {"endpoint_url": endpoint},
        }
        fs = s3fs.S3FileSystem(**options, skip_instance_cache=True)
        bucket = f"robopipe-{uuid.uuid4().hex[:12]}"
        fs.mkdir(bucket)
        root = Path(root)
        prefix = f"{bucket}/{root.name}"
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            fs.put_file(str(path), f"{prefix}/{path.relative_to(root).as_posix()}")
        yield f"s3://{prefix}", options

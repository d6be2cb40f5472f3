"""Serve a local dataset folder on 127.0.0.1 over HTTP (with Range requests) or S3 (moto).

The benchmark's ``http`` and ``s3`` sources use these when config gives no remote URL, and the
tests use them to check that streaming from a real server yields the same items as the
local path.
"""

from __future__ import annotations

import contextlib
import http.server
import os
import re
import threading
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path

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


class _QuietServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        """Clients that close a connection mid-transfer (range readers do) are not errors."""


@contextlib.contextmanager
def serve_http(root: str | Path) -> Iterator[str]:
    """Serve ``root`` at ``http://127.0.0.1:<free port>``; yield that base URL."""
    handler = partial(RangeRequestHandler, directory=str(root))
    server = _QuietServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def serve_s3(root: str | Path) -> Iterator[tuple[str, dict]]:
    """Upload ``root`` to a moto S3 server on 127.0.0.1; yield (``s3://<bucket>/<name>``,
    s3fs storage options). Each call makes a new bucket (moto keeps buckets per process)."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        options = {
            "key": "testing",
            "secret": "testing",
            "client_kwargs": {"endpoint_url": endpoint},
        }
        import s3fs

        fs = s3fs.S3FileSystem(**options)
        bucket = f"robopipe-{uuid.uuid4().hex[:12]}"
        fs.mkdir(bucket)
        root = Path(root)
        prefix = f"{bucket}/{root.name}"
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            fs.put_file(str(path), f"{prefix}/{path.relative_to(root).as_posix()}")
        yield f"s3://{prefix}", options
    finally:
        server.stop()

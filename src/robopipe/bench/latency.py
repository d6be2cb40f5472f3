"""A delaying, counting TCP proxy on 127.0.0.1: injected network latency for the benchmark.

``tc netem`` is not available in these VMs, so the benchmark puts this proxy between a loader
and its server (nginx, moto, the Hub stand-in). Every chunk read from either side is written
to the other side ``latency_ms / 2`` later, so one request/response round trip costs about
``latency_ms`` more, while chunks stay pipelined (throughput is not capped by the delay, as
with netem). With ``latency_ms == 0`` chunks are forwarded at once and the proxy only counts.

It counts what a loader pays: ``bytes_fetched`` (server to client, HTTP headers included),
``bytes_sent`` (client to server), ``requests`` (HTTP requests, framed by their headers and
``Content-Length``; a connection whose requests cannot be framed, e.g. a chunked upload,
counts only its first) and ``connections`` (those that sent a byte).

The proxy runs as a child process (``python -m robopipe.bench.latency``, started by
:func:`robopipe.bench.servers.serve_process`), as a network between the loader and a server
would, so its CPU is neither taken from the loader's process nor counted in the loader's CPU
seconds (it is listed in ``robopipe.bench.measure.SERVER_PIDS``); it writes its counts to a
small file the benchmark maps into memory.

Usage::

    with delaying_proxy("http://127.0.0.1:8080", latency_ms=20) as proxy:
        url = proxy.url  # http://127.0.0.1:<port>, same paths as the target
        ...
        proxy.totals()   # {"bytes_fetched": ..., "requests": ..., ...}
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import mmap
import sys
import tempfile
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

from robopipe.bench.servers import serve_process

CHUNK = 1 << 16  # bytes read at once from either side
QUEUED_CHUNKS = 512  # per direction and connection: about 32 MiB in flight at most
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
COUNTS = ("bytes_fetched", "bytes_sent", "requests", "connections")  # int64s, in this order


def is_loopback_http(url: str | None) -> bool:
    """Whether ``url`` is a plain ``http://`` address on this machine (a proxy can sit in front)."""
    if not url:
        return False
    parts = urlsplit(url)
    return parts.scheme == "http" and parts.hostname in LOOPBACK and parts.port is not None


class RequestCounter:
    """Counts HTTP/1.x requests in a client-to-server byte stream fed chunk by chunk."""

    def __init__(self) -> None:
        self.requests = 0
        self.fed = False  # whether any byte came
        self._buffer = b""
        self._body_left = 0
        self._framed = True

    def feed(self, data: bytes) -> None:
        self.fed = True
        if not self._framed:
            return
        self._buffer += data
        while self._framed:
            if self._body_left:
                taken = min(self._body_left, len(self._buffer))
                self._body_left -= taken
                self._buffer = self._buffer[taken:]
                if self._body_left:
                    return
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self._buffer) > 1 << 16:  # no header block that long: not HTTP
                    self._framed, self._buffer = False, b""
                return
            head, self._buffer = self._buffer[:end], self._buffer[end + 4 :]
            self.requests += 1
            self._body_left = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                name = name.strip().lower()
                if name == b"content-length":
                    self._body_left = int(value.strip() or 0)
                elif name == b"transfer-encoding" and b"chunked" in value.lower():
                    self._framed, self._buffer = False, b""


class DelayProxy:
    """Forward 127.0.0.1:``port`` to ``target_host:target_port`` with a one-way delay of
    ``latency_ms / 2``, adding what passes to ``counts`` (int64 values in :data:`COUNTS`
    order, such as a memory-mapped file's); :meth:`serve` runs it until cancelled.
    """

    def __init__(
        self, target_host: str, target_port: int, latency_ms: float, counts: memoryview
    ) -> None:
        if latency_ms < 0:
            raise ValueError(f"latency_ms must be >= 0, got {latency_ms}")
        self.target = (target_host, target_port)
        self.one_way_s = latency_ms / 2000
        self._counts = counts

    async def serve(self, port: int) -> None:
        server = await asyncio.start_server(self._connection, "127.0.0.1", port)
        async with server:
            await server.serve_forever()

    def _count(self, key: str, n: int) -> None:
        self._counts[COUNTS.index(key)] += n

    async def _connection(self, client_r, client_w) -> None:
        try:
            server_r, server_w = await asyncio.open_connection(*self.target)
        except OSError:
            client_w.close()
            return
        counter = RequestCounter()
        seen = 0

        def upstream(data: bytes) -> None:
            nonlocal seen
            if not counter.fed:  # a connection that sends nothing (a port probe) is not counted
                self._count("connections", 1)
            self._count("bytes_sent", len(data))
            counter.feed(data)
            if counter.requests != seen:
                self._count("requests", counter.requests - seen)
                seen = counter.requests

        def downstream(data: bytes) -> None:
            self._count("bytes_fetched", len(data))

        pipes = [
            asyncio.create_task(self._pipe(client_r, server_w, upstream)),
            asyncio.create_task(self._pipe(server_r, client_w, downstream)),
        ]
        try:
            await asyncio.gather(*pipes)
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            for task in pipes:
                task.cancel()
            await asyncio.gather(*pipes, return_exceptions=True)
            for w in (client_w, server_w):
                w.close()

    async def _pipe(self, reader, writer, on_chunk) -> None:
        """Copy ``reader`` to ``writer``, each chunk ``one_way_s`` after it arrived."""
        if not self.one_way_s:
            while data := await reader.read(CHUNK):
                on_chunk(data)
                writer.write(data)
                await writer.drain()
        else:
            queue: asyncio.Queue = asyncio.Queue(QUEUED_CHUNKS)

            async def deliver():
                while (item := await queue.get()) is not None:
                    due, data = item
                    wait = due - time.monotonic()
                    if wait > 0:
                        await asyncio.sleep(wait)
                    writer.write(data)
                    await writer.drain()

            sender = asyncio.create_task(deliver())
            try:
                while data := await reader.read(CHUNK):
                    on_chunk(data)
                    await queue.put((time.monotonic() + self.one_way_s, data))
                await queue.put(None)
                await sender
            finally:
                sender.cancel()
                await asyncio.gather(sender, return_exceptions=True)
        if writer.can_write_eof():
            with contextlib.suppress(OSError):
                writer.write_eof()


class ProxyProcess:
    """A running proxy process: its ``url`` (``http://127.0.0.1:<port>``) and its counts."""

    def __init__(self, url: str, counts: memoryview) -> None:
        self.url = url
        self._counts = counts

    def totals(self) -> dict[str, int]:
        """Counts since the proxy started: :data:`COUNTS` -> int (a copy)."""
        return dict(zip(COUNTS, self._counts.tolist(), strict=True))


@contextlib.contextmanager
def delaying_proxy(target_url: str, latency_ms: float = 0.0) -> Iterator[ProxyProcess]:
    """A delaying proxy process in front of ``target_url`` (``http://host:port``) for the
    block.

    Raises:
        ValueError: ``target_url`` is not a plain ``http://`` address with a port, or
            ``latency_ms`` < 0.
        RuntimeError: the proxy process did not start.
    """
    parts = urlsplit(target_url)
    if parts.scheme != "http" or not parts.hostname or not parts.port:
        raise ValueError(f"the latency proxy needs an http://host:port target, got {target_url!r}")
    if latency_ms < 0:
        raise ValueError(f"latency_ms must be >= 0, got {latency_ms}")
    size = 8 * len(COUNTS)
    with tempfile.NamedTemporaryFile(prefix="proxy-counts-") as file:
        file.write(bytes(size))
        file.flush()
        with mmap.mmap(file.fileno(), size) as shared:
            counts = memoryview(shared).cast("q")
            try:
                command = [
                    sys.executable, "-m", "robopipe.bench.latency", target_url,
                    "--latency-ms", str(latency_ms), "--counts", file.name, "--port",
                ]  # fmt: skip
                with serve_process("delaying proxy", lambda port: [*command, str(port)]) as url:
                    yield ProxyProcess(url, counts)
            finally:
                counts.release()


def through(proxy: ProxyProcess, url: str) -> str:
    """``url`` with its scheme, host and port replaced by the proxy's."""
    parts = urlsplit(url)
    return proxy.url + url[len(f"{parts.scheme}://{parts.netloc}") :]


def main(argv: list[str] | None = None) -> None:
    """The proxy process: serve until terminated (SIGTERM)."""
    parser = argparse.ArgumentParser(description="delaying, counting TCP proxy on 127.0.0.1")
    parser.add_argument("target", help="http://host:port")
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--counts", required=True, help="file of len(COUNTS) int64s")
    args = parser.parse_args(argv)
    parts = urlsplit(args.target)
    with open(args.counts, "r+b") as file, mmap.mmap(file.fileno(), 0) as shared:
        counts = memoryview(shared).cast("q")
        proxy = DelayProxy(parts.hostname, parts.port, args.latency_ms, counts)
        asyncio.run(proxy.serve(args.port))


if __name__ == "__main__":
    main()

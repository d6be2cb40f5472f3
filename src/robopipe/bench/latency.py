"""A delaying, counting TCP proxy on 127.0.0.1: injected network latency for the benchmark.

``tc netem`` is not available in these VMs, so the benchmark puts this proxy between a loader
and its server (nginx, moto, the Hub stand-in). Every chunk read from either side is written
to the other side ``latency_ms / 2`` later, so one request/response round trip costs about
``latency_ms`` more, while chunks stay pipelined (throughput is not capped by the delay, as
with netem). With ``latency_ms == 0`` chunks are forwarded at once and the proxy only counts.

It counts what a loader pays: ``bytes_fetched`` (server to client, HTTP headers included),
``bytes_sent`` (client to server), ``requests`` (HTTP requests, framed by their headers and
``Content-Length``; a connection whose requests cannot be framed, e.g. a chunked upload,
counts only its first) and ``connections``.

Usage::

    with delaying_proxy("http://127.0.0.1:8080", latency_ms=20) as proxy:
        url = proxy.url  # http://127.0.0.1:<port>, same paths as the target
        ...
        proxy.totals()   # {"bytes_fetched": ..., "requests": ..., ...}
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

CHUNK = 1 << 16  # bytes read at once from either side
QUEUED_CHUNKS = 512  # per direction and connection: about 32 MiB in flight at most
LOOPBACK = {"127.0.0.1", "localhost", "::1"}


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
        self._buffer = b""
        self._body_left = 0
        self._framed = True

    def feed(self, data: bytes) -> None:
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
    """Forward 127.0.0.1:<port> to ``target_host:target_port`` with a one-way delay.

    Runs its own asyncio loop in a daemon thread; :meth:`start` and :meth:`stop` (or
    :func:`delaying_proxy`) bracket its life. :meth:`totals` may be called from any thread.
    """

    def __init__(self, target_host: str, target_port: int, latency_ms: float = 0.0) -> None:
        if latency_ms < 0:
            raise ValueError(f"latency_ms must be >= 0, got {latency_ms}")
        self.target = (target_host, target_port)
        self.one_way_s = latency_ms / 2000
        self.port: int | None = None
        self._counts = {"bytes_fetched": 0, "bytes_sent": 0, "requests": 0, "connections": 0}
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.base_events.Server | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def totals(self) -> dict[str, int]:
        """Counts since the proxy started (a copy)."""
        with self._lock:
            return dict(self._counts)

    def start(self) -> DelayProxy:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._connection, "127.0.0.1", 0), self._loop
        ).result(timeout=10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        async def close():
            self._server.close()
            # A connection accepted while cancelling adds tasks: repeat until none is left,
            # so that no task is destroyed pending when the loop closes.
            while tasks := asyncio.all_tasks() - {asyncio.current_task()}:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

        if self._server is not None:
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self._loop.close()

    def _count(self, key: str, n: int) -> None:
        with self._lock:
            self._counts[key] += n

    async def _connection(self, client_r, client_w) -> None:
        self._count("connections", 1)
        try:
            server_r, server_w = await asyncio.open_connection(*self.target)
        except OSError:
            client_w.close()
            return
        counter = RequestCounter()
        seen = 0

        def upstream(data: bytes) -> None:
            nonlocal seen
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


@contextlib.contextmanager
def delaying_proxy(target_url: str, latency_ms: float = 0.0) -> Iterator[DelayProxy]:
    """A :class:`DelayProxy` in front of ``target_url`` (``http://host:port``) for the block.

    Raises:
        ValueError: ``target_url`` is not a plain ``http://`` address with a port.
    """
    parts = urlsplit(target_url)
    if parts.scheme != "http" or not parts.hostname or not parts.port:
        raise ValueError(f"the latency proxy needs an http://host:port target, got {target_url!r}")
    proxy = DelayProxy(parts.hostname, parts.port, latency_ms).start()
    try:
        yield proxy
    finally:
        proxy.stop()


def through(proxy: DelayProxy, url: str) -> str:
    """``url`` with its scheme, host and port replaced by the proxy's."""
    parts = urlsplit(url)
    return proxy.url + url[len(f"{parts.scheme}://{parts.netloc}") :]

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

It also injects faults (:class:`Faults`): each request is faulted with probability
``fault_rate``, its kind drawn from ``fault_kinds`` (:data:`FAULT_KINDS`): ``429`` (Too Many
Requests with ``Retry-After``), ``503``, ``reset`` (half the response, then a TCP reset),
``truncate`` (half the response, then a clean close: a short body) and ``stall`` (no response
byte for ``stall_s``, then a close: longer than the client's read timeout). A faulted request
ends its connection; the faults are counted as ``faults_<kind>``.

The proxy runs as a child process (``python -m robopipe.bench.latency``, started by
:func:`robopipe.bench.servers.serve_process`), as a network between the loader and a server
would, so its CPU is neither taken from the loader's process nor counted in the loader's CPU
seconds (it is listed in ``robopipe.bench.measure.SERVER_PIDS``); it writes its counts to a
small file the benchmark maps into memory.

Usage::

    with delaying_proxy("http://127.0.0.1:8080", latency_ms=20, faults=Faults(0.02)) as proxy:
        url = proxy.url  # http://127.0.0.1:<port>, same paths as the target
        ...
        proxy.totals()   # {"bytes_fetched": ..., "requests": ..., ...}
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import mmap
import random
import socket
import struct
import sys
import tempfile
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

from robopipe.bench.servers import serve_process

CHUNK = 1 << 16  # bytes read at once from either side
QUEUED_CHUNKS = 512  # per direction and connection: about 32 MiB in flight at most
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
FAULT_KINDS = ("429", "503", "reset", "truncate", "stall")
COUNTS = (  # int64s, in this order
    "bytes_fetched",
    "bytes_sent",
    "requests",
    "connections",
    *(f"faults_{kind}" for kind in FAULT_KINDS),
)
ERROR_RESPONSES = {
    "429": b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: %d\r\n",
    "503": b"HTTP/1.1 503 Service Unavailable\r\n",
}


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


class Faults:
    """Which requests a proxy faults, and how (see the module docstring).

    Args:
        rate: probability that a request is faulted, in [0, 1].
        kinds: the kinds drawn from, uniformly (a subset of :data:`FAULT_KINDS`).
        stall_s: seconds a ``stall`` holds the response back before closing.
        retry_after_s: the ``Retry-After`` of a ``429``, whole seconds.
        seed: the random generator's seed (the same requests fault in the same order).
        start_after: requests passed unfaulted first (e.g. those that open a dataset).

    Raises:
        ValueError: a rate outside [0, 1], an unknown kind, no kind with a rate > 0, or a
            negative time.
    """

    def __init__(
        self,
        rate: float = 0.0,
        kinds: tuple[str, ...] = FAULT_KINDS,
        stall_s: float = 5.0,
        retry_after_s: int = 1,
        seed: int = 0,
        start_after: int = 0,
    ) -> None:
        unknown = set(kinds) - set(FAULT_KINDS)
        if not 0 <= rate <= 1 or unknown or (rate and not kinds):
            raise ValueError(
                f"fault_rate must be in [0, 1] and fault_kinds in {FAULT_KINDS}, got {rate}, "
                f"{list(kinds)}"
            )
        if stall_s < 0 or retry_after_s < 0:
            raise ValueError(f"stall_s and retry_after_s must be >= 0: {stall_s}, {retry_after_s}")
        self.rate, self.kinds = rate, tuple(kinds)
        self.stall_s, self.retry_after_s = stall_s, int(retry_after_s)
        self.seed, self.start_after = seed, start_after
        self._random = random.Random(seed)

    def draw(self) -> str | None:
        """The fault of the next request, or None."""
        if self.start_after > 0:
            self.start_after -= 1
            return None
        if self.rate and self._random.random() < self.rate:
            return self._random.choice(self.kinds)
        return None


class ResponseFault:
    """Turns the server's response to a faulted request into the fault: fed the response's
    chunks, :meth:`feed` returns the bytes to pass on and, once the fault is due, what ends the
    connection (``"close"``, ``"reset"`` or ``"stall"``)."""

    def __init__(self, kind: str, faults: Faults, head_only: bool) -> None:
        self.kind, self.faults, self.head_only = kind, faults, head_only
        self._buffer = b""
        self._cut: int | None = None  # bytes passed on before the connection ends
        self._passed = 0

    def feed(self, data: bytes) -> tuple[bytes, str | None]:
        if self.kind == "stall":
            return b"", "stall"
        if self._cut is None:
            self._buffer += data
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                return b"", None
            if self.kind in ERROR_RESPONSES:
                return self._error_response(), "close"
            self._cut = self._cut_at(self._buffer[: end + 4])
            data, self._buffer = self._buffer, b""
        out = data[: self._cut - self._passed]
        self._passed += len(out)
        end = ("reset" if self.kind == "reset" else "close") if self._passed >= self._cut else None
        return out, end

    def _error_response(self) -> bytes:
        status = ERROR_RESPONSES[self.kind]
        if self.kind == "429":
            status %= self.faults.retry_after_s
        return status + b"Content-Length: 0\r\nConnection: close\r\n\r\n"

    def _cut_at(self, head: bytes) -> int:
        """Half the response (headers and body); half the headers where no body is framed."""
        length = None
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length" and value.strip().isdigit():
                length = int(value.strip())
        if self.head_only or not length:
            return len(head) // 2
        return (len(head) + length) // 2


class _ConnectionEnded(Exception):
    """A fault ended the connection."""


class DelayProxy:
    """Forward 127.0.0.1:``port`` to ``target_host:target_port`` with a one-way delay of
    ``latency_ms / 2``, adding what passes to ``counts`` (int64 values in :data:`COUNTS`
    order, such as a memory-mapped file's); :meth:`serve` runs it until cancelled.
    """

    def __init__(
        self,
        target_host: str,
        target_port: int,
        latency_ms: float,
        counts: memoryview,
        faults: Faults | None = None,
    ) -> None:
        if latency_ms < 0:
            raise ValueError(f"latency_ms must be >= 0, got {latency_ms}")
        self.target = (target_host, target_port)
        self.one_way_s = latency_ms / 2000
        self._counts = counts
        self.faults = faults or Faults()

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
        fault: ResponseFault | None = None

        def upstream(data: bytes) -> tuple[bytes, None]:
            nonlocal seen, fault
            if not counter.fed:  # a connection that sends nothing (a port probe) is not counted
                self._count("connections", 1)
            self._count("bytes_sent", len(data))
            counter.feed(data)
            if counter.requests != seen:
                self._count("requests", counter.requests - seen)
                seen = counter.requests
                kind = fault is None and self.faults.draw()
                if kind:  # clients send one request at a time: this chunk starts it
                    self._count(f"faults_{kind}", 1)
                    fault = ResponseFault(kind, self.faults, data.startswith(b"HEAD "))
            return data, None

        def downstream(data: bytes) -> tuple[bytes, str | None]:
            if fault is not None:
                data, end = fault.feed(data)
            else:
                end = None
            self._count("bytes_fetched", len(data))
            return data, end

        pipes = [
            asyncio.create_task(self._pipe(client_r, server_w, upstream)),
            asyncio.create_task(self._pipe(server_r, client_w, downstream)),
        ]
        try:
            await asyncio.gather(*pipes)
        except (OSError, asyncio.CancelledError, _ConnectionEnded):
            pass
        finally:
            for task in pipes:
                task.cancel()
            await asyncio.gather(*pipes, return_exceptions=True)
            for w in (client_w, server_w):
                w.close()

    async def _pipe(self, reader, writer, on_chunk) -> None:
        """Copy ``reader`` to ``writer``, each chunk ``one_way_s`` after it arrived, as
        ``on_chunk(data)`` (-> (bytes to write, None or how a fault ends the connection))
        passes it on.

        Raises:
            _ConnectionEnded: a fault ended the connection.
        """
        if not self.one_way_s:
            while data := await reader.read(CHUNK):
                data, end = on_chunk(data)
                writer.write(data)
                await writer.drain()
                if end:
                    await self._end(writer, end)
        else:
            queue: asyncio.Queue = asyncio.Queue(QUEUED_CHUNKS)
            reading = asyncio.current_task()

            async def deliver():
                while (item := await queue.get()) is not None:
                    due, data, end = item
                    wait = due - time.monotonic()
                    if wait > 0:
                        await asyncio.sleep(wait)
                    writer.write(data)
                    await writer.drain()
                    if end:
                        try:
                            await self._end(writer, end)
                        finally:
                            reading.cancel()  # the reader may wait on a kept-alive server

            sender = asyncio.create_task(deliver())
            try:
                while data := await reader.read(CHUNK):
                    await queue.put((time.monotonic() + self.one_way_s, *on_chunk(data)))
                await queue.put(None)
                await sender
            finally:
                sender.cancel()
                await asyncio.gather(sender, return_exceptions=True)
        if writer.can_write_eof():
            with contextlib.suppress(OSError):
                writer.write_eof()

    async def _end(self, writer, end: str) -> None:
        """End the connection as a fault does: ``stall`` (wait, then close), ``reset`` (a TCP
        reset: linger 0) or ``close``.

        Raises:
            _ConnectionEnded: always.
        """
        if end == "stall":
            await asyncio.sleep(self.faults.stall_s)
        elif end == "reset":
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
        raise _ConnectionEnded(end)


class ProxyProcess:
    """A running proxy process: its ``url`` (``http://127.0.0.1:<port>``) and its counts."""

    def __init__(self, url: str, counts: memoryview) -> None:
        self.url = url
        self._counts = counts

    def totals(self) -> dict[str, int]:
        """Counts since the proxy started: :data:`COUNTS` -> int (a copy)."""
        return dict(zip(COUNTS, self._counts.tolist(), strict=True))


@contextlib.contextmanager
def delaying_proxy(
    target_url: str, latency_ms: float = 0.0, faults: Faults | None = None
) -> Iterator[ProxyProcess]:
    """A delaying proxy process in front of ``target_url`` (``http://host:port``) for the
    block, injecting ``faults`` (default none).

    Raises:
        ValueError: ``target_url`` is not a plain ``http://`` address with a port, or
            ``latency_ms`` < 0.
        RuntimeError: the proxy process did not start.
    """
    faults = faults or Faults()
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
                    "--latency-ms", str(latency_ms), "--counts", file.name,
                    "--fault-rate", str(faults.rate), "--fault-kinds", ",".join(faults.kinds),
                    "--stall-s", str(faults.stall_s),
                    "--retry-after-s", str(faults.retry_after_s),
                    "--seed", str(faults.seed), "--start-after", str(faults.start_after),
                    "--port",
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
    parser.add_argument("--fault-rate", type=float, default=0.0)
    parser.add_argument("--fault-kinds", default=",".join(FAULT_KINDS))
    parser.add_argument("--stall-s", type=float, default=5.0)
    parser.add_argument("--retry-after-s", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start-after", type=int, default=0)
    args = parser.parse_args(argv)
    faults = Faults(
        args.fault_rate,
        tuple(k for k in args.fault_kinds.split(",") if k),
        args.stall_s,
        args.retry_after_s,
        seed=args.seed,
        start_after=args.start_after,
    )
    parts = urlsplit(args.target)
    with open(args.counts, "r+b") as file, mmap.mmap(file.fileno(), 0) as shared:
        counts = memoryview(shared).cast("q")
        proxy = DelayProxy(parts.hostname, parts.port, args.latency_ms, counts, faults)
        asyncio.run(proxy.serve(args.port))


if __name__ == "__main__":
    main()

"""The delaying proxy: it adds the configured round trip, passes bytes unchanged, and counts
bytes and requests. Timings are benchmark-style lower bounds with generous margins."""

import http.client
import os
import threading
import time
from functools import partial

import pytest

from robopipe.bench.latency import RequestCounter, delaying_proxy, is_loopback_http, through
from robopipe.bench.servers import QuietServer, RangeRequestHandler

SIZE = 3 * 1024 * 1024 + 17


class NoDelayHandler(RangeRequestHandler):
    disable_nagle_algorithm = True  # no 40 ms stall between the headers and the body


@pytest.fixture(scope="module")
def origin(tmp_path_factory):
    """A Python range server (no nginx needed) holding one file of known bytes."""
    root = tmp_path_factory.mktemp("origin")
    data = os.urandom(SIZE)
    (root / "blob.bin").write_bytes(data)
    server = QuietServer(("127.0.0.1", 0), partial(NoDelayHandler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", data
    server.shutdown()
    server.server_close()


def round_trips(url: str, count: int, headers: dict | None = None) -> tuple[float, list[bytes]]:
    """The fastest of ``count`` GETs of /blob.bin on one keep-alive connection (seconds: the
    one least slowed by other work on the machine), and the bodies."""
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    times, bodies = [], []
    try:
        for _ in range(count):
            start = time.perf_counter()
            conn.request("GET", "/blob.bin", headers=headers or {})
            bodies.append(conn.getresponse().read())
            times.append(time.perf_counter() - start)
    finally:
        conn.close()
    return min(times), bodies


def test_the_proxy_adds_the_round_trip_and_passes_bytes_unchanged(origin):
    url, data = origin
    small = {"Range": "bytes=100-1099"}
    with delaying_proxy(url, 0) as fast, delaying_proxy(url, 40) as slow:
        base, bodies = round_trips(fast.url, 5, small)
        delayed, delayed_bodies = round_trips(slow.url, 5, small)
        _, whole = round_trips(slow.url, 1)
    assert bodies == delayed_bodies == [data[100:1100]] * 5
    assert whole == [data]  # 3 MiB through the delayed pipe, unchanged
    assert delayed - base >= 0.035, f"{base * 1000:.1f} ms vs {delayed * 1000:.1f} ms"


def test_the_proxy_counts_the_bytes_and_requests_of_a_known_file(origin):
    url, data = origin
    with delaying_proxy(url, 4) as proxy:
        _, bodies = round_trips(proxy.url, 3)
        _, ranged = round_trips(proxy.url, 2, {"Range": "bytes=0-9"})
        totals = proxy.totals()
    assert bodies == [data] * 3 and ranged == [data[:10]] * 2
    assert totals["requests"] == 5 and totals["connections"] == 2
    body_bytes = 3 * SIZE + 2 * 10
    assert body_bytes < totals["bytes_fetched"] < body_bytes + 5 * 1000  # plus headers
    assert 0 < totals["bytes_sent"] < 5 * 1000


def test_request_counter_frames_bodies_and_split_chunks():
    counter = RequestCounter()
    stream = (
        b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
        b"PUT /b HTTP/1.1\r\nContent-Length: 14\r\n\r\nGET / HTTP/1.1"  # a body like a request
        b"HEAD /c HTTP/1.1\r\nHost: x\r\n\r\n"
    )
    for i in range(0, len(stream), 7):
        counter.feed(stream[i : i + 7])
    assert counter.requests == 3


def test_addresses():
    assert is_loopback_http("http://127.0.0.1:9000") and is_loopback_http("http://localhost:80")
    assert not is_loopback_http("https://127.0.0.1:9000")
    assert not is_loopback_http("http://example.org:80") and not is_loopback_http(None)
    with delaying_proxy("http://127.0.0.1:9", 0) as proxy:
        assert through(proxy, "http://127.0.0.1:9/a/b?c=1") == f"{proxy.url}/a/b?c=1"
    with pytest.raises(ValueError, match="http://host:port"), delaying_proxy("s3://bucket"):
        pass

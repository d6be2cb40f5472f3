"""Remote reads that survive transient faults: one retry policy for every reader (tenacity).

A read is retried after a transient error (:func:`transient`): a lost or reset connection, a
timeout, a body shorter than asked (:class:`ShortBody`), HTTP 408, 425, 429 or 5xx. Waits grow
exponentially with full jitter (``0.1 s * 2**n``, at most ``MAX_WAIT_S``), and a
``Retry-After`` header (seconds) is honoured when longer. The read gives up when its
:class:`RetryBudget` is spent (attempts, or seconds since the first attempt; a ``Retry-After``
beyond the seconds left gives up at once), raising :class:`RemoteReadError` whose message is one
line naming the URL and the last error. Errors that are not transient (a missing file, no
access) are raised at once, as they are.

A stalled server is abandoned early, as latency-sensitive clients do ("aggressive timeouts and
retries", AWS's *Timeouts and retries for latency-sensitive applications*; aws-c-s3's
first-byte timeout): an http(s) attempt waits at most ``first_byte_timeout_s`` for its
response to begin (a much shorter wait than ``read_timeout_s``, the longest gap between two
chunks of a body that has begun), and a range read still unanswered after the 95th
percentile of this process's latencies of ranges of its size is *hedged* (:func:`hedged`): a
second request goes out and the first answer wins, the other is cancelled ("The Tail at
Scale", Dean & Barroso, CACM 2013: hedging after the p95 costs about 5% more requests).

Each retry is counted in this process (:func:`retries`) and, when the environment names a file
in ``ROBOPIPE_RETRY_LOG``, appended to it as one line: a benchmark counts the retries of its
DataLoader workers, forked or spawned, with :func:`retry_log`.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import tempfile
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import asdict, dataclass
from typing import TypeVar

import tenacity

T = TypeVar("T")

RETRY_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
"""HTTP statuses worth another attempt: timeouts, rate limits and server errors."""
FIRST_WAIT_S = 0.1  # the first wait's upper bound; each later one doubles it
MAX_WAIT_S = 10.0  # the longest wait between two attempts (unless Retry-After says longer)
# the HTTP clients' own transport errors (aiohttp, requests, httpx, urllib3, botocore)
TRANSIENT_NAMES = frozenset(
    {
        "ClientConnectionError",
        "ClientPayloadError",
        "ServerDisconnectedError",
        "ConnectionError",
        "Timeout",
        "TransportError",
        "ChunkedEncodingError",
        "ProtocolError",
        "IncompleteRead",
        "ReadTimeoutError",
        "EndpointConnectionError",
        "ConnectionClosedError",
        "ResponseStreamingError",
    }
)
RETRY_LOG_ENV = "ROBOPIPE_RETRY_LOG"
_PERMANENT_OS_ERRORS = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)
_retries = 0


@dataclass(frozen=True)
class RetryBudget:
    """How long one remote read keeps trying, and how long a client waits for bytes.

    Attributes:
        attempts: most attempts of one read (the first one included), >= 1.
        seconds: most seconds from a read's first attempt to its last one's start, > 0.
        read_timeout_s: seconds a client waits for the next bytes of a response (or for a
            connection) before the attempt fails as a timeout, > 0; applied to http(s) and s3
            filesystems by ``robopipe.formats.v30_reader.open_url``.
        first_byte_timeout_s: seconds an http(s) client waits, once a request is sent, for
            its response to begin (status line and headers) before the attempt fails as a
            timeout, > 0 (``robopipe.formats.v30_reader.open_url``; s3 and hf keep their
            clients' single read timeout). Go's ``http.Transport.ResponseHeaderTimeout``.
        hedge: whether a range read of an async filesystem (http, s3) still unanswered after
            the p95 of this process's latencies of such ranges gets a second request, the
            first answer winning (:func:`hedged`).

    Raises:
        ValueError: a value out of range.
    """

    attempts: int = 8
    seconds: float = 120.0
    read_timeout_s: float = 30.0
    first_byte_timeout_s: float = 5.0
    hedge: bool = True

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"retry attempts must be >= 1, got {self.attempts}")
        if self.seconds <= 0 or self.read_timeout_s <= 0 or self.first_byte_timeout_s <= 0:
            raise ValueError(
                f"retry seconds, read_timeout_s and first_byte_timeout_s must be > 0, got "
                f"{self.seconds}, {self.read_timeout_s}, {self.first_byte_timeout_s}"
            )

    @classmethod
    def from_config(cls, config: dict | None) -> RetryBudget:
        """The budget a config's ``retry`` mapping sets (missing keys: the defaults)."""
        return cls(**(config or {}))

    def to_config(self) -> dict:
        """The config mapping of this budget (``attempts``, ``seconds``, ``read_timeout_s``,
        ``first_byte_timeout_s``, ``hedge``)."""
        return asdict(self)


DEFAULT_BUDGET = RetryBudget()


class ShortBody(OSError):
    """A response body shorter (or longer) than the bytes asked for: re-requested."""

    def __init__(self, url: str, start: int, end: int, got: int) -> None:
        super().__init__(f"{url}: asked for bytes {start}:{end}, got {got} bytes")


class RemoteReadError(OSError):
    """A remote read that failed on every attempt its :class:`RetryBudget` allowed; the message
    is one line: the URL, the attempts, the seconds, the last error."""


def transient(error: BaseException) -> bool:
    """Whether ``error`` is worth another attempt: HTTP 408/425/429/5xx, a short body, a lost
    or reset connection or a timeout (``OSError`` other than a missing file or no access, or an
    HTTP client's transport error), or a "missing file" caused by one of those."""
    status = _status(error)
    if status is not None:
        return status in RETRY_STATUS
    if isinstance(error, FileNotFoundError) and error.__cause__ is not None:
        # fsspec's http info() reports any failure of its HEAD and GET as a missing file
        return transient(error.__cause__)
    if isinstance(error, _PERMANENT_OS_ERRORS):
        return False
    if isinstance(error, OSError | TimeoutError):
        return True
    return any(c.__name__ in TRANSIENT_NAMES for c in type(error).__mro__)


def _status(error: BaseException) -> int | None:
    """The HTTP status an HTTP client's error carries (aiohttp ``status``, requests and httpx
    ``response.status_code``), or None."""
    status = getattr(error, "status", None)
    if status is None:
        status = getattr(getattr(error, "response", None), "status_code", None)
    return status if isinstance(status, int) else None


def retry_after_s(error: BaseException | None) -> float | None:
    """The seconds a ``Retry-After`` header of ``error``'s response asks for (a number of
    seconds; an HTTP date is not read), or None."""
    headers = getattr(error, "headers", None)
    if headers is None:
        headers = getattr(getattr(error, "response", None), "headers", None)
    value = headers.get("Retry-After") if headers is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def one_line(error: BaseException) -> str:
    """``error`` as one line: its type and message, newlines folded."""
    text = " ".join(str(error).split()) or repr(error)
    return f"{type(error).__name__}: {text}"


def call(
    read: Callable[[], T],
    url: str,
    budget: RetryBudget = DEFAULT_BUDGET,
    *,
    failed: BaseException | None = None,
) -> T:
    """``read()``, tried again after transient errors within ``budget``.

    Args:
        read: one attempt (it raises :class:`ShortBody` for a short body).
        url: what is read, for the give-up message.
        budget: attempts and seconds.
        failed: the error of a first attempt made elsewhere (e.g. one of many ranges fetched
            at once): it counts as attempt 1, and ``read`` starts at attempt 2.

    Raises:
        RemoteReadError: the budget was spent; the message names ``url`` and the last error.
        Exception: a non-transient error of ``read`` (or ``failed``), as it is.
    """
    pending = [failed]
    start = time.monotonic()

    def attempt() -> T:
        if pending[0] is not None:
            error, pending[0] = pending[0], None
            raise error
        return read()

    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_exception(transient),
        wait=_wait,
        stop=_stop(budget, start),
        before_sleep=_count,
        reraise=True,
    )
    try:
        return retrying(attempt)
    except Exception as error:
        if not transient(error):
            raise
        attempts = retrying.statistics.get("attempt_number", 1)
        raise RemoteReadError(
            f"{url}: gave up after {attempts} attempts in {time.monotonic() - start:.1f} s "
            f"(budget {budget.attempts} attempts, {budget.seconds:g} s): {one_line(error)}"
        ) from error


_jitter = tenacity.wait_random_exponential(multiplier=FIRST_WAIT_S, max=MAX_WAIT_S)


def _wait(state: tenacity.RetryCallState) -> float:
    """Exponential backoff with full jitter, or the server's ``Retry-After`` if longer."""
    asked = retry_after_s(state.outcome.exception()) if state.outcome else None
    return max(_jitter(state), asked or 0.0)


def _stop(budget: RetryBudget, start: float) -> Callable[[tenacity.RetryCallState], bool]:
    def stop(state: tenacity.RetryCallState) -> bool:
        elapsed = time.monotonic() - start
        next_wait = state.upcoming_sleep or 0.0
        return state.attempt_number >= budget.attempts or elapsed + next_wait > budget.seconds

    return stop


def _count(state: tenacity.RetryCallState) -> None:
    global _retries
    _retries += 1
    path = os.environ.get(RETRY_LOG_ENV)
    if path:
        line = f"{one_line(state.outcome.exception())[:200]}\n".encode()
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)  # one write of an O_APPEND file: lines never interleave
        finally:
            os.close(fd)


HEDGE_QUANTILE = 0.95  # Dean & Barroso 2013: hedge after the p95, about 5% more requests
HEDGE_MIN_SAMPLES = 20  # latencies of a size class needed before its ranges are hedged
HEDGE_WINDOW = 200  # latencies kept per size class (the most recent)
HEDGE_UNKNOWN_S = 1.0  # the hedge delay while no size class has enough latencies: 50 round
# trips of 20 ms, far above a healthy small read, and 5 times under first_byte_timeout_s


class LatencyTracker:
    """The recent latencies of this process's successful range reads, by size class, and the
    delay after which a read of a size is hedged (thread-safe).

    A size class spans a factor of 4 in bytes (``n.bit_length() // 2``), so that a 20 KB GOP
    is not hedged at the pace of a 5 MB episode span. A forked child (a DataLoader worker)
    keeps the latencies with a lock of its own: the parent's could be held at the fork by
    fsspec's event loop thread, recording, which the child does not have to release it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latencies: dict[int, collections.deque[float]] = {}
        _trackers.add(self)

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()

    @staticmethod
    def _size_class(nbytes: int) -> int:
        return max(int(nbytes), 0).bit_length() // 2

    def record(self, nbytes: int, seconds: float) -> None:
        """A read of ``nbytes`` bytes answered in full after ``seconds``."""
        with self._lock:
            key = self._size_class(nbytes)
            recent = self._latencies.setdefault(key, collections.deque(maxlen=HEDGE_WINDOW))
            recent.append(seconds)

    def hedge_delay(self, nbytes: int) -> float:
        """Seconds after which a read of ``nbytes`` bytes gets a second request: the
        :data:`HEDGE_QUANTILE` of the latencies of its size class or, while that class has
        fewer than :data:`HEDGE_MIN_SAMPLES`, of the nearest class that has them;
        :data:`HEDGE_UNKNOWN_S` while none has (a process's first reads)."""
        wanted = self._size_class(nbytes)
        with self._lock:
            known = [k for k, v in self._latencies.items() if len(v) >= HEDGE_MIN_SAMPLES]
            if not known:
                return HEDGE_UNKNOWN_S
            ordered = sorted(self._latencies[min(known, key=lambda k: abs(k - wanted))])
        return ordered[min(int(HEDGE_QUANTILE * len(ordered)), len(ordered) - 1)]


_trackers: weakref.WeakSet[LatencyTracker] = weakref.WeakSet()
os.register_at_fork(
    after_in_child=lambda: [tracker._after_fork_in_child() for tracker in list(_trackers)]
)

LATENCIES = LatencyTracker()
"""This process's range-read latencies (:func:`hedged` records and reads them)."""
_hedges = 0


async def hedged(
    attempt: Callable[[], Awaitable[T]],
    nbytes: int,
    tracker: LatencyTracker | None = None,
    enabled: bool = True,
) -> T:
    """``await attempt()``, hedged: if it has not returned after ``tracker``'s hedge delay
    for ``nbytes`` bytes, a second ``attempt()`` starts and the first to succeed is returned,
    the other cancelled (an error of one waits for the other). Successful attempts' latencies
    go to ``tracker``.

    Args:
        attempt: starts one request (a coroutine function, e.g. ``fs._cat_file`` of a range).
        nbytes: the bytes asked for (the size class whose latencies set the delay).
        tracker: the latencies (None: :data:`LATENCIES`, this process's).
        enabled: False: no second request (latencies are still recorded).

    Raises:
        Exception: the first attempt's error when both failed (the only one's, unhedged).
    """
    global _hedges
    tracker = tracker if tracker is not None else LATENCIES

    async def timed() -> T:
        start = time.monotonic()
        result = await attempt()
        tracker.record(nbytes, time.monotonic() - start)
        return result

    first = asyncio.ensure_future(timed())
    if not enabled:
        return await first
    delay = tracker.hedge_delay(nbytes)
    pending = {first}
    try:
        done, _ = await asyncio.wait(pending, timeout=delay)
        if not done:
            _hedges += 1
            pending.add(asyncio.ensure_future(timed()))
        while True:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            answered = [task for task in done if task.exception() is None]
            if answered:
                return answered[0].result()
            if not pending:  # every attempt failed: the first one's error, however they ended
                return first.result()
    finally:
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)


def hedges() -> int:
    """Second requests :func:`hedged` sent in this process so far."""
    return _hedges


def retries() -> int:
    """Retries made in this process so far (every :func:`call`)."""
    return _retries


class RetryLog:
    """The retries logged to a file by every process started in a :func:`retry_log` block."""

    def __init__(self, path: str) -> None:
        self.path = path

    def count(self) -> int:
        """Retries logged so far."""
        try:
            with open(self.path, "rb") as f:
                return f.read().count(b"\n")
        except FileNotFoundError:
            return 0


@contextlib.contextmanager
def retry_log() -> Iterator[RetryLog]:
    """Log the retries of this process and of the processes it starts in the block (through
    ``ROBOPIPE_RETRY_LOG``, which the block sets and then restores)."""
    old = os.environ.get(RETRY_LOG_ENV)
    with tempfile.TemporaryDirectory(prefix="retries-") as folder:
        os.environ[RETRY_LOG_ENV] = os.path.join(folder, "retries.log")
        try:
            yield RetryLog(os.environ[RETRY_LOG_ENV])
        finally:
            if old is None:
                os.environ.pop(RETRY_LOG_ENV, None)
            else:
                os.environ[RETRY_LOG_ENV] = old

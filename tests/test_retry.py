"""robopipe.retry: which errors are retried, Retry-After, the budget and its one-line message."""

import time

import pytest

from robopipe import retry
from robopipe.retry import RemoteReadError, RetryBudget, ShortBody, call, transient


class HttpError(Exception):
    """An HTTP client's error carrying a status and headers, as aiohttp's does."""

    def __init__(self, status: int, headers: dict | None = None) -> None:
        super().__init__(f"{status}, message='status {status}'")
        self.status, self.headers = status, headers or {}


def failing(errors: list[BaseException], result=b"ok"):
    """A read that raises ``errors`` in turn, then returns ``result``; its calls counted."""
    calls = []

    def read():
        calls.append(time.monotonic())
        if len(calls) <= len(errors):
            raise errors[len(calls) - 1]
        return result

    return read, calls


def test_transient_errors_and_permanent_ones():
    assert transient(HttpError(429)) and transient(HttpError(503)) and transient(HttpError(408))
    assert not transient(HttpError(404)) and not transient(HttpError(403))
    assert transient(ConnectionResetError()) and transient(TimeoutError())
    assert transient(ShortBody("u", 0, 10, 5))
    assert not transient(FileNotFoundError("u")) and not transient(PermissionError())
    missing = FileNotFoundError("u")
    missing.__cause__ = HttpError(503)  # fsspec's http info() on a 503
    assert transient(missing)
    assert not transient(ValueError("bad data"))


def test_a_read_is_retried_until_it_succeeds_and_counted():
    before = retry.retries()
    read, calls = failing([ConnectionResetError("reset"), ShortBody("u", 0, 10, 5)])
    assert call(read, "http://h/f", RetryBudget(attempts=3)) == b"ok"
    assert len(calls) == 3 and retry.retries() - before == 2


def test_retry_after_is_honoured():
    read, calls = failing([HttpError(429, {"Retry-After": "1"})])
    call(read, "http://h/f")
    assert calls[1] - calls[0] >= 1.0


def test_a_permanent_error_is_raised_at_once():
    read, calls = failing([FileNotFoundError("http://h/f")])
    with pytest.raises(FileNotFoundError):
        call(read, "http://h/f")
    assert len(calls) == 1


@pytest.mark.parametrize(
    ("budget", "attempts"),
    [(RetryBudget(attempts=3, seconds=60), 3), (RetryBudget(attempts=100, seconds=0.5), None)],
)
def test_the_budget_ends_with_one_line_naming_the_url_and_the_last_error(budget, attempts):
    read, calls = failing([HttpError(503)] * 1000)
    start = time.monotonic()
    with pytest.raises(RemoteReadError) as error:
        call(read, "http://h/data/f.parquet", budget)
    took = time.monotonic() - start
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith("http://h/data/f.parquet: gave up after")
    assert message.endswith("HttpError: 503, message='status 503'")
    assert took <= budget.seconds + 0.1
    if attempts:
        assert len(calls) == attempts
    assert isinstance(error.value, OSError)


def test_a_429_asking_beyond_the_budget_gives_up_at_once():
    read, calls = failing([HttpError(429, {"Retry-After": "30"})] * 10)
    start = time.monotonic()
    with pytest.raises(RemoteReadError, match="HttpError: 429"):
        call(read, "http://h/f", RetryBudget(seconds=5))
    assert time.monotonic() - start < 1 and len(calls) == 1


def test_an_earlier_failure_counts_as_the_first_attempt():
    read, calls = failing([])
    with pytest.raises(RemoteReadError, match="gave up after 1 attempts"):
        call(read, "u", RetryBudget(attempts=1), failed=ConnectionResetError("reset"))
    assert call(read, "u", RetryBudget(attempts=2), failed=ConnectionResetError()) == b"ok"
    assert len(calls) == 1


def test_budget_values_are_checked():
    with pytest.raises(ValueError, match="attempts"):
        RetryBudget(attempts=0)
    with pytest.raises(ValueError, match="seconds"):
        RetryBudget(seconds=0)
    assert RetryBudget.from_config({"attempts": 2}).to_config() == {
        "attempts": 2,
        "seconds": 120.0,
        "read_timeout_s": 30.0,
        "first_byte_timeout_s": 5.0,
        "hedge": True,
    }
    with pytest.raises(ValueError, match="first_byte_timeout_s"):
        RetryBudget(first_byte_timeout_s=0)


def test_retry_log_counts_the_retries_of_the_block():
    with retry.retry_log() as log:
        read, _ = failing([ConnectionResetError(), ConnectionResetError()])
        call(read, "u")
        assert log.count() == 2

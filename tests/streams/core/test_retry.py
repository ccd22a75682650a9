"""The retry loop: waits that double up to a maximum, a first failure handed in, stopping, and attempts."""

from __future__ import annotations

import pytest

from streams.core.retry import RetriesStopped, RetryPolicy, call_retried


class Flaky:
    """Fails with ``error`` the first ``failures`` calls, then answers."""

    def __init__(self, failures: int, error: Exception | None = None) -> None:
        self.failures = failures
        self.error = error or TimeoutError("no answer")
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return "answer"


POLICY = RetryPolicy((TimeoutError,), first_seconds=0.5, max_seconds=2.0)


def test_waits_double_up_to_the_maximum() -> None:
    assert list(RetryPolicy((TimeoutError,), 0.5, 2.0, attempts=6).delays()) == [0.5, 1.0, 2.0, 2.0, 2.0]


def test_retried_until_it_answers_and_each_wait_reported() -> None:
    waits: list[float] = []
    heard: list[tuple[str, float]] = []
    call = Flaky(3)
    result = call_retried(
        call,
        POLICY,
        on_retry=lambda error, delay: heard.append((str(error), delay)),
        wait=lambda seconds: waits.append(seconds) is not None,
    )
    assert result == "answer"
    assert call.calls == 4
    assert waits == [0.5, 1.0, 2.0]
    assert heard == [("no answer", 0.5), ("no answer", 1.0), ("no answer", 2.0)]


def test_a_first_failure_handed_in_waits_before_the_next_try() -> None:
    waits: list[float] = []
    call = Flaky(0)
    assert call_retried(call, POLICY, wait=lambda s: waits.append(s) is not None, failed=TimeoutError()) == "answer"
    assert (call.calls, waits) == (1, [0.5])


def test_other_errors_and_the_last_attempts_error_propagate() -> None:
    with pytest.raises(ValueError, match="bad"):
        call_retried(Flaky(1, ValueError("bad")), POLICY, wait=lambda s: False)
    call = Flaky(5)
    with pytest.raises(TimeoutError):
        call_retried(call, RetryPolicy((TimeoutError,), 0.1, 0.1, attempts=3), wait=lambda s: False)
    assert call.calls == 3


def test_a_wait_that_says_stop_ends_the_retries() -> None:
    with pytest.raises(RetriesStopped):
        call_retried(Flaky(1), POLICY, wait=lambda s: True)

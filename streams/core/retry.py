"""Trying a call again while it fails for a reason that passes: one loop, with its policy as data.

The hub's fetchers and the pipeline's readers both wait for a schema registry that
does not answer (a record is never skipped for that); each says how long and how
often by a :class:`RetryPolicy`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


class RetriesStopped(Exception):
    """The wait between two tries was cut short (the caller is stopping); the call did not succeed."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Which errors are tried again, after waits from ``first_seconds`` doubling up to ``max_seconds``.

    ``attempts`` is how many tries in all (None: until the call succeeds); the last
    try's error propagates, as does any error not in ``retryable``.
    """

    retryable: tuple[type[Exception], ...]
    first_seconds: float
    max_seconds: float
    attempts: int | None = None

    def delays(self) -> Iterator[float]:
        """The waits before the second try, the third, and so on."""
        delay = self.first_seconds
        tries = 1
        while self.attempts is None or tries < self.attempts:
            yield delay
            delay = min(delay * 2, self.max_seconds)
            tries += 1


def _sleep(seconds: float) -> bool:
    time.sleep(seconds)
    return False


def call_retried(
    call: Callable[[], T],
    policy: RetryPolicy,
    *,
    on_retry: Callable[[Exception, float], None] | None = None,
    wait: Callable[[float], bool] = _sleep,
    failed: Exception | None = None,
) -> T:
    """``call()``'s result, tried again by ``policy`` while it raises a retryable error.

    Before each wait ``on_retry(error, delay)`` hears why; ``wait(delay)`` waits and says
    whether to stop instead (then :class:`RetriesStopped`). ``failed`` is the retryable
    error of a first try the caller made itself (a hot path tries without this helper):
    the next try comes after the first wait.
    """
    delays = policy.delays()
    error = failed
    if error is None:
        try:
            return call()
        except policy.retryable as exc:
            error = exc
    for delay in delays:
        if on_retry is not None:
            on_retry(error, delay)
        if wait(delay):
            raise RetriesStopped(str(error)) from error
        try:
            return call()
        except policy.retryable as exc:
            error = exc
    raise error

"""How many new streams one worker admits per second: a token bucket, and the count of admissions.

A node lost or drained sends its clients to the others at once. Each new stream costs its
admission (the token checked, the resume planned, a catch-up read perhaps); past the bucket's
rate a request gets ``503`` with ``retry-after`` (clients that honour it come back a moment
later) instead of slowing every stream the worker already serves.
"""

from __future__ import annotations

import time

from streams.core.errors import AdmissionsBusy


class AdmissionRate:
    """A token bucket of ``per_second`` tokens (0: no limit), holding at most one second's worth."""

    __slots__ = ("_stamp", "_tokens", "admitted", "per_second", "refused")

    def __init__(self, per_second: float) -> None:
        self.per_second = per_second
        self._tokens = per_second
        self._stamp = time.monotonic()
        self.admitted = 0  # requests that took a token (or all of them, without a limit)
        self.refused = 0

    def take(self) -> None:
        """Take a token, or raise :class:`~streams.core.errors.AdmissionsBusy` (503, retry-after)."""
        if self.per_second > 0:
            now = time.monotonic()
            self._tokens = min(self.per_second, self._tokens + (now - self._stamp) * self.per_second)
            self._stamp = now
            if self._tokens < 1:
                self.refused += 1
                raise AdmissionsBusy(
                    f"this worker admits {self.per_second:g} new streams per second; try again",
                    headers=[(b"retry-after", b"1")],
                )
            self._tokens -= 1
        self.admitted += 1

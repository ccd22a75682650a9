"""A stream's sink for in-process benchmarks: it takes every write at once and counts the bytes."""

from __future__ import annotations

import time


class TakingSink:
    """A client that reads everything (never pending, never congested), up to ``limit`` pending bytes allowed."""

    def __init__(self, limit: int = 1 << 20) -> None:
        self.limit = limit
        self.last_write = time.monotonic()
        self.written = 0

    def write(self, data: bytes) -> bool:
        self.written += len(data)
        return True

    async def writable(self) -> None:
        return None

    def pending(self) -> int:
        return 0

    def congested(self) -> bool:
        return False

    def abort(self) -> None:
        return None

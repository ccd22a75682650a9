"""Fetched batches handed from a hub's fetch thread to its event loop.

A batch that arrives while the previous one still waits for the loop joins it:
when the fan-out is the bottleneck (many streams), the records that came
meanwhile go out together, one write per stream, and add no delay when it is
not. At most a few batches wait for the loop; the fetch thread blocks beyond
that, and librdkafka's own bounded queue absorbs the rest.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from streams.core.records import Record
from streams.fanout.kafka import PartitionEnd

# Items a batch waiting for the event loop may grow to by taking later fetches (then a new one starts).
MERGE_MAX = 5000
# Batches that may wait for the loop at once.
IN_FLIGHT = 4

Batch = list[Record | PartitionEnd]


class BatchHandoff:
    """Calls ``take`` on ``loop`` with each batch :meth:`put` on another thread (merged while they wait)."""

    __slots__ = ("_in_flight", "_loop", "_take", "_waiting", "_waiting_lock")

    def __init__(self, loop: asyncio.AbstractEventLoop, take: Callable[[Batch], None]) -> None:
        self._loop = loop
        self._take = take
        self._in_flight = threading.Semaphore(IN_FLIGHT)
        # The last batch handed to the loop, while the loop has not taken it yet.
        self._waiting: Batch | None = None
        self._waiting_lock = threading.Lock()

    def put(self, batch: Batch) -> None:
        """Hand ``batch`` to the loop (fetch thread; blocks while :data:`IN_FLIGHT` batches wait)."""
        with self._waiting_lock:
            waiting = self._waiting
            if waiting is not None and len(waiting) < MERGE_MAX:
                waiting.extend(batch)
                return
        self._in_flight.acquire()
        with self._waiting_lock:
            self._waiting = batch
        self._loop.call_soon_threadsafe(self._taken, batch)

    def _taken(self, batch: Batch) -> None:
        with self._waiting_lock:  # from here on nothing joins this batch
            if self._waiting is batch:
                self._waiting = None
        self._in_flight.release()
        self._take(batch)

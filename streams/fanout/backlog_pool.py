"""The consumers catch-ups read Kafka with: a few per cluster, lent for one chunk at a time.

A librdkafka consumer is an instance of its own: four threads, a connection per broker, and a
fetch queue it fills towards the log's end whether or not anyone reads it (librdkafka's default
read-ahead: 64 MiB, and 100,000 messages per partition). Each catch-up from Kafka used to open
one for its first chunk and keep it to its last, waiting for a reader slot between chunks with
it open: under churn the soak (``bench/soak.py``, 300 streams) counted 70 to 194 of them open at
once in one worker, 300 to 780 threads, and RSS grew with them.

Here a consumer is lent with a reader slot for one chunk and given back after it, so at most
``size`` exist per cluster, lent or idle. A catch-up gets back the consumer it read its last
chunk with if no other took it meanwhile (its fetch goes on where it was); else an idle one,
assigned anew; a new one only when none is idle. A consumer whose catch-up ended stops fetching
(unassigned); one idle for :data:`IDLE_SECONDS` is closed. Read-ahead is bounded to about two
chunks (:func:`backlog_consumer_settings`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# Catch-up works in chunks so one resume cannot hog the loop or a client's buffer.
CHUNK_RECORDS = 1000
CHUNK_BYTES = 1024 * 1024
# An idle consumer older than this is closed when the pool is next used.
IDLE_SECONDS = 60.0


def backlog_consumer_settings(wait_ms: int) -> dict[str, Any]:
    """librdkafka settings of a catch-up's consumer: the fetch wait, and read-ahead of about two chunks."""
    return {
        "fetch.wait.max.ms": wait_ms,
        "queued.min.messages": 2 * CHUNK_RECORDS,
        "queued.max.messages.kbytes": 2 * CHUNK_BYTES // 1024,
    }


@dataclass(eq=False)
class LentConsumer:
    """A consumer and what it was last asked: which topic, from where, and how far it fetched."""

    consumer: Any
    topic: str = ""
    # The positions of ``topic`` it is assigned at and has read up to ({}: assign before reading).
    assigned: dict[int, int] = field(default_factory=dict)
    # Per (topic, partition): just past the last record (or end) it handed out, over its whole life.
    fetched: dict[tuple[str, int], int] = field(default_factory=dict)
    idle_since: float = 0.0


def _fits(lent: LentConsumer | None, topic: str, positions: dict[int, int]) -> bool:
    """Whether ``lent`` can be assigned ``positions`` of ``topic``: it fetched nothing of it past them."""
    return lent is not None and all(o >= lent.fetched.get((topic, p), -1) for p, o in positions.items())


class BacklogConsumers:
    """A cluster's catch-up consumers: at most ``size``, lent one chunk at a time (thread-safe)."""

    def __init__(self, make: Callable[[], Any], size: int, idle_seconds: float = IDLE_SECONDS) -> None:
        self._make = make
        self.size = size
        self.idle_seconds = idle_seconds
        self._idle: list[LentConsumer] = []
        self._lock = threading.Lock()
        # Consumers made, renewed (closed and made again) and open now (lent or idle).
        self.made = self.renewed = self.count = 0

    def take(
        self, topic: str = "", positions: dict[int, int] | None = None, preferred: LentConsumer | None = None
    ) -> LentConsumer:
        """A consumer to read ``topic`` from ``positions`` with, best first.

        One that goes on exactly there (``preferred``, the catch-up's own, usually); one that
        fetched nothing of ``topic`` past ``positions`` (assigned anew, its stale records are
        dropped); a new one while fewer than ``size`` exist; else an idle one, which the
        reader renews (a consumer that fetched past a new start must not be assigned there).
        """
        wanted = positions or {}
        with self._lock:
            expired = self._expired()
            idle = self._idle
            chosen = next((c for c in idle if c.topic == topic and c.assigned == wanted and wanted), None)
            if chosen is None and preferred in idle and _fits(preferred, topic, wanted):
                chosen = preferred
            if chosen is None:
                chosen = next((c for c in reversed(idle) if _fits(c, topic, wanted)), None)
            if chosen is None and idle and self.count - len(expired) >= self.size:
                chosen = idle[-1]
            if chosen is not None:
                idle.remove(chosen)
        for lent in expired:
            self._close(lent)
        return chosen if chosen is not None else self._new()

    def give(self, lent: LentConsumer) -> None:
        """Back after a chunk: kept idle, or closed if ``size`` are idle already."""
        lent.idle_since = time.monotonic()
        with self._lock:
            if len(self._idle) < self.size:
                self._idle.append(lent)
                return
        self._close(lent)

    def renew(self, lent: LentConsumer) -> None:
        """Close ``lent``'s consumer and put a new one in its place (one that fetched nothing)."""
        lent.consumer.close()
        self.renewed += 1
        lent.consumer, lent.topic, lent.assigned, lent.fetched = self._make(), "", {}, {}

    def discard(self, lent: LentConsumer) -> None:
        """A consumer whose read failed: closed, never lent again."""
        self._close(lent)

    def rest(self, lent: LentConsumer | None) -> None:
        """The catch-up that read with ``lent`` ended: if it is idle, it stops fetching."""
        if lent is None:
            return
        with self._lock:
            if lent in self._idle and lent.assigned:
                lent.consumer.assign([])
                lent.assigned = {}

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for lent in idle:
            self._close(lent)

    @property
    def idle(self) -> int:
        return len(self._idle)

    def _new(self) -> LentConsumer:
        lent = LentConsumer(self._make())
        with self._lock:
            self.made += 1
            self.count += 1
        return lent

    def _close(self, lent: LentConsumer) -> None:
        lent.consumer.close()
        with self._lock:
            self.count -= 1

    def _expired(self) -> list[LentConsumer]:
        """Takes the consumers idle too long out of the pool (the lock is held)."""
        horizon = time.monotonic() - self.idle_seconds
        expired = [lent for lent in self._idle if lent.idle_since < horizon]
        if expired:
            self._idle = [lent for lent in self._idle if lent.idle_since >= horizon]
        return expired

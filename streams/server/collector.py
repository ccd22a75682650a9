"""Python's cycle collector, set for a server that holds many connections for a long time.

A full collection walks every object the collector tracks, and stops the event loop
while it does: a gateway with 10,000 open streams tracks about 600,000 objects
(about 50 per stream, and the startup heap), which takes 200-700 ms to walk on this
project's 2-core benchmark machine. CPython starts one whenever the objects that
reached the old generation since the last one pass a quarter of it. With the default
thresholds (700, 10, 10) every fetched batch set off a young collection, the records
still in the topic's cache survived it, and at 10,000 records a second that started a
full collection every 2-3 s: the whole tail of the per-user scenario
(``docs/benchmarks.md``).

:func:`collector_settle` runs once the process is ready to serve:

- the startup heap (modules, settings, the URLconf, the app) is frozen (``gc.freeze``):
  it lives as long as the process, so no collection walks it again;
- a young collection comes every :data:`YOUNG_THRESHOLD` net allocations of tracked
  objects, not every batch: records that leave the cache in between are freed by their
  reference counts and never reach the old generation; a middle one every
  :data:`MIDDLE_THRESHOLD` young ones, so neither walks more than about 100,000
  objects (a few to a few tens of milliseconds);
- the old generation is collected on a clock, every :data:`FULL_COLLECTION_SECONDS`,
  instead of when CPython's counts say so. What it frees is the cyclic garbage of
  connections that closed after living long enough to get there (Twisted's request,
  channel and transport refer to each other): it waits at most that long, and the
  one pause it costs comes at a known rate.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable

logger = logging.getLogger("sluice.streams")

# Net allocations of tracked objects between two young collections (CPython's default: 700).
YOUNG_THRESHOLD = 50_000
# Young collections between two middle ones (default 10).
MIDDLE_THRESHOLD = 2
# Middle collections before CPython would start a full one itself (default 10): in effect never,
# the clock below does it.
OLD_THRESHOLD = 1_000_000
# Seconds between two full collections.
FULL_COLLECTION_SECONDS = 300.0

CallLater = Callable[[float, Callable[[], object]], object]


def collector_settle(call_later: CallLater) -> None:
    """Freeze the startup heap, space out young collections, and collect the old generation on a clock.

    ``call_later(seconds, function)`` schedules on the server's event loop (Twisted's ``callLater``).
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, MIDDLE_THRESHOLD, OLD_THRESHOLD)
    call_later(FULL_COLLECTION_SECONDS, FullCollection(call_later))


class FullCollection:
    """One full collection, then the next one scheduled."""

    __slots__ = ("call_later",)

    def __init__(self, call_later: CallLater) -> None:
        self.call_later = call_later

    def __call__(self) -> None:
        started = time.perf_counter()
        freed = gc.collect()
        logger.debug("full collection: %d objects freed in %.0f ms", freed, (time.perf_counter() - started) * 1000)
        self.call_later(FULL_COLLECTION_SECONDS, self)

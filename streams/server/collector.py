"""Python's cycle collector, set for a server that holds many connections for a long time.

A full collection walks every object the collector tracks, and stops the event loop
while it does: a gateway with 10,000 open streams tracks about 600,000 objects
(about 50 per stream, and the startup heap), which takes 200-700 ms to walk on this
project's 2-core benchmark machine. CPython starts one whenever the objects that
reached the old generation since the last one pass a quarter of it: at 10,000
records a second the records still in the topic's cache get there, and that was a
full collection every 2-3 s, the whole tail of the per-user scenario
(``docs/benchmarks.md``).

:func:`collector_settle` runs once the process is ready to serve:

- the startup heap (modules, settings, the URLconf, the app) is frozen (``gc.freeze``):
  it lives as long as the process, so no collection walks it again;
- the young and middle generations keep CPython's thresholds: they hold a few
  thousand objects, so their collections take at most a few milliseconds (a larger
  young generation was tried: its middle collections walked 100,000 objects and
  took up to 110 ms);
- the old generation is collected on a clock, every :data:`FULL_COLLECTION_SECONDS`,
  never by CPython's counts. What it frees is the cyclic garbage of connections that
  closed after living long enough to get there (Twisted's request, channel and
  transport refer to each other): that waits at most this long, and the one pause it
  costs comes at a known rate;
- after it, the C heap's free pages go back to the system (glibc's ``malloc_trim``,
  about 1 ms). What C libraries free in the middle of the heap stays in the process's
  RSS otherwise: a compressed stream lets its compressor go while it is idle
  (streams/core/compression.py), and without the trim 2,000 idle Brotli streams that
  had each written ten events still showed 215 KiB of RSS apiece, 11 KiB with it
  (``bench/compressed_idle.py``).
"""

from __future__ import annotations

import ctypes
import gc
import logging
import os
import time
from collections.abc import Callable

logger = logging.getLogger("sluice.streams")

# Net allocations of tracked objects between two young collections: CPython's default.
YOUNG_THRESHOLD = 700
# Young collections between two middle ones: CPython's default.
MIDDLE_THRESHOLD = 10
# Middle collections before CPython would start a full one itself (default 10): in effect never,
# the clock below does it.
OLD_THRESHOLD = 1_000_000
# Seconds between two full collections.
FULL_COLLECTION_SECONDS = 300.0

CallLater = Callable[[float, Callable[[], object]], object]

# glibc's malloc_trim(pad): None where the C library has none (musl, macOS).
_MALLOC_TRIM: Callable[[int], int] | None = getattr(ctypes.CDLL(None), "malloc_trim", None)


# glibc's mallopt(M_ARENA_MAX, n): at most n malloc arenas for the process's threads.
_M_ARENA_MAX = -8
_MALLOPT: Callable[[int, int], int] | None = getattr(ctypes.CDLL(None), "mallopt", None)
# Arenas a worker's threads share: the event loop, the fetch and pool threads, librdkafka's.
ARENAS_MAX = 2


def arenas_cap() -> None:
    """Cap glibc's malloc arenas at :data:`ARENAS_MAX`, unless the operator set ``MALLOC_ARENA_MAX``.

    glibc gives each thread that allocates while another holds the heap an arena of its own,
    up to 8 per core: a worker's fetch, catch-up and librdkafka threads free into them in a
    pattern the trim after each full collection only partly gives back. At 1,000 streams with
    churn, RSS rose 15-19 MiB a minute and fell 70-85 MiB at each trim; with 2 arenas it held
    at 183-186 MiB (docs/reliability.md). Set in the environment too, so worker processes
    started from this one read it as glibc starts.
    """
    if "MALLOC_ARENA_MAX" in os.environ:
        return  # glibc read the operator's own value at start
    os.environ["MALLOC_ARENA_MAX"] = str(ARENAS_MAX)
    if _MALLOPT is not None:
        _MALLOPT(_M_ARENA_MAX, ARENAS_MAX)


def heap_trim() -> None:
    """Hand the C heap's free pages back to the system (nothing where the C library cannot)."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def collector_settle(call_later: CallLater) -> None:
    """Freeze the startup heap and collect the old generation on a clock, not by CPython's counts.

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
        heap_trim()
        logger.debug("full collection: %d objects freed in %.0f ms", freed, (time.perf_counter() - started) * 1000)
        self.call_later(FULL_COLLECTION_SECONDS, self)

"""Python's cycle collector, set for a server that holds many connections for a long time.

A full collection walks every object the collector tracks; a gateway with 10,000
open streams tracks about 700,000 (about 50 per stream, and the startup heap:
Django, the URLconf, the modules). With the default thresholds (700, 10, 10)
every fetched batch triggers a young collection, the records still in the topic's
cache survive it, and two young collections later they count towards a full one:
at 10,000 records a second that was a full collection every 2-3 s, each stopping
the event loop for 200-700 ms (``docs/benchmarks.md``), which was the whole tail of
the per-user scenario.

:func:`collector_settle` does two things once the process is ready to serve:

- freezes the startup heap (``gc.freeze``): modules, settings and the app live as long
  as the process, so no collection needs to walk them again;
- raises the young generation's threshold to :data:`YOUNG_THRESHOLD` allocations, so a
  young collection comes every few seconds under load, not every batch: records that
  leave the cache in between are freed by their reference counts without ever
  reaching the old generation. Young collections of that size take a few
  milliseconds. Cyclic garbage still goes: young cycles at the next young
  collection, old ones (a closed connection's Twisted objects) at the next full one.
"""

from __future__ import annotations

import gc

# Net allocations of tracked objects between two young collections (CPython's default: 700).
YOUNG_THRESHOLD = 50_000
# Young collections between two middle ones, and middle ones before a full one may run (defaults 10, 10).
MIDDLE_THRESHOLD = 10
OLD_THRESHOLD = 10


def collector_settle() -> None:
    """Freeze the startup heap and space out young collections (call once, before serving)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, MIDDLE_THRESHOLD, OLD_THRESHOLD)

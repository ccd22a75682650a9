"""What one hub counts per route, bumped once per batch (or per stream per batch), read at scrape time."""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict

# Upper bounds (seconds) of the delivery lag histogram's buckets; the last bucket is +Inf.
LAG_BOUNDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class LagHistogram:
    """Seconds from a record's Kafka timestamp to its write to a socket: bucket counts and their sum.

    Observed once per batch per route (not per delivery): the lag of the oldest record of the batch.
    """

    __slots__ = ("buckets", "count", "total")

    def __init__(self) -> None:
        self.buckets = [0] * (len(LAG_BOUNDS) + 1)
        self.count = 0
        self.total = 0.0

    def observe(self, seconds: float) -> None:
        self.buckets[bisect_left(LAG_BOUNDS, seconds)] += 1
        self.count += 1
        self.total += seconds

    def cumulative(self) -> list[tuple[str, int]]:
        """``(le, count)`` pairs as Prometheus histograms give them (cumulative, ending with +Inf)."""
        out, running = [], 0
        for bound, count in zip((*map(str, LAG_BOUNDS), "+Inf"), self.buckets, strict=True):
            running += count
            out.append((bound, running))
        return out


class RouteCounts:
    """Per-route counters of one hub."""

    __slots__ = (
        "bytes",
        "conflated",
        "delivered",
        "filtered",
        "invalid",
        "lag",
        "schema",
        "schema_records",
        "slow",
        "undecodable",
    )

    def __init__(self) -> None:
        self.delivered = 0  # events written to streams
        self.bytes = 0  # their bytes
        self.filtered = 0  # events a stream's filters kept from it
        self.schema = 0  # events kept from a stream by the topic's or the route's schema
        self.schema_records = 0  # records that failed the route's schema (once per record, live feed)
        self.invalid = 0  # events that could not be sent as text
        self.slow = 0  # events in writes that overflowed a slow client (it resumes from its last id)
        self.undecodable = 0  # events kept from a stream because the record did not decode by the topic's format
        self.lag = LagHistogram()  # record timestamp to socket write, live fan-out only
        self.conflated = 0  # events a conflated stream was not sent: a newer record of their key replaced them


class Dropped:
    """Events of one batch kept from a route's streams by a schema, or because they are not text."""

    __slots__ = ("invalid", "schema")

    def __init__(self) -> None:
        self.schema = 0
        self.invalid = 0


class BatchDrops(defaultdict[str, Dropped]):
    """:class:`Dropped` by route, made on first use (most batches drop nothing and make none)."""

    def __init__(self) -> None:
        super().__init__(Dropped)


class RouteTally:
    """The :class:`RouteCounts` of one hub's routes."""

    __slots__ = ("by_route",)

    def __init__(self) -> None:
        self.by_route: dict[str, RouteCounts] = {}

    def __call__(self, route: str) -> RouteCounts:
        counts = self.by_route.get(route)
        if counts is None:
            counts = self.by_route[route] = RouteCounts()
        return counts

    def batch(
        self,
        *,
        taken: int,
        topic_rejected: int,
        undecodable: int = 0,
        dropped: BatchDrops | None,
        passed: dict[str, int],
        live_routes: list[str],
        filtered_routes: dict[str, int],
    ) -> None:
        """Per-route drops of one batch: schema and encoding as counted, filters as what remains.

        ``taken`` records reached the streams (``topic_rejected`` failed the topic's
        schema, so every live stream missed them); ``passed`` is what each route's
        filtered streams were sent, so the rest of ``taken`` per filtered stream was
        kept from them by their filters.
        """
        if dropped:
            for route, drop in dropped.items():
                counts = self(route)
                counts.schema += drop.schema
                counts.invalid += drop.invalid
        if topic_rejected:
            for route in live_routes:
                self(route).schema += topic_rejected
        if undecodable:
            for route in live_routes:
                self(route).undecodable += undecodable
        for route, streams in filtered_routes.items():
            if streams:
                matched = passed.get(route, 0)
                if dropped and route in dropped:
                    # Filtered streams' schema/encoding drops share the route key with unfiltered ones;
                    # count the remainder as filtered, never below zero.
                    matched += dropped[route].schema + dropped[route].invalid
                self(route).filtered += max(0, taken * streams - matched)

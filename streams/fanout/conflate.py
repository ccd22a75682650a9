"""Conflated live streams (route option ``conflate: {by: key, max_rate: N}``; docs/filters.md, "Conflation").

Live streams of one route that see the same records in the same form (a
:class:`ConflateKey`) share one :class:`~streams.core.conflation.LatestTable`:
the fan-out puts each record they accept into it once, and a
:class:`ConflatedGroup` writes its streams what they are owed, the newest
record of every key that changed, at most ``max_rate`` times a second (at once
after each batch with no rate). A stream whose connection has not taken its
last write is skipped and stays owed: it is never cut for being slow, and its
next write brings it the latest value of every key it missed. Streams written
at the same moment share one tail of the table and one joined buffer, so a
write costs the group once per distinct position, not once per stream.

Lossless streams never come here: this costs them one test per record.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol

from streams.core.conflation import LatestTable
from streams.fanout.counts import RouteTally
from streams.fanout.cutoffs import Cutoffs
from streams.fanout.subscriber import Subscriber

if TYPE_CHECKING:
    from streams.core.filters import FilterSet
    from streams.core.records import Record
    from streams.core.schemas import SchemaCheck

# A stream owed records whose connection is congested is looked at again this often (or at the rate, if slower).
CONGESTED_RETRY_SECONDS = 0.05


class ConflateKey(NamedTuple):
    """Conflated streams that share a table: same route, filters, event form and rate."""

    route: str
    filters: FilterSet
    form: str
    binary: str
    schema: SchemaCheck | None
    max_rate: int
    limit: int  # the route's max_pending_bytes: a write's budget and the table's bound

    @classmethod
    def of(cls, sub: Subscriber) -> ConflateKey:
        assert sub.conflate is not None
        return cls(sub.route, sub.filters, sub.form, sub.binary, sub.schema, sub.conflate, sub.sink.limit)


class Totals(Protocol):
    """The hub's totals a group adds to (:class:`streams.fanout.state.HubCounters`)."""

    invalid: int
    deliveries: int


@dataclass(frozen=True, slots=True)
class ConflationHost:
    """What the groups need of their hub: its topic, counts, token ends, and how to cut a stream."""

    topic: str
    tally: RouteTally
    counters: Totals
    cutoffs: Cutoffs
    cut: Callable[[Subscriber], None]


class ConflatedGroup:
    """The streams of one :class:`ConflateKey`, their table and when they are next written."""

    __slots__ = (
        "budget",
        "host",
        "interval",
        "key",
        "last",
        "loop",
        "retrying",
        "streams",
        "table",
        "timer",
    )

    def __init__(self, key: ConflateKey, host: ConflationHost) -> None:
        self.key = key
        self.host = host
        self.loop = asyncio.get_running_loop()
        self.table = LatestTable()
        self.streams: dict[Subscriber, None] = {}
        self.interval = 1.0 / key.max_rate if key.max_rate else 0.0
        # Bytes per write: inside the client's bound, so a write never cuts it (the rest follows).
        self.budget = max(1, key.limit // 2)
        self.last = -1e9  # loop time of the last write
        self.timer: asyncio.Handle | None = None
        self.retrying = False  # the timer only looks again at congested streams: new records arm it anew

    def add(self, sub: Subscriber) -> None:
        """A stream level with the hub joins: it is owed what the table gets from now on."""
        sub.conflated = self
        sub.conflated_seq = self.table.seq
        self.streams[sub] = None

    def remove(self, sub: Subscriber) -> bool:
        """Take ``sub`` out; True if the group is left empty (its timer is then stopped)."""
        self.streams.pop(sub, None)
        sub.conflated = None
        if self.streams:
            return False
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        return True

    def owes(self, sub: Subscriber) -> bool:
        """Whether ``sub`` has records waiting: its progress may not move past them yet."""
        return sub.conflated_seq < self.table.seq

    def offer(self, record: Record) -> None:
        """One record of the live feed (the fan-out's loop): into the table if the streams accept it."""
        key = self.key
        if not key.filters.admits(record):
            return
        schema = key.schema
        if schema is not None and not schema.admits(record):
            self.host.tally(key.route).schema += len(self.streams)
            schema.rejected_log(self.host.topic, record, f"route {key.route}")
            return
        frame = record.live_frame(key.form, key.binary)
        if frame is None:
            self.host.counters.invalid += 1
            self.host.tally(key.route).invalid += len(self.streams)
            return
        assert record.progress_id is not None
        self.table.put(record.key, frame, record.progress_id, record.value is None)
        if self.timer is None or self.retrying:
            self.arm(0.0)

    def arm(self, wait: float) -> None:
        """Write the streams once ``wait`` seconds and the rate's interval since the last write have passed."""
        if self.timer is not None:
            self.timer.cancel()
        self.retrying = wait > 0
        loop = self.loop
        at = max(loop.time() + wait, self.last + self.interval)
        self.timer = loop.call_at(at, self.write) if at > loop.time() else loop.call_soon(self.write)

    def write(self) -> None:
        """Write each stream that can take it what it is owed; streams still owed are written again later."""
        self.timer = None
        table = self.table
        self.host.cutoffs.run_due()  # streams whose token expired end before this write
        self.last = self.loop.time()
        due: dict[int, list[Subscriber]] = {}
        congested = False
        for sub in self.streams:
            if sub.conflated_seq < table.seq and not sub.is_closed:
                if sub.sink.congested():
                    congested = True  # it has not taken the last write: the latest waits for it
                else:
                    due.setdefault(sub.conflated_seq, []).append(sub)
        more = False
        for after, subs in due.items():
            more = self.send(after, subs) or more
        self.trim()
        if self.streams and (more or congested):
            # What a write's budget left follows as soon as the rate allows; a congested stream is looked at again.
            self.arm(0.0 if more else CONGESTED_RETRY_SECONDS)

    def send(self, after: int, subs: list[Subscriber]) -> bool:
        """Write the streams written up to ``after`` what they are owed; True if more remains for them."""
        owed = self.table.owed(after, self.budget)
        data = owed.frames[0] if len(owed.frames) == 1 else b"".join(owed.frames)
        events, size = len(owed.frames), len(data)
        sent = 0
        for sub in subs:
            sub.conflated_seq = owed.upto
            if events:
                sub.sent_progress = owed.token
                if not sub.sink.write(data):
                    self.host.tally(sub.route).slow += events
                    self.host.cut(sub)
                    continue
                sub.events += events
                sub.bytes += size
            sent += 1
        counts = self.host.tally(self.key.route)
        counts.delivered += sent * events
        counts.bytes += sent * size
        counts.conflated += sent * owed.superseded
        self.host.counters.deliveries += sent * events
        return owed.upto < self.table.seq

    def trim(self) -> None:
        """Drop what every stream was written past; over the bound, cut the streams furthest behind."""
        table, streams = self.table, self.streams
        while True:
            low = min((sub.conflated_seq for sub in streams), default=table.seq)
            table.prune(low)
            if table.bytes <= self.key.limit or low >= table.seq:
                return
            # What the slowest are owed (the latest of every key, tombstones, records without a key)
            # outgrew the route's bound: they resume from their last id, as a lossless stream would.
            for sub in [sub for sub in streams if sub.conflated_seq == low]:
                self.host.cut(sub)


class Conflation:
    """A hub's conflated live streams, by :class:`ConflateKey`; the fan-out offers each record to every group."""

    __slots__ = ("groups", "host")

    def __init__(self) -> None:
        self.groups: dict[ConflateKey, ConflatedGroup] = {}
        self.host: ConflationHost | None = None

    def bind(self, host: ConflationHost) -> None:
        """The hub whose streams these are (set once, before any stream joins)."""
        self.host = host

    def add(self, sub: Subscriber) -> None:
        key = ConflateKey.of(sub)
        group = self.groups.get(key)
        if group is None:
            if self.host is None:
                raise RuntimeError("Conflation.bind comes first")
            group = self.groups[key] = ConflatedGroup(key, self.host)
        group.add(sub)

    def remove(self, sub: Subscriber) -> None:
        key = ConflateKey.of(sub)
        group = self.groups.get(key)
        if group is not None and group.remove(sub):
            del self.groups[key]

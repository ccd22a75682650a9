"""One open stream as the hub sees it: its options, its sink, and (while catching up) its position."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from streams.core.filters import FilterSet
from streams.core.records import BINARY_SKIP, ID_ETAG
from streams.fanout.sinks import Sink

if TYPE_CHECKING:
    from streams.core.schemas import SchemaCheck


@dataclass(frozen=True, slots=True)
class SubscriberOptions:
    """What a route asks of its streams' events (SPEC 2): which, with which ids, how often kept alive."""

    filters: FilterSet = field(default_factory=FilterSet)
    form: str = ID_ETAG  # the id form: etag or key
    binary: str = BINARY_SKIP  # values that are not UTF-8: skip or base64
    heartbeat_seconds: float = 15.0
    schema: SchemaCheck | None = None  # the route's schema (the topic's is the hub's)
    route: str = ""  # the route's path pattern, for per-route counts


class GroupKey(NamedTuple):
    """Live streams without filters that can share one buffer per batch."""

    form: str
    binary: str
    schema: SchemaCheck | None
    route: str


class Subscriber:
    """One open stream: its filters, id form, sink and (while catching up) position."""

    # The options are copied onto the subscriber: the fan-out reads them per record.
    __slots__ = (
        "filters",
        "form",
        "binary",
        "sink",
        "heartbeat_seconds",
        "positions",
        "sent_progress",
        "since_ms",
        "since_partitions",
        "closed",
        "close_reason",
        "task",
        "demoted",
        "schema",
        "route",
        "events",
        "bytes",
        "__weakref__",
    )

    def __init__(self, sink: Sink, options: SubscriberOptions | None = None) -> None:
        options = options or SubscriberOptions()
        self.sink = sink
        self.filters = options.filters
        self.form = options.form
        self.binary = options.binary
        self.heartbeat_seconds = options.heartbeat_seconds
        self.schema = options.schema
        self.route = options.route
        # Events and their bytes written to this stream (counted per write, for the access log).
        self.events = 0
        self.bytes = 0
        # Next offset per partition while catching up; None once live (then the hub's).
        self.positions: dict[int, int] | None = None
        # Progress of the last id the client was sent, to know when a checkpoint is due.
        self.sent_progress: str | None = None
        self.since_ms: int | None = None
        # While catching up from ``since``: the partitions not yet past it.
        self.since_partitions: set[int] | None = None
        self.closed: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.close_reason: str | None = None
        self.task: asyncio.Task[None] | None = None
        # Was live, fell behind its connection and now catches up from the cache.
        self.demoted = False

    @property
    def is_live(self) -> bool:
        return self.positions is None

    @property
    def group(self) -> GroupKey:
        return GroupKey(self.form, self.binary, self.schema, self.route)

    def end(self, reason: str) -> None:
        if not self.closed.done():
            self.close_reason = reason
            self.closed.set_result(reason)

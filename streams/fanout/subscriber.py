"""One open stream as the hub sees it: its options, its sink, and (while catching up) its position."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, Protocol

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
    # Conflation by key (docs/filters.md): None is lossless; else the most writes a second (0: no cap).
    conflate: int | None = None


class Conflated(Protocol):
    """The conflated group a live stream is in (:class:`streams.fanout.conflate.ConflatedGroup`)."""

    def owes(self, sub: Subscriber) -> bool:
        """Whether ``sub`` has records waiting (its progress may not move past them yet)."""


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
        "_loop",
        "_closed",
        "_on_end",
        "close_reason",
        "task",
        "demoted",
        "schema",
        "route",
        "events",
        "bytes",
        "conflate",
        "conflated",
        "conflated_seq",
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
        self.conflate = options.conflate
        # While live on a conflated route: its group, and the group's sequence it was written up to.
        self.conflated: Conflated | None = None
        self.conflated_seq = 0
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
        self._loop = asyncio.get_running_loop()
        # The end as a future, made only when something awaits it (see closed): an open stream on
        # daphne is told by a callback (on_end), and a future per stream, with the context each
        # callback copies, was about 250 B of every idle stream.
        self._closed: asyncio.Future[str] | None = None
        self._on_end: tuple[Callable[[], object], ...] = ()
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

    @property
    def closed(self) -> asyncio.Future[str]:
        """Resolves with the close reason once the stream has ended (made when first asked for)."""
        if self._closed is None:
            self._closed = self._loop.create_future()
            if self.close_reason is not None:
                self._closed.set_result(self.close_reason)
        return self._closed

    @property
    def is_closed(self) -> bool:
        return self.close_reason is not None

    def on_end(self, callback: Callable[[], object]) -> None:
        """Call ``callback`` soon, on the event loop, once the stream has ended (scheduled now if it has)."""
        if self.close_reason is not None:
            self._loop.call_soon(callback)
        else:
            self._on_end = (*self._on_end, callback)

    def end(self, reason: str) -> None:
        if self.close_reason is not None:
            return
        self.close_reason = reason
        if self._closed is not None:
            self._closed.set_result(reason)
        callbacks, self._on_end = self._on_end, ()
        for callback in callbacks:
            self._loop.call_soon(callback)

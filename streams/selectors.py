"""Reads of stream configuration, cached briefly for the hot path.

Opening a stream needs the route table and its topic's settings. Both are read
from the database at most every ``SLUICE_ROUTE_CACHE_SECONDS`` per worker, one
read at a time: a storm of reconnecting clients shares one read instead of
queueing thousands behind the database (see ``Refreshed``). A configuration
change made in this process, or broadcast by another one, drops both at once.
The route table is rebuilt only when the configuration's revision moved since
it was built (``streams.route_tables``): renewing it otherwise is one query.
While the database is away, the last ones read are served (docs/reliability.md,
"The database away").
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Generic, TypeVar

from cachetools import LRUCache
from channels.db import database_sync_to_async

from common.database import DATABASE_AWAY, RETRY_AFTER_SECONDS, RETRY_SECONDS, database_watch
from streams.conf import streams_settings
from streams.core.clusters import ClusterSpec
from streams.core.errors import DatabaseNotAvailable
from streams.core.formats.spec import FormatError, RecordFormats
from streams.core.patterns import PatternError, pattern_compile
from streams.core.routes import RouteTable
from streams.core.schemas import SchemaCheck
from streams.fanout.cache import CacheLimits
from streams.models import Route, Topic
from streams.route_tables import RouteTableSource, schema_check

T = TypeVar("T")


class Refreshed(Generic[T]):
    """A value read by ``load`` (a database read in a thread) and reused for ``ROUTE_CACHE_SECONDS``.

    For one more ``ROUTE_CACHE_SECONDS`` after that it is still served at once while
    a read in the background renews it; older than that, callers wait for a read,
    and callers that find it so while a read is under way wait for that read
    rather than starting their own. ``invalidate`` drops the value and any read
    under way (a read that began before a change must not be kept after it).
    With a cache time of 0 every call reads.

    While the database is away (the last read failed), the last value read is
    served at once and the read is tried again in the background at most every
    ``RETRY_SECONDS``; with no value read yet, :class:`DatabaseNotAvailable`.
    """

    def __init__(self, load: Callable[[], Awaitable[T]]) -> None:
        self._load = load
        self._value: tuple[float, T] | None = None
        self._reading: asyncio.Future[T] | None = None
        self._generation = 0
        # The last value read and when (kept through invalidation: it stands in while the database is away).
        self._kept: tuple[float, T] | None = None
        self._failed_at: float | None = None
        self.served_stale = 0

    async def get(self) -> T:
        seconds = streams_settings.ROUTE_CACHE_SECONDS
        value = self._value
        if value is not None:
            age = time.monotonic() - value[0]
            if age < seconds:
                return value[1]
            if age < 2 * seconds and self._failed_at is None:
                # Stale by less than the cache time: served at once, and one read in the background
                # renews it. A storm of opens does not wait on a read (a thread) once a cache time.
                self._reading_start()
                return value[1]
        if self._failed_at is not None:
            return await self._while_away(self._failed_at)
        if seconds <= 0:
            return await self._read(self._generation)
        return await asyncio.shield(self._reading_start())

    @property
    def unknown(self) -> bool:
        """Never read, and the last read failed."""
        return self._kept is None and self._failed_at is not None

    def stale_seconds(self) -> float:
        """How old the value served in place of a fresh read is (0 while the database answers)."""
        if self._failed_at is None or self._kept is None:
            return 0.0
        return time.monotonic() - self._kept[0]

    def _reading_start(self) -> asyncio.Future[T]:
        reading = self._reading
        if reading is None or reading.get_loop() is not asyncio.get_running_loop():
            reading = self._reading = asyncio.ensure_future(self._read(self._generation))
        return reading

    async def _while_away(self, failed_at: float) -> T:
        due = time.monotonic() - failed_at >= RETRY_SECONDS
        kept = self._kept
        if kept is None:
            if not due:
                raise _not_available()
            return await asyncio.shield(self._reading_start())
        if due:
            self._reading_start()  # in the background: no request waits for a database that may hang
        self.served_stale += 1
        return kept[1]

    async def _read(self, generation: int) -> T:
        started = time.monotonic()
        try:
            value = await self._load()
        except DATABASE_AWAY as exc:
            self._failed_at = time.monotonic()
            database_watch.failed(exc)
            if self._kept is None:
                raise _not_available() from exc
            self.served_stale += 1
            return self._kept[1]
        finally:
            if self._generation == generation:
                self._reading = None
        self._failed_at = None
        database_watch.answered()
        if self._generation == generation:
            self._value = self._kept = (started, value)
        return value

    def invalidate(self) -> None:
        self._generation += 1
        self._value = None
        self._reading = None


def _not_available() -> DatabaseNotAvailable:
    return DatabaseNotAvailable(
        "the database does not answer and no configuration was read before it went away",
        headers=[(b"retry-after", str(RETRY_AFTER_SECONDS).encode())],
    )


_source = RouteTableSource()
_table: Refreshed[RouteTable] = Refreshed(database_sync_to_async(_source.read))
# Per topic name; names can come from path parameters, so the number kept is bounded.
_topics: LRUCache[str, Refreshed[TopicSettings]] = LRUCache(maxsize=1024)


async def route_table_reload() -> RouteTable:
    """The route table, read again now (after a configuration change)."""
    route_table_invalidate()
    return await route_table()


async def route_table() -> RouteTable:
    """The route table, renewed at most every ``ROUTE_CACHE_SECONDS`` (the last one read while the database is away).

    Renewed: rebuilt if the configuration's revision moved, else kept (see :class:`RouteTableSource`).
    """
    return await _table.get()


@dataclass(frozen=True, slots=True)
class RouteTableStaleness:
    """What ``/metrics`` shows of the route table served while the database is away."""

    seconds: float  # how old the table served is; 0 while the database answers
    served: int  # requests served from a table read before the database went away, since the start


def route_table_unknown() -> bool:
    """True while no route table could be read yet (the database was away from the start)."""
    return _table.unknown


def route_table_staleness() -> RouteTableStaleness:
    return RouteTableStaleness(_table.stale_seconds(), _table.served_stale)


def route_table_invalidate() -> None:
    """Drop the cached route table and topic settings (the configuration changed)."""
    _table.invalidate()
    _source.forget()
    # Each entry drops its value and any read under way, and keeps its stand-in for a database outage
    # (the keys listed first: a look-up reorders the LRU).
    for name in list(_topics):
        _topics[name].invalidate()


async def topic_settings_async(name: str) -> TopicSettings:
    """``topic_settings``, cached like the route table."""
    cached = _topics.get(name)
    if cached is None:
        cached = _topics[name] = Refreshed(partial(_topic_settings_read, name))
    return await cached.get()


@dataclass(frozen=True, slots=True)
class TopicSettings:
    """What a hub needs of a topic's configuration: cache bounds, compiled schema, cluster (None: the default).

    ``configured``: the topic has a Topic row (a stream waits for such a topic to be created in Kafka).
    """

    limits: CacheLimits = field(default_factory=CacheLimits)
    schema: SchemaCheck | None = None
    cluster: ClusterSpec | None = None
    formats: RecordFormats | None = None
    configured: bool = False


def topic_settings(name: str) -> TopicSettings:
    """The settings of ``name``: its Topic row's, or the defaults (no schema, the default cluster) if it has none."""
    topic = Topic.objects.filter(name=name).select_related("schema", "cluster").first()
    if topic is None:
        return TopicSettings()
    limits = CacheLimits(
        max_messages=topic.cache_max_messages,
        max_bytes=topic.cache_max_bytes,
        max_age_seconds=float(topic.cache_max_age_seconds),
    )
    return TopicSettings(
        limits,
        schema_check(topic.schema) if topic.schema is not None else None,
        topic.cluster.spec() if topic.cluster is not None else None,
        topic_formats(topic),
        configured=True,
    )


def topic_formats(topic: Topic) -> RecordFormats | None:
    """The topic's record formats; None for text (records as they are) or formats that cannot work.

    A row saved through the admin, the API or a file is checked there; one that cannot
    work all the same (its avro-inline schema was edited by hand) is reported and read as text.
    """
    try:
        return topic.formats()
    except FormatError as exc:
        logging.getLogger("sluice.formats").error(
            "topic %s: %s: %s; its records are read as text", topic, exc.field, exc
        )
        return None


_topic_settings_read = database_sync_to_async(topic_settings)


@dataclass(frozen=True, slots=True)
class RouteListing:
    """What the pages show of a route a visitor may open."""

    id: int
    path: str
    kind: str
    guarded: bool
    description: str
    params: tuple[str, ...]
    wildcard: bool

    def as_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "path": self.path,
            "kind": self.kind,
            "guarded": self.guarded,
            "description": self.description,
            "params": list(self.params),
            "wildcard": self.wildcard,
        }


def route_listing() -> list[RouteListing]:
    """Enabled routes in match order, with their path parameters (for the landing page and the viewer)."""
    listing = []
    for route in Route.objects.filter(enabled=True).order_by("order", "path"):
        try:
            params = pattern_compile(route.path).params
        except PatternError:
            continue  # not servable either
        listing.append(
            RouteListing(
                id=route.pk,
                path=route.path,
                kind=route.kind,
                guarded=route.guard_id is not None,
                description=route.description or route.topic or route.upstream,
                params=params,
                wildcard="*" in route.path,
            )
        )
    return listing

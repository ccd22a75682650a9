"""The per-process Kafka fan-out (SPEC 2.3-2.5).

One :class:`TopicHub` per topic per worker process reads the topic with ONE
consumer (a :class:`~streams.fanout.kafka.LiveFetcher` thread), keeps recent records
in a bounded per-partition cache, and writes each record's frame, encoded
once, to every live subscriber whose filters accept it.

A subscriber that starts behind the hub's position (resume, ``earliest``,
``snapshot``, ``since``) first catches up in its own task: from the cache when
it covers the position, otherwise from Kafka with a short-lived
:class:`~streams.fanout.kafka.BacklogReader`. It joins the live set in the same
event-loop step that sees it level with the hub, so nothing is missed or
repeated in between.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from streams.core.filters import FilterSet
from streams.core.ids import EventId, progress_encode
from streams.core.records import BINARY_SKIP, ID_ETAG, Record
from streams.core.sse import HEARTBEAT, checkpoint_frame, preamble
from streams.fanout.cache import CacheLimits, PartitionCache
from streams.fanout.kafka import BacklogReader, KafkaAccess, KafkaUnavailable, LiveFetcher, PartitionEnd
from streams.fanout.sinks import Sink

if TYPE_CHECKING:
    from streams.core.schemas import SchemaCheck

logger = logging.getLogger("sluice.hub")

INITIAL_LIVE = "live"
INITIAL_EARLIEST = "earliest"
INITIAL_SNAPSHOT = "snapshot"

# Catch-up works in chunks so one resume cannot hog the loop or a client's buffer.
# After a backlog read found Kafka unavailable, wait this long before trying again.
_BACKLOG_RETRY_SECONDS = 1.0
_CHUNK_RECORDS = 1000
_CHUNK_BYTES = 1024 * 1024

T = TypeVar("T")


# A group of live streams without filters that share one buffer: id form, binary mode, route schema, route.
GroupKey = tuple[str, str, "SchemaCheck | None", str]


class RouteCounts:
    """Per-route counters of one hub, bumped once per batch (or per stream per batch), read at scrape time."""

    __slots__ = ("bytes", "delivered", "filtered", "invalid", "schema", "schema_records", "slow")

    def __init__(self) -> None:
        self.delivered = 0  # events written to streams
        self.bytes = 0  # their bytes
        self.filtered = 0  # events a stream's filters kept from it
        self.schema = 0  # events kept from a stream by the topic's or the route's schema
        self.schema_records = 0  # records that failed the route's schema (once per record, live feed)
        self.invalid = 0  # events that could not be sent as text
        self.slow = 0  # events in writes that overflowed a slow client (it resumes from its last id)


class PositionError(ValueError):
    """A last event id that does not fit the route's topic."""


@dataclass(slots=True)
class StartPlan:
    """Where a new stream starts: the next offset per partition, and how."""

    positions: dict[int, int]
    snapshot: bool = False
    since_ms: int | None = None
    since_partitions: set[int] = field(default_factory=set)


class Subscriber:
    """One open stream: its filters, id form, sink and (while catching up) position."""

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
        "hub",
        "demoted",
        "schema",
        "route",
        "events",
        "bytes",
        "__weakref__",
    )

    def __init__(
        self,
        sink: Sink,
        filters: FilterSet | None = None,
        form: str = ID_ETAG,
        binary: str = BINARY_SKIP,
        heartbeat_seconds: float = 15.0,
        schema: SchemaCheck | None = None,
        route: str = "",
    ) -> None:
        self.sink = sink
        # The route's schema (None: none); the topic's is the hub's.
        self.schema = schema
        # The route's path pattern, for per-route counts.
        self.route = route
        # Events and their bytes written to this stream (counted per write, for the access log).
        self.events = 0
        self.bytes = 0
        self.filters = filters or FilterSet()
        self.form = form
        self.binary = binary
        self.heartbeat_seconds = heartbeat_seconds
        # Next offset per partition while catching up; None once live (then the hub's).
        self.positions: dict[int, int] | None = None
        # Progress of the last id the client was sent, to know when a checkpoint is due.
        self.sent_progress: str | None = None
        self.since_ms: int | None = None
        self.since_partitions: set[int] = set()
        self.closed: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.close_reason: str | None = None
        self.task: asyncio.Task[None] | None = None
        self.hub: TopicHub | None = None
        # Was live, fell behind its connection and now catches up from the cache.
        self.demoted = False

    @property
    def is_live(self) -> bool:
        return self.positions is None

    def end(self, reason: str) -> None:
        if not self.closed.done():
            self.close_reason = reason
            self.closed.set_result(reason)


class TopicHub:
    """Reads one topic once for the whole process and fans it out."""

    def __init__(self, topic: str, access: KafkaAccess, limits: CacheLimits) -> None:
        self.topic = topic
        self.access = access
        self.limits = limits
        self.partitions: list[int] = []
        self.next: dict[int, int] = {}
        self.caches: dict[int, PartitionCache] = {}
        self.live: dict[Subscriber, None] = {}
        # The live set split for the fan-out: streams without filters share one
        # joined buffer per id form; filtered ones are matched record by record.
        self._unfiltered: dict[GroupKey, dict[Subscriber, None]] = {}
        self._filtered: dict[Subscriber, None] = {}
        # The filtered streams split again: those whose filters all name a key, by key
        # (a record is matched only against the streams of its key), and the rest.
        self._by_key: dict[bytes, dict[Subscriber, None]] = {}
        self._any_key: dict[Subscriber, None] = {}
        # Live streams with filters per route, to count what filters keep from them per batch.
        self._filtered_routes: dict[str, int] = {}
        # The topic's schema: a record it rejects reaches no stream (SPEC 5).
        self.schema: SchemaCheck | None = None
        self.schema_invalid = 0
        self.route_counts: dict[str, RouteCounts] = {}
        self.catching_up: dict[Subscriber, None] = {}
        self.cached_records = 0
        self.cached_bytes = 0
        self.records_in = 0
        self.deliveries = 0
        self.cut_slow = 0
        self.demotions = 0
        self.invalid = 0
        # Catch-ups that read the cache / Kafka (a catch-up counts once per source it used).
        self.catch_ups_cache = 0
        self.catch_ups_kafka = 0
        self._progress_id: str | None = None
        self._ready = asyncio.Event()
        self._ended: set[int] = set()
        self._advanced = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._in_flight = threading.Semaphore(4)
        self._fetcher: LiveFetcher | None = None

    # -- life cycle -------------------------------------------------------------

    async def _blocking(self, func: Callable[..., T], *args: Any) -> T:
        return await self._loop.run_in_executor(self.access.executor, func, *args)

    async def start(self) -> None:
        """Find the partitions and their ends, start the fetcher, wait until level."""
        self.partitions = await self._blocking(self.access.partitions, self.topic)
        marks = await self._blocking(self.access.watermarks, self.topic, self.partitions)
        # Start at the last record (some brokers report the high watermark as the
        # last batch's base + 1), so the hub learns the true end from the fetch.
        start = {p: max(low, high - 1) if high > low else low for p, (low, high) in marks.items()}
        self.next = dict(start)
        self.caches = {p: PartitionCache(p, o) for p, o in start.items()}
        self._fetcher = LiveFetcher(self.access, self.topic, start, self._from_thread)
        self._fetcher.start()
        try:
            await asyncio.wait_for(self._ready.wait(), timeout=self.access.timeout)
        except TimeoutError as exc:
            self.stop()
            raise KafkaUnavailable(f"topic {self.topic} did not answer within {self.access.timeout}s") from exc

    def stop(self) -> None:
        for sub in [*self.live, *self.catching_up]:
            self.unsubscribe(sub)
            sub.end("shutdown")
        if self._fetcher is not None:
            self._fetcher.stop()
            self._fetcher = None

    def lag(self) -> dict[int, int]:
        """Records per partition the hub has yet to read: the fetch's high watermark minus the hub's position."""
        fetcher = self._fetcher
        if fetcher is None:
            return {}
        nxt = self.next
        return {p: max(0, high - nxt[p]) for p, high in fetcher.high_watermarks.items() if p in nxt}

    @property
    def progress_id(self) -> str:
        """The hub's position as a progress token (cached until it moves)."""
        if self._progress_id is None:
            self._progress_id = progress_encode(self.next)
        return self._progress_id

    # -- ingest (event loop) ---------------------------------------------------

    def _from_thread(self, batch: list[Record | PartitionEnd]) -> None:
        # At most a few batches wait for the loop; the fetcher blocks beyond that,
        # and librdkafka's own bounded queue absorbs the rest.
        self._in_flight.acquire()
        self._loop.call_soon_threadsafe(self._ingest, batch)

    def _ingest(self, batch: list[Record | PartitionEnd]) -> None:
        self._in_flight.release()
        # Every live subscriber has been written everything before this batch.
        before = dict(self.next)
        shared: defaultdict[GroupKey, list[bytes]] = defaultdict(list)
        shared_last: dict[GroupKey, str] = {}
        out: defaultdict[Subscriber, list[bytes]] = defaultdict(list)
        last: dict[Subscriber, str] = {}
        unfiltered = self._unfiltered
        by_key = self._by_key
        any_key = self._any_key
        nxt = self.next
        topic_schema = self.schema
        # Records the streams saw this batch, and what schemas or encoding kept from them:
        # counted here per record (or per group), never per frame per stream.
        taken = 0
        topic_rejected = 0
        kept: defaultdict[str, list[int]] | None = None
        for item in batch:
            partition = item.partition
            if not self._ready.is_set():
                # Its end or its first record shows the fetch has reached where the hub
                # started: a partition written to without pause may never report its end.
                self._ended.add(partition)
                if len(self._ended) == len(self.partitions):
                    self._ready.set()
            if type(item) is PartitionEnd:
                if item.offset > nxt[partition]:
                    nxt[partition] = item.offset
                    self._progress_id = None
                continue
            record: Record = item  # type: ignore[assignment]
            if record.offset < nxt[partition]:
                continue
            nxt[partition] = record.offset + 1
            self._progress_id = None
            record.progress_id = progress_id = self.progress_id
            self.caches[partition].append(record)
            self.cached_records += 1
            self.cached_bytes += record.size
            self.records_in += 1
            if topic_schema is not None and not topic_schema.admits(record):
                # Progress still moves past it: the next frame or checkpoint carries it.
                topic_rejected += 1
                topic_schema.rejected_log(self.topic, record, "topic")
                continue
            taken += 1
            for group, subs in unfiltered.items():
                if subs:
                    schema = group[2]
                    if schema is not None and not schema.admits(record):
                        kept = kept or defaultdict(lambda: [0, 0])
                        kept[group[3]][0] += len(subs)
                        self._counts(group[3]).schema_records += 1
                        schema.rejected_log(self.topic, record, f"route {group[3]}")
                        continue
                    frame = record.live_frame(group[0], group[1])
                    if frame is None:
                        self.invalid += 1
                        kept = kept or defaultdict(lambda: [0, 0])
                        kept[group[3]][1] += len(subs)
                    else:
                        shared[group].append(frame)
                        shared_last[group] = progress_id
            keyed = by_key.get(record.key) if by_key and record.key is not None else None
            for candidates in (any_key, keyed) if keyed else (any_key,):
                for sub in candidates:
                    if sub.filters.matches(record.key, record.headers):
                        schema = sub.schema
                        if schema is not None and not schema.admits(record):
                            kept = kept or defaultdict(lambda: [0, 0])
                            kept[sub.route][0] += 1
                            schema.rejected_log(self.topic, record, f"route {sub.route}")
                            continue
                        frame = record.live_frame(sub.form, sub.binary)
                        if frame is None:
                            self.invalid += 1
                            kept = kept or defaultdict(lambda: [0, 0])
                            kept[sub.route][1] += 1
                        else:
                            out[sub].append(frame)
                            last[sub] = progress_id
        self._evict()
        for group, frames in shared.items():
            data = frames[0] if len(frames) == 1 else b"".join(frames)
            progress = shared_last[group]
            sent = 0
            for sub in list(unfiltered[group]):
                sent += self._send_live(sub, data, len(frames), progress, before)
            if sent:
                counts = self._counts(group[3])
                counts.delivered += sent * len(frames)
                counts.bytes += sent * len(data)
        passed: defaultdict[str, int] = defaultdict(int)
        for sub, frames in out.items():
            data = frames[0] if len(frames) == 1 else b"".join(frames)
            passed[sub.route] += len(frames)
            if self._send_live(sub, data, len(frames), last[sub], before):
                counts = self._counts(sub.route)
                counts.delivered += len(frames)
                counts.bytes += len(data)
        if taken or topic_rejected:
            self._batch_count(taken, topic_rejected, kept, passed)
        self._advanced.set()
        self._advanced = asyncio.Event()

    def _batch_count(
        self, taken: int, topic_rejected: int, kept: defaultdict[str, list[int]] | None, passed: dict[str, int]
    ) -> None:
        """Per-route drops of one batch: schema and encoding as counted, filters as what remains."""
        self.schema_invalid += topic_rejected
        if kept:
            for route, (schema, invalid) in kept.items():
                counts = self._counts(route)
                counts.schema += schema
                counts.invalid += invalid
        if topic_rejected:
            for sub in self.live:
                self._counts(sub.route).schema += topic_rejected
        for route, streams in self._filtered_routes.items():
            if streams:
                matched = passed.get(route, 0)
                if kept and route in kept:
                    # Filtered streams' schema/encoding drops share the route key with unfiltered ones;
                    # count the remainder as filtered, never below zero.
                    matched += sum(kept[route])
                self._counts(route).filtered += max(0, taken * streams - matched)

    def _counts(self, route: str) -> RouteCounts:
        counts = self.route_counts.get(route)
        if counts is None:
            counts = self.route_counts[route] = RouteCounts()
        return counts

    def _send_live(self, sub: Subscriber, data: bytes, count: int, progress: str, before: dict[int, int]) -> int:
        """Write one batch to a live stream; 1 if it was written, 0 if the stream was deferred or cut."""
        if sub.sink.congested():
            # The client has not taken what it was sent yet. Stop pushing: it catches
            # up from the cache at its own pace, from where it was level, so a burst
            # that outruns a healthy connection does not pile up in its buffer.
            self._demote(sub, before)
            return 0
        sub.sent_progress = progress
        self.deliveries += count
        if not sub.sink.write(data):
            self._counts(sub.route).slow += count
            self._cut(sub)
            return 0
        sub.events += count
        sub.bytes += len(data)
        return 1

    def _live_add(self, sub: Subscriber) -> None:
        self.live[sub] = None
        if sub.filters.accepts_all:
            self._unfiltered.setdefault((sub.form, sub.binary, sub.schema, sub.route), {})[sub] = None
        else:
            self._filtered[sub] = None
            self._filtered_routes[sub.route] = self._filtered_routes.get(sub.route, 0) + 1
            keys = sub.filters.keys
            if keys is None:
                self._any_key[sub] = None
            else:
                for key in keys:
                    self._by_key.setdefault(key, {})[sub] = None

    def _live_remove(self, sub: Subscriber) -> None:
        if self.live.pop(sub, 0) is None:
            if self._filtered.pop(sub, 0) is None:
                self._filtered_routes[sub.route] -= 1
                if self._any_key.pop(sub, 0) is not None:
                    for key in sub.filters.keys or ():
                        subs = self._by_key.get(key)
                        if subs is not None:
                            subs.pop(sub, None)
                            if not subs:
                                del self._by_key[key]
            group = self._unfiltered.get((sub.form, sub.binary, sub.schema, sub.route))
            if group is not None:
                group.pop(sub, None)

    def admits(self, sub: Subscriber, record: Record) -> bool:
        """Whether the topic's and the stream's route schema let ``record`` through (catch-up path)."""
        schema = self.schema
        if schema is not None and not schema.admits(record):
            return False
        schema = sub.schema
        return schema is None or schema.admits(record)

    def _demote(self, sub: Subscriber, positions: dict[int, int]) -> None:
        self._live_remove(sub)
        self.demotions += 1
        sub.demoted = True
        sub.positions = dict(positions)
        self.catching_up[sub] = None
        sub.task = self._loop.create_task(self._catch_up(sub, False), name=f"sluice-catch-up-{self.topic}")

    def _evict(self) -> None:
        limits = self.limits
        while self.cached_records > limits.max_messages or self.cached_bytes > limits.max_bytes:
            victim = min(
                (c for c in self.caches.values() if len(c)),
                key=lambda c: c.oldest().timestamp,  # type: ignore[union-attr]
            )
            record = victim.evict_oldest()
            self.cached_records -= 1
            self.cached_bytes -= record.size

    def evict_expired(self, now_ms: int) -> None:
        cutoff = now_ms - int(self.limits.max_age_seconds * 1000)
        for cache in self.caches.values():
            while (oldest := cache.oldest()) is not None and oldest.timestamp < cutoff:
                cache.evict_oldest()
                self.cached_records -= 1
                self.cached_bytes -= oldest.size

    # -- subscribers -------------------------------------------------------------

    async def plan(self, *, last: EventId | None, initial: str, since_ms: int | None) -> StartPlan:
        """Work out a new stream's start position (SPEC 2.3); may ask Kafka."""
        parts = self.partitions
        if last is not None:
            unknown = sorted(set(last.progress) - set(parts))
            if unknown:
                raise PositionError(
                    f"last event id names partition {unknown[0]}, but topic {self.topic} has {len(parts)}"
                )
            positions = dict(last.progress)
            if len(positions) < len(parts) or any(positions[p] < self.caches[p].start for p in positions):
                lows = await self._lows()
                for p in parts:
                    positions[p] = max(positions.get(p, lows[p]), lows[p])
            return StartPlan(positions)
        if since_ms is not None:
            return await self._plan_since(since_ms)
        if initial in (INITIAL_EARLIEST, INITIAL_SNAPSHOT):
            return StartPlan(await self._lows(), snapshot=initial == INITIAL_SNAPSHOT)
        return StartPlan(dict(self.next))

    async def _lows(self) -> dict[int, int]:
        marks = await self._blocking(self.access.watermarks, self.topic, self.partitions)
        return {p: low for p, (low, _) in marks.items()}

    async def _plan_since(self, since_ms: int) -> StartPlan:
        positions: dict[int, int] = {}
        # Ask Kafka for every partition, even when the cache holds records older than
        # `since`: timestamps need not grow with offsets, so a record before the cache
        # may still be newer. The cache serves the catch-up, not this answer.
        lookup = list(self.partitions)
        pending: set[int] = set()
        if lookup:
            # The broker's answer is only a lower bound (some answer 0), so the
            # catch-up also skips records older than `since` until the first newer one.
            found_offsets = await self._blocking(self.access.offsets_for_time, self.topic, lookup, since_ms)
            lows = await self._lows()
            for p in lookup:
                offset = found_offsets.get(p, -1)
                positions[p] = self.next[p] if offset < 0 else max(offset, lows[p])
                if positions[p] < self.next[p]:
                    pending.add(p)
        return StartPlan(positions, since_ms=since_ms, since_partitions=pending)

    def subscribe(self, sub: Subscriber, plan: StartPlan, retry_ms: int | None) -> None:
        """Attach ``sub``: write its preamble and start checkpoint, then feed it.

        Runs without awaiting, so a stream whose plan is the hub's position goes
        live in the same step and cannot miss a record.
        """
        sub.hub = self
        sub.since_ms = plan.since_ms
        sub.since_partitions = set(plan.since_partitions)
        start_id = progress_encode(plan.positions)
        sub.sent_progress = start_id
        if not sub.sink.write(preamble(retry_ms, start_id)):
            self._cut(sub)
            return
        if not plan.snapshot and plan.positions == self.next:
            self._live_add(sub)
            return
        sub.positions = dict(plan.positions)
        self.catching_up[sub] = None
        sub.task = self._loop.create_task(self._catch_up(sub, plan.snapshot), name=f"sluice-catch-up-{self.topic}")

    def unsubscribe(self, sub: Subscriber) -> None:
        self._live_remove(sub)
        self.catching_up.pop(sub, None)
        if sub.task is not None and not sub.task.done() and sub.task is not asyncio.current_task():
            sub.task.cancel()

    def _cut(self, sub: Subscriber) -> None:
        """A client over its pending-bytes limit: drop it; it resumes from its last id."""
        self.cut_slow += 1
        self.unsubscribe(sub)
        sub.sink.abort()
        sub.end("slow")

    def heartbeat(self, now: float) -> None:
        """Keep-alive for quiet streams, with a checkpoint if progress moved silently.

        Also cuts streams that fell behind while live and whose position has since
        left the cache: they cannot keep up, and resume from their last id.
        """
        for sub in [*self.live, *self.catching_up]:
            if sub.demoted and sub.positions is not None and self._behind_cache(sub.positions):
                self._cut(sub)
                continue
            if now - sub.sink.last_write < sub.heartbeat_seconds or sub.sink.congested():
                continue
            current = self.progress_id if sub.positions is None else progress_encode(sub.positions)
            if current != sub.sent_progress:
                sub.sent_progress = current
                data = b":\n" + checkpoint_frame(current)
            else:
                data = HEARTBEAT
            if not sub.sink.write(data):
                self._cut(sub)

    def _behind_cache(self, positions: dict[int, int]) -> bool:
        return any(offset < self.caches[p].start for p, offset in positions.items())

    # -- catch-up ----------------------------------------------------------------

    async def _catch_up(self, sub: Subscriber, snapshot: bool) -> None:
        reader: BacklogReader | None = None
        used_cache = used_kafka = False
        budget = self._chunk_budget(sub)
        try:
            if snapshot:
                reader = BacklogReader(self.access, self.topic)
                await self._snapshot(sub, reader)
            while True:
                positions = sub.positions
                assert positions is not None
                nxt = self.next
                behind = {p: o for p, o in positions.items() if o < nxt[p]}
                if not behind:
                    if any(o > nxt[p] for p, o in positions.items()):
                        await self._wait_for_hub(sub)
                        continue
                    # Level with the hub in every partition: live from this step on.
                    self.catching_up.pop(sub, None)
                    sub.positions = None
                    sub.demoted = False
                    sub.since_partitions.clear()
                    self._live_add(sub)
                    return
                chunk: list[list[Record]] = []
                cold: dict[int, tuple[int, int]] = {}
                level: dict[int, int] = {}
                for p, offset in behind.items():
                    cache = self.caches[p]
                    if cache.covers(offset):
                        records = cache.records_from(offset, _CHUNK_RECORDS)
                        if len(records) < _CHUNK_RECORDS and not self._trim(records, budget // len(behind)):
                            # All the cache has up to the hub's position, which may
                            # lie past the last record (compaction, control records).
                            level[p] = nxt[p]
                        if records:
                            chunk.append(records)
                    else:
                        cold[p] = (offset, cache.start)
                if not chunk and cold:
                    if sub.demoted:
                        self._cut(sub)  # fell out of the cache while live: cannot keep up
                        return
                    if not used_kafka:
                        used_kafka = True
                        self.catch_ups_kafka += 1
                    if reader is None:
                        reader = BacklogReader(self.access, self.topic)
                    try:
                        records, reached = await self._read_backlog(reader, cold, budget)
                    except KafkaUnavailable as exc:
                        # Broker down (SPEC 2.5): the stream stays open, heartbeats go on, and the read is retried.
                        logger.warning("catch-up on %s waiting for Kafka: %s", self.topic, exc)
                        await self._blocking(reader.close)
                        reader = None
                        await asyncio.wait([sub.closed], timeout=_BACKLOG_RETRY_SECONDS)
                        if sub.closed.done():
                            return
                        continue
                    chunk = self._by_partition(records)
                    self._deliver(sub, chunk)
                    for p, offset in reached.items():
                        positions[p] = max(positions[p], offset)
                else:
                    if chunk and not used_cache:
                        used_cache = True
                        self.catch_ups_cache += 1
                    self._deliver(sub, chunk)
                    positions.update(level)
                if sub.closed.done():
                    return
                await sub.sink.writable()
        except KafkaUnavailable as exc:
            logger.warning("catch-up on %s stopped: %s", self.topic, exc)
            self.unsubscribe(sub)
            sub.sink.abort()
            sub.end("kafka")
        finally:
            if reader is not None:
                await self._blocking(reader.close)

    async def _wait_for_hub(self, sub: Subscriber) -> None:
        """An id ahead of this hub (another instance read further): wait, then clamp."""
        try:
            await asyncio.wait_for(self._advanced.wait(), timeout=self.access.timeout)
        except TimeoutError:
            assert sub.positions is not None
            for p, offset in sub.positions.items():
                sub.positions[p] = min(offset, self.next[p])

    async def _read_backlog(
        self, reader: BacklogReader, ranges: dict[int, tuple[int, int]], max_bytes: int = _CHUNK_BYTES
    ) -> tuple[list[Record], dict[int, int]]:
        # Wait for a slot on the loop: a pool thread blocked on it could starve the reads holding the slots.
        async with self.access.backlog_slots:
            return await self._blocking(reader.read, ranges, _CHUNK_RECORDS, max_bytes)

    @staticmethod
    def _chunk_budget(sub: Subscriber) -> int:
        """Bytes per catch-up chunk: well inside the client's bound, so a chunk never cuts it."""
        return max(1, min(_CHUNK_BYTES, sub.sink.limit // 4))

    @staticmethod
    def _trim(records: list[Record], budget: int) -> bool:
        """Cut ``records`` (in place) to about ``budget`` bytes; True if anything was cut."""
        total = 0
        for index, record in enumerate(records):
            total += record.size
            if total > budget and index > 0:
                del records[index:]
                return True
        return False

    @staticmethod
    def _by_partition(records: Iterable[Record]) -> list[list[Record]]:
        groups: dict[int, list[Record]] = {}
        for record in records:
            groups.setdefault(record.partition, []).append(record)
        return list(groups.values())

    def _deliver(self, sub: Subscriber, chunk: list[list[Record]]) -> None:
        """Write catch-up records to one subscriber, each with its own progress id."""
        positions = sub.positions
        assert positions is not None
        frames: list[bytes] = []
        # Interleave partitions by time (as they were produced), keeping each one's order.
        merged = heapq.merge(*chunk, key=lambda r: r.timestamp) if len(chunk) > 1 else iter(chunk[0] if chunk else ())
        since_ms, since_partitions = sub.since_ms, sub.since_partitions
        counts = self._counts(sub.route)
        for record in merged:
            p = record.partition
            positions[p] = record.offset + 1
            if since_partitions and p in since_partitions:
                if record.timestamp < (since_ms or 0):
                    continue
                since_partitions.discard(p)
            if not sub.filters.matches(record.key, record.headers):
                counts.filtered += 1
                continue
            if not self.admits(sub, record):
                # Skipped, yet the next id or checkpoint carries the progress past it.
                counts.schema += 1
                continue
            progress = progress_encode(positions)
            frame = record.frame(progress, sub.form, sub.binary)
            if frame is None:
                self.invalid += 1
                counts.invalid += 1
                continue
            frames.append(frame)
            sub.sent_progress = progress
        if frames:
            self.deliveries += len(frames)
            data = b"".join(frames)
            if not sub.sink.write(data):
                counts.slow += len(frames)
                self._cut(sub)
            else:
                counts.delivered += len(frames)
                counts.bytes += len(data)
                sub.events += len(frames)
                sub.bytes += len(data)

    async def _snapshot(self, sub: Subscriber, reader: BacklogReader) -> None:
        """Latest value per key from the retained log (tombstoned keys left out).

        Entries go out partition by partition in offset order; each id says
        "earlier partitions done, this one up to here, later ones from the
        start", so a resume mid-snapshot replays (never loses) the rest.
        """
        positions = sub.positions
        assert positions is not None
        start = dict(positions)
        end = dict(self.next)
        latest: dict[int, dict[bytes | None, Record]] = {p: {} for p in self.partitions}
        keyless: dict[int, list[Record]] = {p: [] for p in self.partitions}
        cursor = dict(start)
        while True:
            ranges = {p: (cursor[p], end[p]) for p in self.partitions if cursor[p] < end[p]}
            if not ranges:
                break
            records, reached = await self._read_backlog(reader, ranges)
            for record in records:
                if record.key is None:
                    keyless[record.partition].append(record)
                elif record.value is None:
                    latest[record.partition].pop(record.key, None)
                else:
                    latest[record.partition][record.key] = record
            for p, offset in reached.items():
                cursor[p] = max(cursor[p], offset)
        frames: list[bytes] = []
        pending = 0
        budget = self._chunk_budget(sub)
        for index, p in enumerate(self.partitions):
            kept = sorted([*latest[p].values(), *keyless[p]], key=lambda r: r.offset)
            for record in kept:
                if not sub.filters.matches(record.key, record.headers) or not self.admits(sub, record):
                    continue
                progress = progress_encode(
                    {q: (end[q] if i < index else start[q]) for i, q in enumerate(self.partitions) if q != p}
                    | {p: record.offset + 1}
                )
                frame = record.frame(progress, sub.form, sub.binary)
                if frame is None:
                    self.invalid += 1
                    continue
                frames.append(frame)
                pending += len(frame)
                if len(frames) >= _CHUNK_RECORDS or pending >= budget:
                    if not sub.sink.write(b"".join(frames)):
                        self._cut(sub)
                        return
                    self._snapshot_count(sub, len(frames), pending)
                    frames.clear()
                    pending = 0
                    await sub.sink.writable()
        positions.update(end)
        sub.sent_progress = progress_encode(positions)
        events = len(frames)
        frames.append(checkpoint_frame(sub.sent_progress))
        if not sub.sink.write(b"".join(frames)):
            self._cut(sub)
        else:
            self._snapshot_count(sub, events, pending)

    def _snapshot_count(self, sub: Subscriber, events: int, size: int) -> None:
        counts = self._counts(sub.route)
        counts.delivered += events
        counts.bytes += size
        sub.events += events
        sub.bytes += size


class HubRegistry:
    """The hubs of one worker process, created on first use, plus their shared ticker."""

    def __init__(self, access: KafkaAccess, idle_seconds: float = 300.0) -> None:
        self.access = access
        # A hub with no stream for this long is stopped: its consumer, thread and cache go.
        self.idle_seconds = idle_seconds
        self._idle_since: dict[str, float] = {}
        self._hubs: dict[str, TopicHub] = {}
        self._starting: dict[str, asyncio.Future[TopicHub]] = {}
        self._ticker: asyncio.Task[None] | None = None

    @property
    def hubs(self) -> dict[str, TopicHub]:
        return self._hubs

    async def hub(self, topic: str, limits: CacheLimits, schema: SchemaCheck | None = None) -> TopicHub:
        """The topic's hub, started (and level with Kafka) on first use.

        ``schema`` is the topic's schema as the caller read it from the configuration:
        a change applies from the next record the hub reads.
        """
        found = self._hubs.get(topic)
        if found is not None:
            self._idle_since.pop(topic, None)  # about to be used: not idle
            found.schema = schema
            return found
        starting = self._starting.get(topic)
        if starting is not None:
            started = await asyncio.shield(starting)
            started.schema = schema
            return started
        future: asyncio.Future[TopicHub] = asyncio.get_running_loop().create_future()
        self._starting[topic] = future
        try:
            hub = TopicHub(topic, self.access, limits)
            hub.schema = schema
            await hub.start()
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: waiters re-raise it themselves
            raise
        finally:
            self._starting.pop(topic, None)
        self._hubs[topic] = hub
        future.set_result(hub)
        if self._ticker is None:
            self._ticker = asyncio.get_running_loop().create_task(self._tick(), name="sluice-hub-ticker")
        return hub

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            now = time.monotonic()
            now_ms = int(time.time() * 1000)
            for hub in list(self._hubs.values()):
                try:
                    hub.heartbeat(now)
                    hub.evict_expired(now_ms)
                except Exception:
                    logger.exception("hub ticker failed for %s", hub.topic)
            self.sweep_idle(now)

    def sweep_idle(self, now: float) -> list[str]:
        """Stop hubs that have had no stream for ``idle_seconds``; return their topics."""
        stopped = []
        for topic, hub in list(self._hubs.items()):
            if hub.live or hub.catching_up:
                self._idle_since.pop(topic, None)
                continue
            since = self._idle_since.setdefault(topic, now)
            if now - since >= self.idle_seconds:
                del self._hubs[topic]
                del self._idle_since[topic]
                hub.stop()
                stopped.append(topic)
                logger.info("stopped the idle hub of %s", topic)
        return stopped

    def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
        for hub in self._hubs.values():
            hub.stop()
        self._hubs.clear()
        self._idle_since.clear()

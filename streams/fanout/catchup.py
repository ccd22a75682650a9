"""Bringing one stream level with its hub: from the cache, from Kafka, or a snapshot of the log.

A stream that starts behind the hub's position (resume, ``earliest``,
``snapshot``, ``since``), or that fell behind its connection while live, reads
in its own task: from the cache when it covers the position, otherwise from
Kafka with a short-lived :class:`~streams.fanout.kafka.BacklogReader`. It joins
the live set in the same event-loop step that sees it level with the hub, so
nothing is missed or repeated in between.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from streams.core.formats.registry import RegistryUnavailable
from streams.core.ids import progress_encode
from streams.core.records import Record
from streams.core.sse import checkpoint_frame
from streams.fanout.backlog import BacklogReader
from streams.fanout.kafka import KafkaUnavailable
from streams.fanout.subscriber import Subscriber

if TYPE_CHECKING:
    from streams.fanout.hub import TopicHub

logger = logging.getLogger("sluice.hub")

# Catch-up works in chunks so one resume cannot hog the loop or a client's buffer.
CHUNK_RECORDS = 1000
CHUNK_BYTES = 1024 * 1024
# After a backlog read found Kafka unavailable, wait this long before trying again.
BACKLOG_RETRY_SECONDS = 1.0


class CatchUp:
    """One stream's way from its position to the hub's."""

    __slots__ = ("budget", "hub", "reader", "sub", "used_cache", "used_kafka")

    def __init__(self, hub: TopicHub, sub: Subscriber) -> None:
        self.hub = hub
        self.sub = sub
        self.reader: BacklogReader | None = None
        self.used_cache = self.used_kafka = False
        # Bytes per chunk: well inside the client's bound, so a chunk never cuts it.
        self.budget = max(1, min(CHUNK_BYTES, sub.sink.limit // 4))

    async def run(self, snapshot: bool) -> None:
        hub, sub = self.hub, self.sub
        try:
            if snapshot:
                self.reader = BacklogReader(hub.access, hub.topic, hub.record_make)
                await self.snapshot()
            while await self.step():
                if sub.is_closed:
                    return
                await sub.sink.writable()
        except (KafkaUnavailable, RegistryUnavailable) as exc:
            logger.warning("catch-up on %s stopped: %s", hub.topic, exc)
            hub.unsubscribe(sub)
            sub.sink.abort()
            sub.end("kafka")
        finally:
            if self.reader is not None:
                await hub.blocking(self.reader.close)

    async def step(self) -> bool:
        """Deliver one chunk (or go live); False once the stream is live or over."""
        hub, sub = self.hub, self.sub
        positions = sub.positions
        assert positions is not None
        nxt = hub.next
        behind = {p: o for p, o in positions.items() if o < nxt[p]}
        if not behind:
            if any(o > nxt[p] for p, o in positions.items()):
                await self.wait_for_hub()
                return True
            hub.go_live(sub)  # level with the hub in every partition: live from this step on
            return False
        chunk: list[list[Record]] = []
        cold: dict[int, tuple[int, int]] = {}
        level: dict[int, int] = {}
        for p, offset in behind.items():
            cache = hub.cache[p]
            if cache.covers(offset):
                records = cache.records_from(offset, CHUNK_RECORDS)
                if len(records) < CHUNK_RECORDS and not records_trim(records, self.budget // len(behind)):
                    # All the cache has up to the hub's position, which may
                    # lie past the last record (compaction, control records).
                    level[p] = nxt[p]
                if records:
                    chunk.append(records)
            else:
                cold[p] = (offset, cache.start)
        if chunk or not cold:
            if chunk and not self.used_cache:
                self.used_cache = True
                hub.catch_ups_cache += 1
            self.deliver(chunk)
            positions.update(level)
            return True
        if sub.demoted:
            hub.cut(sub)  # fell out of the cache while live: cannot keep up
            return False
        return await self.from_kafka(cold)

    async def from_kafka(self, cold: dict[int, tuple[int, int]]) -> bool:
        hub, sub = self.hub, self.sub
        if not self.used_kafka:
            self.used_kafka = True
            hub.catch_ups_kafka += 1
        if self.reader is None:
            self.reader = BacklogReader(hub.access, hub.topic, hub.record_make)
        try:
            records, reached = await self.read_backlog(cold, self.budget)
        except (KafkaUnavailable, RegistryUnavailable) as exc:
            # Broker or schema registry down (SPEC 2.5, 8): the stream stays open, heartbeats go on,
            # and the read is retried from where the stream is.
            logger.warning("catch-up on %s waiting: %s", hub.topic, exc)
            await hub.blocking(self.reader.close)
            self.reader = None
            await asyncio.wait([sub.closed], timeout=BACKLOG_RETRY_SECONDS)
            return not sub.is_closed
        self.deliver(records_by_partition(records))
        positions = sub.positions
        assert positions is not None
        for p, offset in reached.items():
            positions[p] = max(positions[p], offset)
        return True

    async def wait_for_hub(self) -> None:
        """An id ahead of this hub (another instance read further): wait, then clamp."""
        hub, sub = self.hub, self.sub
        try:
            await asyncio.wait_for(hub.advanced.wait(), timeout=hub.access.timeout)
        except TimeoutError:
            assert sub.positions is not None
            for p, offset in sub.positions.items():
                sub.positions[p] = min(offset, hub.next[p])

    async def read_backlog(
        self, ranges: dict[int, tuple[int, int]], max_bytes: int = CHUNK_BYTES
    ) -> tuple[list[Record], dict[int, int]]:
        hub, reader = self.hub, self.reader
        assert reader is not None
        # Wait for a slot on the loop: a pool thread blocked on it could starve the reads holding the slots.
        async with hub.access.backlog_slots:
            return await hub.blocking(reader.read, ranges, CHUNK_RECORDS, max_bytes)

    def ended_by_now(self) -> bool:
        """Whether the stream is over, once the ends due by now have run.

        A token that expired ends the stream before its next write, however late the loop runs
        (:mod:`streams.fanout.cutoffs`).
        """
        self.hub.cutoffs.run_due()
        return self.sub.is_closed

    def deliver(self, chunk: list[list[Record]]) -> None:
        """Write catch-up records to the stream, each with its own progress id."""
        hub, sub = self.hub, self.sub
        if self.ended_by_now():
            return
        positions = sub.positions
        assert positions is not None
        frames: list[bytes] = []
        # Interleave partitions by time (as they were produced), keeping each one's order.
        merged = heapq.merge(*chunk, key=lambda r: r.timestamp) if len(chunk) > 1 else iter(chunk[0] if chunk else ())
        since_ms, since_partitions = sub.since_ms, sub.since_partitions
        counts = hub.tally(sub.route)
        for record in merged:
            p = record.partition
            positions[p] = record.offset + 1
            if since_partitions and p in since_partitions:
                if record.timestamp < (since_ms or 0):
                    continue
                since_partitions.discard(p)
            if record.problem is not None:
                counts.undecodable += 1  # logged when it was read; the next id carries the progress past it
                continue
            if not sub.filters.matches(record.match_key, record.headers):
                counts.filtered += 1
                continue
            if not hub.admits(sub, record):
                # Skipped, yet the next id or checkpoint carries the progress past it.
                counts.schema += 1
                continue
            progress = progress_encode(positions)
            frame = record.frame(progress, sub.form, sub.binary)
            if frame is None:
                hub.invalid += 1
                counts.invalid += 1
                continue
            frames.append(frame)
            sub.sent_progress = progress
        if frames:
            hub.deliveries += len(frames)
            data = b"".join(frames)
            if not sub.sink.write(data):
                counts.slow += len(frames)
                hub.cut(sub)
            else:
                counts.delivered += len(frames)
                counts.bytes += len(data)
                sub.events += len(frames)
                sub.bytes += len(data)

    async def snapshot(self) -> None:
        """Latest value per key from the retained log (tombstoned keys left out).

        Entries go out partition by partition in offset order; each id says
        "earlier partitions done, this one up to here, later ones from the
        start", so a resume mid-snapshot replays (never loses) the rest.
        """
        hub, sub = self.hub, self.sub
        positions = sub.positions
        assert positions is not None
        start = dict(positions)
        end = dict(hub.next)
        latest, keyless = await self.snapshot_read(start, end)
        frames: list[bytes] = []
        pending = 0
        for index, p in enumerate(hub.partitions):
            kept = sorted([*latest[p].values(), *keyless[p]], key=lambda r: r.offset)
            for record in kept:
                if not sub.filters.matches(record.match_key, record.headers) or not hub.admits(sub, record):
                    continue
                progress = progress_encode(
                    {q: (end[q] if i < index else start[q]) for i, q in enumerate(hub.partitions) if q != p}
                    | {p: record.offset + 1}
                )
                frame = record.frame(progress, sub.form, sub.binary)
                if frame is None:
                    hub.invalid += 1
                    continue
                frames.append(frame)
                pending += len(frame)
                if len(frames) >= CHUNK_RECORDS or pending >= self.budget:
                    if self.ended_by_now():
                        return
                    if not sub.sink.write(b"".join(frames)):
                        hub.cut(sub)
                        return
                    self.snapshot_count(len(frames), pending)
                    frames.clear()
                    pending = 0
                    await sub.sink.writable()
        positions.update(end)
        sub.sent_progress = progress_encode(positions)
        events = len(frames)
        frames.append(checkpoint_frame(sub.sent_progress))
        if self.ended_by_now():
            return
        if not sub.sink.write(b"".join(frames)):
            hub.cut(sub)
        else:
            self.snapshot_count(events, pending)

    async def snapshot_read(
        self, start: dict[int, int], end: dict[int, int]
    ) -> tuple[dict[int, dict[bytes, Record]], dict[int, list[Record]]]:
        """The latest record per key, and every keyless record, of each partition between ``start`` and ``end``."""
        partitions = self.hub.partitions
        latest: dict[int, dict[bytes, Record]] = {p: {} for p in partitions}
        keyless: dict[int, list[Record]] = {p: [] for p in partitions}
        cursor = dict(start)
        while True:
            ranges = {p: (cursor[p], end[p]) for p in partitions if cursor[p] < end[p]}
            if not ranges:
                return latest, keyless
            records, reached = await self.read_backlog(ranges)
            for record in records:
                if record.key is None:
                    keyless[record.partition].append(record)
                elif record.value is None:
                    latest[record.partition].pop(record.key, None)
                else:
                    latest[record.partition][record.key] = record
            for p, offset in reached.items():
                cursor[p] = max(cursor[p], offset)

    def snapshot_count(self, events: int, size: int) -> None:
        sub = self.sub
        counts = self.hub.tally(sub.route)
        counts.delivered += events
        counts.bytes += size
        sub.events += events
        sub.bytes += size


def records_trim(records: list[Record], budget: int) -> bool:
    """Cut ``records`` (in place) to about ``budget`` bytes; True if anything was cut."""
    total = 0
    for index, record in enumerate(records):
        total += record.size
        if total > budget and index > 0:
            del records[index:]
            return True
    return False


def records_by_partition(records: Iterable[Record]) -> list[list[Record]]:
    groups: dict[int, list[Record]] = {}
    for record in records:
        groups.setdefault(record.partition, []).append(record)
    return list(groups.values())

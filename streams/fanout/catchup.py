"""Bringing one stream level with its hub: from the cache, from Kafka, or a snapshot of the log.

A stream that starts behind the hub's position (resume, ``earliest``,
``snapshot``, ``since``), or that fell behind its connection while live, reads
in its own task: from the cache when it covers the position, otherwise from
Kafka with a short-lived :class:`~streams.fanout.backlog.BacklogReader`. It joins
the live set in the same event-loop step that sees it level with the hub, so
nothing is missed or repeated in between.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
from collections.abc import Iterable
from operator import attrgetter

from streams.core.closing import CloseReason
from streams.core.formats.registry import RegistryUnavailable
from streams.core.ids import ProgressEncoder
from streams.core.records import Record
from streams.fanout.catchup_reads import CHUNK_BYTES, CHUNK_RECORDS, BacklogSession
from streams.fanout.kafka import KafkaUnavailable
from streams.fanout.snapshot import Snapshot
from streams.fanout.state import HubControl, HubState
from streams.fanout.subscriber import Subscriber

logger = logging.getLogger("sluice.hub")

_timestamp = attrgetter("timestamp")

# After a backlog read found Kafka unavailable, wait this long before trying again.
BACKLOG_RETRY_SECONDS = 1.0


class CatchUp:
    """One stream's way from its position to the hub's."""

    __slots__ = ("budget", "control", "reads", "state", "sub", "used_cache", "used_kafka")

    def __init__(self, state: HubState, control: HubControl, sub: Subscriber, reads: BacklogSession) -> None:
        self.state = state
        self.control = control
        self.sub = sub
        self.reads = reads
        self.used_cache = self.used_kafka = False
        # Bytes per chunk: well inside the client's bound, so a chunk never cuts it.
        self.budget = max(1, min(CHUNK_BYTES, sub.sink.limit // 4))

    async def run(self, snapshot: bool) -> None:
        state, sub = self.state, self.sub
        try:
            if snapshot:
                await Snapshot(state, self.control, sub, self.reads, self.budget).run()
            while await self.step():
                if sub.is_closed:
                    return
                await sub.sink.writable()
        except (KafkaUnavailable, RegistryUnavailable) as exc:
            logger.warning("catch-up on %s stopped: %s", state.topic, exc)
            self.control.unsubscribe(sub)
            sub.sink.abort()
            sub.end(CloseReason.KAFKA)
        finally:
            await self.reads.close()

    async def step(self) -> bool:
        """Deliver one chunk (or go live); False once the stream is live or over."""
        state, sub = self.state, self.sub
        positions = sub.positions
        assert positions is not None
        nxt = state.positions
        behind = {p: o for p, o in positions.items() if o < nxt[p]}
        if not behind:
            if any(o > nxt[p] for p, o in positions.items()):
                await self.wait_for_hub()
                return True
            self.control.go_live(sub)  # level with the hub in every partition: live from this step on
            return False
        chunk: list[list[Record]] = []
        cold: dict[int, tuple[int, int]] = {}
        level: dict[int, int] = {}
        # A stream of some keys reads only their records (and the undecodable ones) from the cache's index.
        keys = None if sub.since_partitions else sub.filters.keys
        passed = 0  # cached records a keyed read went past
        for p, offset in behind.items():
            cache = state.cache[p]
            if cache.covers(offset):
                if keys is None:
                    records = cache.records_from(offset, CHUNK_RECORDS)
                else:
                    records = cache.keys.picks(keys, offset, CHUNK_RECORDS)
                if len(records) < CHUNK_RECORDS and not records_trim(records, self.budget // len(behind)):
                    # All the cache has up to the hub's position, which may
                    # lie past the last record (compaction, control records).
                    level[p] = nxt[p]
                    if keys is not None:
                        passed += cache.count_between(offset) - len(records)
                elif keys is not None:
                    passed += cache.count_between(offset, records[-1].offset + 1) - len(records)
                if records:
                    chunk.append(records)
            else:
                cold[p] = (offset, cache.start)
        if chunk or not cold:
            if (chunk or passed) and not self.used_cache:
                self.used_cache = True
                state.counters.catch_ups_cache += 1
            if keys is None:
                self.deliver(chunk)
            else:
                self.deliver(chunk, picked=passed)
            positions.update(level)
            return True
        if sub.demoted:
            self.control.cut(sub)  # fell out of the cache while live: cannot keep up
            return False
        return await self.from_kafka(cold)

    async def from_kafka(self, cold: dict[int, tuple[int, int]]) -> bool:
        state, sub = self.state, self.sub
        if not self.used_kafka:
            self.used_kafka = True
            state.counters.catch_ups_kafka += 1
        try:
            records, reached = await self.reads.read(cold, self.budget)
        except (KafkaUnavailable, RegistryUnavailable) as exc:
            # Broker or schema registry down (SPEC 2.5, 8): the stream stays open, heartbeats go on,
            # and the read is retried from where the stream is.
            logger.warning("catch-up on %s waiting: %s", state.topic, exc)
            await self.reads.close()
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
        state, sub = self.state, self.sub
        try:
            await asyncio.wait_for(state.advanced.wait(), timeout=self.reads.access.timeout)
        except TimeoutError:
            assert sub.positions is not None
            for p, offset in sub.positions.items():
                sub.positions[p] = min(offset, state.positions[p])

    def ended_by_now(self) -> bool:
        """Whether the stream is over, once the ends due by now have run.

        A token that expired ends the stream before its next write, however late the loop runs
        (:mod:`streams.fanout.cutoffs`).
        """
        self.state.cutoffs.run_due()
        return self.sub.is_closed

    def deliver(self, chunk: list[list[Record]], picked: int | None = None) -> None:
        """Write catch-up records to the stream, each with its own progress id.

        ``picked``: the chunk holds only the records a key filter can pass (and the undecodable ones),
        picked from the cache's index, which went past that many others.
        """
        state, sub = self.state, self.sub
        if self.ended_by_now():
            return
        positions = sub.positions
        assert positions is not None
        frames: list[bytes] = []
        first_ms = 0  # the first frame's record timestamp (the lag of a live stream that fell behind)
        since_ms, since_partitions = sub.since_ms, sub.since_partitions
        counts = state.tally(sub.route)
        keys = None if since_partitions else sub.filters.keys
        ends: dict[int, int] = {}
        if picked is not None:
            counts.filtered += picked
        elif keys is not None:
            # A stream of some keys looks only at their records (what Kafka gave it, a range of the log).
            chunk, ends, skipped = keyed_records(chunk, keys)
            counts.filtered += skipped
        # Interleave partitions by time (as they were produced), keeping each one's order.
        merged = heapq.merge(*chunk, key=_timestamp) if len(chunk) > 1 else iter(chunk[0] if chunk else ())
        # The stream's position moves one partition per record: re-encode that partition's offset only.
        progress_ids = ProgressEncoder(positions)
        for record in merged:
            p = record.partition
            positions[p] = record.offset + 1
            progress_ids.move(p, record.offset + 1)
            if since_partitions and p in since_partitions:
                if record.timestamp < (since_ms or 0):
                    continue
                since_partitions.discard(p)
            if record.problem is not None:
                counts.undecodable += 1  # logged when it was read; the next id carries the progress past it
                continue
            if not sub.filters.admits(record):
                counts.filtered += 1
                continue
            if not state.admits(sub, record):
                # Skipped, yet the next id or checkpoint carries the progress past it.
                counts.schema += 1
                continue
            progress = progress_ids.token
            # Where the stream's id is the one the hub gave this record (a resume of a one-partition
            # topic: every stream of a storm), the frame every live stream shares is reused.
            if progress == record.progress_id:
                frame = record.live_frame(sub.form, sub.binary)
            else:
                frame = record.frame(progress, sub.form, sub.binary)
            if frame is None:
                state.counters.invalid += 1
                counts.invalid += 1
                continue
            if not frames:
                first_ms = record.timestamp
            frames.append(frame)
            sub.sent_progress = progress
        for p, end in ends.items():
            positions[p] = max(positions[p], end)  # past the other keys' records too
        if frames:
            state.counters.deliveries += len(frames)
            data = b"".join(frames)
            if not sub.sink.write(data):
                counts.slow += len(frames)
                self.control.cut(sub)
            else:
                counts.delivered += len(frames)
                counts.bytes += len(data)
                sub.events += len(frames)
                sub.bytes += len(data)
                if sub.demoted and first_ms > 0:
                    # A live stream catching up because it was slow: its lag is the route's too (a
                    # resume or a replay from earliest is history, not lateness, and is not counted).
                    counts.lag.observe(time.time() - first_ms / 1000)


def records_trim(records: list[Record], budget: int) -> bool:
    """Cut ``records`` (in place) to about ``budget`` bytes; True if anything was cut."""
    total = 0
    for index, record in enumerate(records):
        total += record.size
        if total > budget and index > 0:
            del records[index:]
            return True
    return False


def keyed_records(chunk: list[list[Record]], keys: frozenset[bytes]) -> tuple[list[list[Record]], dict[int, int], int]:
    """The records of ``chunk`` that can pass a filter on ``keys`` (and the undecodable ones, which are counted),
    each partition's next offset past the chunk, and how many records were left out.

    A record left out moves no id: each id then names, for every other partition, where the stream's last
    frame of that partition left it, which is no further than the stream has read.
    """
    kept: list[list[Record]] = []
    ends: dict[int, int] = {}
    skipped = 0
    for records in chunk:
        if not records:
            continue
        ends[records[-1].partition] = records[-1].offset + 1
        some = [r for r in records if r.match_key in keys or r.problem is not None]
        skipped += len(records) - len(some)
        if some:
            kept.append(some)
    return kept, ends, skipped


def records_by_partition(records: Iterable[Record]) -> list[list[Record]]:
    groups: dict[int, list[Record]] = {}
    for record in records:
        groups.setdefault(record.partition, []).append(record)
    return list(groups.values())

"""The per-process Kafka fan-out of one topic (SPEC 2.3-2.5).

One :class:`TopicHub` per topic per worker process reads the topic with ONE
fetch (a :class:`~streams.fanout.access.LiveFeed` thread), keeps recent records
in a bounded per-partition cache, and writes each record's frame, encoded
once, to every live subscriber whose filters accept it. Its collaborators
share its :class:`~streams.fanout.state.HubState` and see the hub only as a
:class:`~streams.fanout.state.HubControl`: :mod:`~streams.fanout.ingest` fans
out each batch, :mod:`~streams.fanout.planning` works out where a new stream
starts, :mod:`~streams.fanout.catchup` brings a stream that starts behind level
with the hub, :mod:`~streams.fanout.handoff` brings the fetched batches to the
event loop, :mod:`~streams.fanout.keepalive` keeps quiet streams open,
:mod:`~streams.fanout.liveset` indexes the live streams for the fan-out, and
:mod:`~streams.fanout.counts` keeps the per-route counts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from streams.core.closing import CloseReason
from streams.core.ids import EventId, progress_encode
from streams.core.records import Record
from streams.core.sse import preamble
from streams.fanout.access import LiveFeed, TopicAccess, TopicReaders, access_call
from streams.fanout.cache import CacheLimits, PartitionCache, TopicCache
from streams.fanout.catchup import CatchUp
from streams.fanout.catchup_reads import BacklogSession
from streams.fanout.conflate import ConflationHost
from streams.fanout.counts import RouteTally
from streams.fanout.cutoffs import loop_cutoffs
from streams.fanout.handoff import BatchHandoff
from streams.fanout.ingest import batch_fan_out
from streams.fanout.kafka import PartitionEnd, RecordMake
from streams.fanout.keepalive import keepalives_send
from streams.fanout.liveset import LiveSet
from streams.fanout.planning import StartPlan, StartPlanner
from streams.fanout.state import HubCounters, HubState
from streams.fanout.subscriber import Subscriber
from streams.fanout.wheel import HeartbeatWheel

if TYPE_CHECKING:
    from streams.core.formats.record import RecordDecoder
    from streams.core.schemas import SchemaCheck

logger = logging.getLogger("sluice.hub")

T = TypeVar("T")


class TopicHub:
    """Reads one topic once for the whole process and fans it out."""

    def __init__(
        self,
        topic: str,
        access: TopicAccess,
        limits: CacheLimits,
        decoder: RecordDecoder | None = None,
        *,
        readers: TopicReaders,
    ) -> None:
        # Decodes the topic's records once, on the fetch threads (None: text, records as they are).
        self.decoder = decoder
        self.record_make: RecordMake = decoder.record if decoder is not None else Record.from_kafka
        self.formats = decoder.formats if decoder is not None else None
        self.access = access
        self.readers = readers
        self.limits = limits
        self.state = HubState(topic, TopicCache(limits), loop_cutoffs())
        state = self.state
        state.live.conflation.bind(ConflationHost(topic, state.tally, state.counters, state.cutoffs, self.cut))
        self.catching_up: dict[Subscriber, None] = {}
        # When each stream is next due a keep-alive (the ticker looks only at those).
        self.beats: HeartbeatWheel[Subscriber] = HeartbeatWheel()
        self.planner = StartPlanner(self.state, access)
        # Set once the fetch has reached where the hub started in every partition (``ended``).
        self.ready = asyncio.Event()
        self.ended: set[int] = set()
        self._loop = asyncio.get_running_loop()
        self.handoff = BatchHandoff(self._loop, self.ingest)
        self._fetcher: LiveFeed | None = None

    # -- what the hub shares with its collaborators --------------------------------

    @property
    def topic(self) -> str:
        return self.state.topic

    @property
    def partitions(self) -> list[int]:
        return self.state.partitions

    @partitions.setter
    def partitions(self, partitions: list[int]) -> None:
        self.state.partitions = partitions

    @property
    def next(self) -> dict[int, int]:
        """The next offset the hub reads in each partition."""
        return self.state.positions

    @next.setter
    def next(self, positions: dict[int, int]) -> None:
        self.state.positions_reset(positions)

    @property
    def cache(self) -> TopicCache:
        return self.state.cache

    @property
    def live(self) -> LiveSet:
        return self.state.live

    @property
    def schema(self) -> SchemaCheck | None:
        """The topic's schema: a record it rejects reaches no stream (SPEC 5)."""
        return self.state.schema

    @schema.setter
    def schema(self, schema: SchemaCheck | None) -> None:
        self.state.schema = schema

    @property
    def tally(self) -> RouteTally:
        return self.state.tally

    @property
    def counters(self) -> HubCounters:
        """Totals, read at scrape time."""
        return self.state.counters

    # -- life cycle -------------------------------------------------------------

    async def blocking(self, func: Callable[..., T], *args: Any) -> T:
        """Run a blocking Kafka call on the access's thread pool."""
        return await access_call(self.access, func, *args)

    async def start(self) -> None:
        """Find the partitions and their ends, start the fetcher, wait until level."""
        self.partitions = await self.blocking(self.access.partitions, self.topic)
        marks = await self.blocking(self.access.watermarks, self.topic, self.partitions)
        # Start at the last record (some brokers report the high watermark as the
        # last batch's base + 1), so the hub learns the true end from the fetch.
        start = {p: max(low, high - 1) if high > low else low for p, (low, high) in marks.items()}
        self.next = dict(start)
        self.cache.reset(start)
        self._fetcher = self.readers.live(self.topic, start, self.handoff.put, self.record_make)
        self._fetcher.start()
        try:
            await asyncio.wait_for(self.ready.wait(), timeout=self.access.timeout)
        except TimeoutError as exc:
            self.stop()
            raise self.access.unavailable(f"topic {self.topic} did not answer within {self.access.timeout}s") from exc

    def partitions_add(self, lows: dict[int, int]) -> None:
        """Partitions added to the topic: read them from their start; ids carry them from now on."""
        state = self.state
        for p, low in lows.items():
            state.partitions.append(p)
            state.positions[p] = low
            state.cache.partitions[p] = PartitionCache(p, low)
        state.partitions.sort()
        state.positions_reset(state.positions)
        if self._fetcher is not None:
            self._fetcher.partitions_add(lows)
        logger.info("topic %s grew to %d partitions: reading %s too", self.topic, len(self.partitions), sorted(lows))

    def stop(self) -> None:
        for sub in [*self.live, *self.catching_up]:
            self.unsubscribe(sub)
            sub.end(CloseReason.SHUTDOWN)
        if self._fetcher is not None:
            self._fetcher.stop()
            self._fetcher = None

    @property
    def registry_waiting(self) -> bool:
        """Whether delivery waits for the topic's schema registry to answer."""
        return self._fetcher is not None and self._fetcher.registry_waiting is not None

    @property
    def fetch_wait_ms(self) -> int:  # the live fetch's fetch.wait.max.ms now (0: none; streams.fanout.pacing)
        return self._fetcher.fetch_wait_ms if self._fetcher is not None else 0

    def lag(self) -> dict[int, int]:
        """Records per partition the hub has yet to read: the fetch's high watermark minus the hub's position."""
        marks = self._fetcher.high_watermarks if self._fetcher is not None else {}
        return {p: max(0, high - self.next[p]) for p, high in marks.items() if p in self.next}

    # -- ingest (event loop; the fan-out itself is streams.fanout.ingest) --------

    def ingest(self, batch: list[Record | PartitionEnd]) -> None:
        """Take one fetched batch (on the event loop; the fetch hands it over through ``handoff``)."""
        state = self.state
        state.cutoffs.run_due()  # streams whose token expired end before this batch, however late the loop runs
        if not self.ready.is_set():
            self._level_note(batch)
        batch_fan_out(state, self, batch)
        state.advanced.set()
        state.advanced = asyncio.Event()

    def _level_note(self, batch: list[Record | PartitionEnd]) -> None:
        # A partition's end or its first record shows the fetch has reached where the hub
        # started: a partition written to without pause may never report its end.
        ended = self.ended
        for item in batch:
            ended.add(item.partition)
            if len(ended) == len(self.partitions):
                self.ready.set()
                return

    # -- subscribers -------------------------------------------------------------

    async def plan(self, *, last: EventId | None, initial: str, since_ms: int | None) -> StartPlan:
        """Work out a new stream's start position (SPEC 2.3); may ask Kafka."""
        return await self.planner.plan(last=last, initial=initial, since_ms=since_ms)

    def subscribe(self, sub: Subscriber, plan: StartPlan, retry_ms: int | None) -> None:
        """Attach ``sub``: write its preamble and start checkpoint, then feed it.

        Runs without awaiting, so a stream whose plan is the hub's position goes
        live in the same step and cannot miss a record.
        """
        sub.since_ms = plan.since_ms
        sub.since_partitions = set(plan.since_partitions) if plan.since_partitions else None
        start_id = progress_encode(plan.positions)
        sub.sent_progress = start_id
        if not sub.sink.write(preamble(retry_ms, start_id)):
            self.cut(sub)
            return
        self.beats.schedule(sub, sub.sink.last_write + sub.heartbeat_seconds)
        if not plan.snapshot and plan.positions == self.next:
            self.live.add(sub)
            return
        sub.positions = dict(plan.positions)
        self._catch_up_start(sub, plan.snapshot)

    def unsubscribe(self, sub: Subscriber) -> None:
        self.live.remove(sub)
        self.catching_up.pop(sub, None)
        self.beats.discard(sub)
        task, sub.task = sub.task, None  # cancelled, its CancelledError's frames would hold sub: a cycle
        if task is not None and not task.done() and task is not asyncio.current_task():
            task.cancel()

    def go_live(self, sub: Subscriber) -> None:
        """A caught-up stream joins the live set (in the step that found it level)."""
        self.catching_up.pop(sub, None)
        sub.positions = None
        sub.demoted = False
        sub.since_partitions = None
        self.live.add(sub)

    def cut(self, sub: Subscriber) -> None:
        """A client over its pending-bytes limit: drop it; it resumes from its last id."""
        self.counters.cut_slow += 1
        self.unsubscribe(sub)
        sub.sink.abort()
        sub.end(CloseReason.SLOW)

    def log_restart(self, partition: int, offset: int) -> None:
        """``partition``'s log began anew at ``offset`` (topic created again): position, ids and cache move there.

        Streams catching up in the old log end; resuming, they get the new log from its start (see planning).
        """
        state = self.state
        state.positions[partition] = offset
        state.progress.move(partition, offset)
        state.cache.partition_restart(partition, offset)
        state.restarts[partition] = offset
        state.counters.log_restarts += 1
        for sub in list(self.catching_up):
            self.unsubscribe(sub)
            sub.end(CloseReason.KAFKA)

    def demote(self, sub: Subscriber, positions: dict[int, int]) -> None:
        """A live stream that has not taken what it was sent catches up from ``positions`` at its own pace."""
        self.live.remove(sub)
        self.counters.demotions += 1
        sub.demoted = True
        sub.positions = dict(positions)
        self._catch_up_start(sub, snapshot=False)

    def _catch_up_start(self, sub: Subscriber, snapshot: bool) -> None:
        self.catching_up[sub] = None
        reads = BacklogSession(self.topic, self.access, self.readers, self.record_make)
        catch_up = CatchUp(self.state, self, sub, reads)
        sub.task = self._loop.create_task(catch_up.run(snapshot), name=f"sluice-catch-up-{self.topic}")

    def heartbeat(self, now: float) -> None:
        """Keep-alive for quiet streams, with a checkpoint if progress moved silently.

        Also cuts streams that fell behind while live and whose position has since
        left the cache: they cannot keep up, and resume from their last id.
        """
        for sub in [sub for sub in self.catching_up if sub.demoted]:
            if sub.positions is not None and self.cache.behind(sub.positions):
                self.cut(sub)
        keepalives_send(self.beats, self.state, self, now)

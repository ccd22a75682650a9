"""The per-process Kafka fan-out of one topic (SPEC 2.3-2.5).

One :class:`TopicHub` per topic per worker process reads the topic with ONE
consumer (a :class:`~streams.fanout.kafka.LiveFetcher` thread), keeps recent records
in a bounded per-partition cache, and writes each record's frame, encoded
once, to every live subscriber whose filters accept it. Its collaborators:
:mod:`~streams.fanout.planning` works out where a new stream starts,
:mod:`~streams.fanout.catchup` brings a stream that starts behind level with the
hub, :mod:`~streams.fanout.liveset` indexes the live streams for the fan-out, and
:mod:`~streams.fanout.counts` keeps the per-route counts.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from streams.core.ids import EventId, ProgressEncoder, progress_encode
from streams.core.records import Record
from streams.core.sse import HEARTBEAT, checkpoint_frame, preamble
from streams.fanout.cache import CacheLimits, PartitionCache, TopicCache
from streams.fanout.catchup import CatchUp
from streams.fanout.counts import RouteTally
from streams.fanout.cutoffs import loop_cutoffs
from streams.fanout.ingest import batch_fan_out
from streams.fanout.kafka import KafkaAccess, LiveFetcher, PartitionEnd, RecordMake
from streams.fanout.liveset import LiveSet
from streams.fanout.planning import StartPlan, StartPlanner
from streams.fanout.subscriber import Subscriber
from streams.fanout.wheel import HeartbeatWheel

if TYPE_CHECKING:
    from streams.core.formats.record import RecordDecoder
    from streams.core.schemas import SchemaCheck

logger = logging.getLogger("sluice.hub")

T = TypeVar("T")

# A keep-alive may go out this much before it is due: the ticker's second is not exactly a second,
# and one that came a hair early would otherwise wait for the next tick.
HEARTBEAT_EARLY = 0.1
# Items a batch waiting for the event loop may grow to by taking later fetches (then a new one starts).
MERGE_MAX = 5000


class TopicHub:
    """Reads one topic once for the whole process and fans it out."""

    def __init__(
        self, topic: str, access: KafkaAccess, limits: CacheLimits, decoder: RecordDecoder | None = None
    ) -> None:
        self.topic = topic
        # Decodes the topic's records once, on the fetch threads (None: text, records as they are).
        self.decoder = decoder
        self.record_make: RecordMake = decoder.record if decoder is not None else Record.from_kafka
        self.formats = decoder.formats if decoder is not None else None
        self.access = access
        self.limits = limits
        self.partitions: list[int] = []
        # The hub's position (the next offset of each partition) and its progress token, which
        # moves with it: whoever moves a partition here moves it in ``progress`` too.
        self._next: dict[int, int] = {}
        self.progress = ProgressEncoder({})
        self.cache = TopicCache(limits)
        self.live = LiveSet()
        self.catching_up: dict[Subscriber, None] = {}
        # When each stream is next due a keep-alive (the ticker looks only at those).
        self.beats: HeartbeatWheel[Subscriber] = HeartbeatWheel()
        # The topic's schema: a record it rejects reaches no stream (SPEC 5).
        self.schema: SchemaCheck | None = None
        self.tally = RouteTally()
        self.planner = StartPlanner(self)
        # Totals, read at scrape time.
        self.records_in = 0
        self.deliveries = 0
        self.cut_slow = 0
        self.demotions = 0
        self.invalid = 0
        self.schema_invalid = 0
        self.undecodable = 0  # records whose value or key did not decode by the topic's formats
        # Resumes whose id named offsets past the log's end (started at the end), and records
        # resumes could not have because retention removed them (started at the log's start).
        self.clamped_past_end = 0
        self.gap_records = 0
        # Catch-ups that read the cache / Kafka (a catch-up counts once per source it used).
        self.catch_ups_cache = 0
        self.catch_ups_kafka = 0
        # Set (and replaced) after every batch: catch-ups ahead of the hub wait on it.
        self.advanced = asyncio.Event()
        # Set once the fetch has reached where the hub started in every partition (``ended``).
        self.ready = asyncio.Event()
        self.ended: set[int] = set()
        self._loop = asyncio.get_running_loop()
        # Ends due by wall-clock time (a token's exp), run before each batch is written.
        self.cutoffs = loop_cutoffs()
        self._in_flight = threading.Semaphore(4)
        # The last batch handed to the loop, while the loop has not taken it yet (see _from_thread).
        self._waiting: list[Record | PartitionEnd] | None = None
        self._waiting_lock = threading.Lock()
        self._fetcher: LiveFetcher | None = None

    # -- life cycle -------------------------------------------------------------

    async def blocking(self, func: Callable[..., T], *args: Any) -> T:
        """Run a blocking Kafka call on the access's thread pool."""
        return await self._loop.run_in_executor(self.access.executor, func, *args)

    async def start(self) -> None:
        """Find the partitions and their ends, start the fetcher, wait until level."""
        self.partitions = await self.blocking(self.access.partitions, self.topic)
        marks = await self.blocking(self.access.watermarks, self.topic, self.partitions)
        # Start at the last record (some brokers report the high watermark as the
        # last batch's base + 1), so the hub learns the true end from the fetch.
        start = {p: max(low, high - 1) if high > low else low for p, (low, high) in marks.items()}
        self.next = dict(start)
        self.cache.reset(start)
        self._fetcher = LiveFetcher(self.access, self.topic, start, self._from_thread, record_make=self.record_make)
        self._fetcher.start()
        try:
            await asyncio.wait_for(self.ready.wait(), timeout=self.access.timeout)
        except TimeoutError as exc:
            self.stop()
            raise self.access.unavailable(f"topic {self.topic} did not answer within {self.access.timeout}s") from exc

    def partitions_add(self, lows: dict[int, int]) -> None:
        """Partitions added to the topic: read them from their start; ids carry them from now on."""
        for p, low in lows.items():
            self.partitions.append(p)
            self._next[p] = low
            self.cache.partitions[p] = PartitionCache(p, low)
        self.partitions.sort()
        self.progress = ProgressEncoder(self._next)
        if self._fetcher is not None:
            self._fetcher.partitions_add(lows)
        logger.info("topic %s grew to %d partitions: reading %s too", self.topic, len(self.partitions), sorted(lows))

    def stop(self) -> None:
        for sub in [*self.live, *self.catching_up]:
            self.unsubscribe(sub)
            sub.end("shutdown")
        if self._fetcher is not None:
            self._fetcher.stop()
            self._fetcher = None

    @property
    def registry_waiting(self) -> bool:
        """Whether delivery waits for the topic's schema registry to answer."""
        return self._fetcher is not None and self._fetcher.registry_waiting is not None

    def lag(self) -> dict[int, int]:
        """Records per partition the hub has yet to read: the fetch's high watermark minus the hub's position."""
        fetcher = self._fetcher
        if fetcher is None:
            return {}
        nxt = self.next
        return {p: max(0, high - nxt[p]) for p, high in fetcher.high_watermarks.items() if p in nxt}

    @property
    def next(self) -> dict[int, int]:
        """The next offset the hub reads in each partition."""
        return self._next

    @next.setter
    def next(self, positions: dict[int, int]) -> None:
        self._next = positions
        self.progress = ProgressEncoder(positions)

    @property
    def progress_id(self) -> str:
        """The hub's position as a progress token."""
        return self.progress.token

    # -- ingest (event loop; the fan-out itself is streams.fanout.ingest) --------

    def _from_thread(self, batch: list[Record | PartitionEnd]) -> None:
        # A batch that arrives while the previous one still waits for the loop joins it:
        # when the fan-out is the bottleneck (many streams), the records that came
        # meanwhile go out together, one write per stream, and add no delay when it is not.
        with self._waiting_lock:
            waiting = self._waiting
            if waiting is not None and len(waiting) < MERGE_MAX:
                waiting.extend(batch)
                return
        # At most a few batches wait for the loop; the fetcher blocks beyond that,
        # and librdkafka's own bounded queue absorbs the rest.
        self._in_flight.acquire()
        with self._waiting_lock:
            self._waiting = batch
        self._loop.call_soon_threadsafe(self._ingest, batch)

    def _ingest(self, batch: list[Record | PartitionEnd]) -> None:
        with self._waiting_lock:  # from here on nothing joins this batch
            if self._waiting is batch:
                self._waiting = None
        self._in_flight.release()
        self.cutoffs.run_due()  # streams whose token expired end before this batch, however late the loop runs
        batch_fan_out(self, batch)
        self.advanced.set()
        self.advanced = asyncio.Event()

    def admits(self, sub: Subscriber, record: Record) -> bool:
        """Whether the topic's and the stream's route schema let ``record`` through (catch-up path)."""
        schema = self.schema
        if schema is not None and not schema.admits(record):
            return False
        schema = sub.schema
        return schema is None or schema.admits(record)

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
        if sub.task is not None and not sub.task.done() and sub.task is not asyncio.current_task():
            sub.task.cancel()

    def go_live(self, sub: Subscriber) -> None:
        """A caught-up stream joins the live set (in the step that found it level)."""
        self.catching_up.pop(sub, None)
        sub.positions = None
        sub.demoted = False
        sub.since_partitions = None
        self.live.add(sub)

    def cut(self, sub: Subscriber) -> None:
        """A client over its pending-bytes limit: drop it; it resumes from its last id."""
        self.cut_slow += 1
        self.unsubscribe(sub)
        sub.sink.abort()
        sub.end("slow")

    def demote(self, sub: Subscriber, positions: dict[int, int]) -> None:
        """A live stream that has not taken what it was sent catches up from ``positions`` at its own pace."""
        self.live.remove(sub)
        self.demotions += 1
        sub.demoted = True
        sub.positions = dict(positions)
        self._catch_up_start(sub, snapshot=False)

    def _catch_up_start(self, sub: Subscriber, snapshot: bool) -> None:
        self.catching_up[sub] = None
        sub.task = self._loop.create_task(CatchUp(self, sub).run(snapshot), name=f"sluice-catch-up-{self.topic}")

    def heartbeat(self, now: float) -> None:
        """Keep-alive for quiet streams, with a checkpoint if progress moved silently.

        Also cuts streams that fell behind while live and whose position has since
        left the cache: they cannot keep up, and resume from their last id.
        """
        for sub in [sub for sub in self.catching_up if sub.demoted]:
            if sub.positions is not None and self.cache.behind(sub.positions):
                self.cut(sub)
        for sub in self.beats.due(now):
            due = sub.sink.last_write + sub.heartbeat_seconds
            if now < due - HEARTBEAT_EARLY:  # it wrote since: due later
                self.beats.schedule(sub, due)
                continue
            if sub.sink.congested():  # it has not taken the last bytes: no point adding more yet
                self.beats.schedule(sub, now + 1)
                continue
            current = self.progress_id if sub.positions is None else progress_encode(sub.positions)
            if current != sub.sent_progress:
                sub.sent_progress = current
                data = b":\n" + checkpoint_frame(current)
            else:
                data = HEARTBEAT
            if sub.sink.write(data):
                self.beats.schedule(sub, now + sub.heartbeat_seconds)
            else:
                self.cut(sub)

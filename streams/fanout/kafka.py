"""Blocking confluent-kafka calls, kept in one place and run off the event loop.

The hub never joins a consumer group: it assigns partitions itself, so a
stream opens at once on any Kafka (and on brokers where group joins are slow).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from streams.core.clusters import client_settings
from streams.core.formats.registry import RegistryUnavailable
from streams.core.records import Record
from streams.core.retry import RetriesStopped, RetryPolicy, call_retried
from streams.fanout.backlog_pool import BacklogConsumers, backlog_consumer_settings
from streams.fanout.diagnosis import ClusterDiagnosis
from streams.fanout.kafka_config import consumer_config
from streams.fanout.pacing import MEASURE_MS, FetchWait, Linger, backlog_wait_ms, fetch_answer_ms, fetch_wait_ms
from streams.fanout.restarts import RestartWatch, TopicIds

logger = logging.getLogger("sluice.kafka")

# Makes a Record of a fetched message: as it is, or decoded by the topic's formats.
RecordMake = Callable[[Any], Record]
# Waits between tries of a record whose schema registry does not answer: for as long as it takes.
REGISTRY_RETRY = RetryPolicy((RegistryUnavailable,), first_seconds=0.1, max_seconds=2.0)


class KafkaUnavailable(Exception):
    """No answer from Kafka within the configured timeout; ``cause`` is why, when librdkafka said (see diagnosis)."""

    def __init__(self, detail: str, cause: str | None = None) -> None:
        super().__init__(detail)
        self.cause = cause


class TopicNotFound(Exception):
    """The topic does not exist on the cluster."""


def message_position(message: Any) -> tuple[int, int]:
    """Partition and offset of a consumed message (always set on fetched ones)."""
    partition, offset = message.partition(), message.offset()
    assert partition is not None
    assert offset is not None
    return partition, offset


@dataclass(frozen=True, slots=True)
class PartitionEnd:
    """A fetch reached the end of a partition; ``offset`` is the true next offset.

    ``restarted``: the partition's log began anew at ``offset`` (the topic was deleted and
    created again), so what the hub holds of it (position, cache) is of the old log.
    """

    partition: int
    offset: int
    restarted: bool = False


class KafkaAccess:
    """Metadata and offset look-ups for one cluster, on a small thread pool.

    ``client`` is the cluster's librdkafka settings (bootstrap servers, TLS, SASL, with
    secrets already resolved), given to every consumer made for it; ``diagnosis``
    hears their errors and says why the cluster does not answer.
    """

    def __init__(
        self,
        client: dict[str, Any] | str,
        timeout: float,
        backlog_readers: int = 4,
        fetch_linger_seconds: float = 0.005,
        diagnosis: ClusterDiagnosis | None = None,
        fetch_wait_ms: float | None = None,
    ) -> None:
        self.client: dict[str, Any] = dict(client_settings(client))
        self.diagnosis = diagnosis
        if diagnosis is not None:
            self.client.update(diagnosis.client_settings())
        self.timeout = timeout
        self.fetch_linger_seconds = fetch_linger_seconds
        # fetch.wait.max.ms as configured (None: fitted to the broker, see streams.fanout.pacing).
        self.fetch_wait_configured = fetch_wait_ms
        # The cluster id the brokers report (known after the first metadata answer).
        self.cluster_id: str | None = None
        self.executor = ThreadPoolExecutor(max_workers=2 + backlog_readers, thread_name_prefix="sluice-kafka")
        self._lookup: Consumer | None = None
        self._lookup_lock = threading.Lock()
        # Topic ids, which tell a topic created again under the same name from the old one.
        self.topic_ids = TopicIds(self.client, timeout)
        self.backlog_slots = asyncio.Semaphore(backlog_readers)
        # Catch-ups' consumers, lent with a slot for a chunk: at most one per slot.
        self.backlog_consumers = BacklogConsumers(self._backlog_consumer, backlog_readers)

    def _lookup_consumer(self) -> Consumer:
        with self._lookup_lock:
            if self._lookup is None:
                self._lookup = Consumer(consumer_config(self.client))
            return self._lookup

    def _backlog_consumer(self) -> Consumer:
        return Consumer(consumer_config(self.client, **backlog_consumer_settings(self.backlog_wait_ms)))

    @property
    def fetch_wait_ms(self) -> int:
        """``fetch.wait.max.ms`` of the live fetchers: as configured, else fitted to the broker."""
        return fetch_wait_ms(self.fetch_wait_configured, self.cluster_id)

    @property
    def backlog_wait_ms(self) -> int:
        """``fetch.wait.max.ms`` of catch-up reads (see :func:`streams.fanout.pacing.backlog_wait_ms`)."""
        return backlog_wait_ms(self.fetch_wait_ms, self.cluster_id)

    @property
    def bootstrap(self) -> str:
        return str(self.client["bootstrap.servers"])

    def unavailable(self, detail: str) -> KafkaUnavailable:
        """A :class:`KafkaUnavailable` with the cause librdkafka reported meanwhile, if it did; else ``detail``."""
        diagnosis = self.diagnosis
        if diagnosis is None:
            return KafkaUnavailable(detail)
        with self._lookup_lock:
            if self._lookup is not None:
                self._lookup.poll(0)  # serve the errors and log lines it queued (they name the cause)
        if diagnosis.cause is None:
            return KafkaUnavailable(f"Kafka cluster {diagnosis.cluster}: {detail}")
        return KafkaUnavailable(diagnosis.explain(), diagnosis.cause)

    def answered(self) -> None:
        if self.diagnosis is not None:
            self.diagnosis.answered()

    def partitions(self, topic: str) -> list[int]:
        """Partition ids of ``topic``; raises :class:`TopicNotFound` or :class:`KafkaUnavailable`."""
        try:
            metadata = self._lookup_consumer().list_topics(topic, timeout=self.timeout)
        except KafkaException as exc:
            raise self.unavailable(str(exc)) from exc
        self.answered()
        self.cluster_id = metadata.cluster_id
        described = metadata.topics.get(topic)
        if described is None or (
            described.error is not None
            and described.error.code()
            in (
                KafkaError.UNKNOWN_TOPIC_OR_PART,
                KafkaError._UNKNOWN_TOPIC,
            )
        ):
            raise TopicNotFound(topic)
        if described.error is not None:
            raise KafkaUnavailable(str(described.error))
        if not described.partitions:
            raise TopicNotFound(topic)
        return sorted(described.partitions)

    def ping(self, timeout: float) -> None:
        """Ask the cluster for its metadata (readiness); :class:`KafkaUnavailable` with the cause if it cannot."""
        try:
            self._lookup_consumer().list_topics(timeout=timeout)
        except KafkaException as exc:
            raise self.unavailable(str(exc)) from exc
        self.answered()

    def watermarks(self, topic: str, partitions: Iterable[int]) -> dict[int, tuple[int, int]]:
        """``{partition: (low, high)}`` straight from the brokers."""
        consumer = self._lookup_consumer()
        out: dict[int, tuple[int, int]] = {}
        try:
            for partition in partitions:
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=self.timeout, cached=False
                )
                out[partition] = (low, high)
        except KafkaException as exc:
            raise self.unavailable(str(exc)) from exc
        return out

    def offsets_for_time(self, topic: str, partitions: Iterable[int], timestamp_ms: int) -> dict[int, int]:
        """A lower bound for the first offset at or after ``timestamp_ms`` per partition.

        Some brokers answer 0 here whatever the time, so callers still check
        record timestamps themselves; -1 (nothing that new) maps to -1.
        """
        consumer = self._lookup_consumer()
        wanted = [TopicPartition(topic, p, timestamp_ms) for p in partitions]
        try:
            found = consumer.offsets_for_times(wanted, timeout=self.timeout)
        except KafkaException as exc:
            raise self.unavailable(str(exc)) from exc
        return {tp.partition: tp.offset for tp in found}

    def close(self) -> None:
        with self._lookup_lock:
            if self._lookup is not None:
                self._lookup.close()
                self._lookup = None
        self.topic_ids.close()
        self.backlog_consumers.close()
        self.executor.shutdown(wait=False, cancel_futures=True)


# How often the fetch thread copies the high watermarks it has seen (for the lag metric), and
# asks again whether a topic whose log went back was created anew.
_WATERMARKS_SECONDS = 0.25
# Fetch errors that say the fetch position lies outside the log (it went back: a topic created anew).
_OUT_OF_RANGE = (KafkaError.OFFSET_OUT_OF_RANGE, KafkaError._AUTO_OFFSET_RESET)


class LiveFetcher:
    """The one consumer per topic per process: a thread that hands batches to the loop."""

    def __init__(
        self,
        access: KafkaAccess,
        topic: str,
        start: dict[int, int],
        deliver: Callable[[list[Record | PartitionEnd]], None],
        batch_size: int = 2000,
        record_make: RecordMake = Record.from_kafka,
    ) -> None:
        self.topic = topic
        self._record_make = record_make
        # Set while the topic's schema registry does not answer (delivery waits, nothing is skipped).
        self.registry_waiting: str | None = None
        self._client = access.client
        self._timeout = access.timeout
        # Whether the topic was deleted and created again under the fetch (see streams.fanout.restarts).
        self._restarts = RestartWatch(topic, access.topic_ids.lookup)
        # The fetch wait while records flow, and while the topic is quiet (see streams.fanout.pacing).
        self._wait = FetchWait(access.fetch_wait_ms)
        # The broker's time to answer a fetch beyond its wait, as librdkafka last reported it (None: not since).
        self._answer_ms: float | None = None
        # Per partition, the next offset to fetch: where a remade consumer starts.
        self._next = dict(start)
        self._consumer = self._consumer_make(self._wait.busy_ms)
        self._deliver = deliver
        self._batch_size = batch_size
        self._partitions = sorted(start)
        # High watermark per partition as last seen by the fetch (replaced whole, read by any thread).
        self.high_watermarks: dict[int, int] = {}
        self._linger = Linger(access.fetch_linger_seconds)
        # Partitions added to the topic while it is read, to assign on the fetch thread.
        self._added: list[TopicPartition] = []
        self._added_lock = threading.Lock()
        self._stopping = threading.Event()
        self._idle = False  # whether the last poll brought nothing
        self._thread = threading.Thread(target=self._run, name=f"sluice-fetch-{topic}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    @property
    def fetch_wait_ms(self) -> int:
        """The fetch wait of the consumer in use now."""
        return self._wait.current_ms

    def _consumer_make(self, wait_ms: int) -> Consumer:
        extra: dict[str, Any] = {"queued.max.messages.kbytes": 32768, "fetch.wait.max.ms": wait_ms}
        if self._wait.adaptive:  # the fetches' round trips pace the wait (streams.fanout.pacing)
            extra.update({"statistics.interval.ms": MEASURE_MS, "stats_cb": self._stats_note})
        consumer = Consumer(consumer_config(self._client, **extra))
        consumer.assign([TopicPartition(self.topic, p, o) for p, o in self._next.items()])
        self._wait.current_ms = wait_ms
        return consumer

    def _consumer_remake(self, consumer: Consumer, wait_ms: int) -> Consumer:
        """The same reads with another fetch wait (librdkafka cannot change it on a running consumer)."""
        logger.debug("topic %s: fetch wait %d ms (behind %d records)", self.topic, wait_ms, self._wait.behind)
        consumer.close()
        self._consumer = self._consumer_make(wait_ms)
        return self._consumer

    def _stats_note(self, stats: str) -> None:
        """librdkafka's statistics (on the fetch thread, inside a poll): how long the broker takes to answer."""
        try:
            self._answer_ms = fetch_answer_ms(json.loads(stats), self._wait.current_ms)
        except (ValueError, KeyError, TypeError):
            self._answer_ms = None

    def partitions_add(self, starts: dict[int, int]) -> None:
        """Read these new partitions too, from these offsets (assigned by the fetch thread, between polls)."""
        with self._added_lock:
            self._added += [TopicPartition(self.topic, p, o) for p, o in starts.items()]

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=5)

    def _watermarks_note(self, consumer: Consumer) -> None:
        """Copy the high watermarks the last fetch responses reported (no broker round trip).

        Runs on the fetch thread: the consumer serialises calls, so another thread
        asking it would wait for the poll in progress.
        """
        marks = self._highs(consumer)
        self.high_watermarks = marks
        self._restarts.highs_note(marks, self._next, self._idle)

    def _restart_check(self, consumer: Consumer) -> None:
        """If the topic was created anew, read each partition's new log from its start and tell the hub (in order)."""
        starts = self._restarts.check(consumer, self._partitions, self._timeout)
        if starts is not None:
            self._next.update(starts)
            self._deliver([PartitionEnd(p, offset, restarted=True) for p, offset in starts.items()])

    def _highs(self, consumer: Consumer) -> dict[int, int]:
        """The high watermark of each partition as the last fetch responses reported it (no broker round trip)."""
        marks: dict[int, int] = {}
        for partition in self._partitions:
            try:
                _, high = consumer.get_watermark_offsets(TopicPartition(self.topic, partition), cached=True)
            except KafkaException:
                continue
            if high >= 0:
                marks[partition] = high
        return marks

    def _behind(self, marks: dict[int, int] | None = None) -> int:
        """Records between where the fetch is and the log's end (``marks``: the high watermarks; the last noted)."""
        marks = self.high_watermarks if marks is None else marks
        return sum(max(0, marks[p] - o) for p, o in self._next.items() if p in marks)

    def _run(self) -> None:
        consumer = self._consumer
        noted = 0.0
        self._wait.when_started(time.monotonic())  # the quiet clock starts now
        try:
            while not self._stopping.is_set():
                now = time.monotonic()
                if now - noted >= _WATERMARKS_SECONDS:
                    if noted and not self._restarts.learned:
                        self._restarts.learn()  # after the first fetch: a hub's first stream does not wait for it
                    noted = now
                    self._watermarks_note(consumer)
                    if self._restarts.suspect:
                        self._restart_check(consumer)
                    answer, self._answer_ms = self._answer_ms, None
                    wait = self._wait.when_measured(now, self._behind(), answer)
                    if wait is not None:
                        consumer = self._consumer_remake(consumer, wait)
                if self._added:
                    with self._added_lock:
                        added, self._added = self._added, []
                    consumer.incremental_assign(added)
                    self._partitions = sorted({*self._partitions, *(tp.partition for tp in added)})
                    self._next.update({tp.partition: tp.offset for tp in added})
                # Wait for the first record, take what the fetch brought with it, and
                # linger for more only when that was many: a record alone goes out at
                # once, and a busy topic still gets large batches (one write per client
                # per batch).
                first = consumer.poll(0.1)
                self._idle = first is None
                if first is None:
                    # Nothing in a whole poll: starved (records wait at the log's end), else maybe quiet.
                    wait = self._wait.when_measured(now, self._behind(self._highs(consumer)))
                    if wait is None:
                        wait = self._wait.when_idle(now)
                    if wait is not None:
                        consumer = self._consumer_remake(consumer, wait)
                    continue
                messages = [first, *consumer.consume(num_messages=self._batch_size - 1, timeout=0)]
                records = sum(1 for m in messages if m.error() is None)
                linger = 0.0 if self._wait.batches else self._linger.after(records)
                if linger and len(messages) < self._batch_size:
                    messages += consumer.consume(num_messages=self._batch_size - len(messages), timeout=linger)
                batch: list[Record | PartitionEnd] = []
                for message in messages:
                    error = message.error()
                    if error is None:
                        record = self._record(message, batch)
                        if record is None:
                            return  # stopping while the registry was away
                        batch.append(record)
                        self._next[record.partition] = record.offset + 1
                    elif error.code() == KafkaError._PARTITION_EOF:
                        end = PartitionEnd(*message_position(message))
                        batch.append(end)
                        self._next[end.partition] = max(self._next.get(end.partition, 0), end.offset)
                    else:
                        if error.code() in _OUT_OF_RANGE:
                            self._restarts.error_note(message.partition())
                        logger.warning("fetch from %s: %s", self.topic, error)
                if batch:
                    self._deliver(batch)
                if records:
                    wait = self._wait.when_records(time.monotonic(), records)
                    if wait is not None:
                        consumer = self._consumer_remake(consumer, wait)
        except Exception:  # a dead fetcher must be loud, not silent
            logger.exception("live fetcher for %s stopped", self.topic)
        finally:
            self._consumer.close()

    def _record(self, message: Any, batch: list[Record | PartitionEnd]) -> Record | None:
        """The message as a record; while the schema registry is away, wait for it (None: stopping).

        What the batch holds so far is delivered first, so the streams have every
        record before the one that waits; the wait backs off, and the topic's streams
        stay open (their heartbeats come from the loop, not from here).
        """
        try:
            record: Record | None = self._record_make(message)
        except RegistryUnavailable as exc:
            record = self._record_waited(message, batch, exc)
            if record is None:
                return None
        if self.registry_waiting is not None:
            logger.warning("topic %s: its schema registry answers again", self.topic)
            self.registry_waiting = None
        return record

    def _record_waited(
        self, message: Any, batch: list[Record | PartitionEnd], failed: RegistryUnavailable
    ) -> Record | None:
        def waiting(exc: Exception, delay: float) -> None:
            if self.registry_waiting is None:
                logger.warning("topic %s waits for its schema registry: %s", self.topic, exc)
            self.registry_waiting = str(exc)
            if batch:
                self._deliver(list(batch))
                batch.clear()

        try:
            return call_retried(
                lambda: self._record_make(message),
                REGISTRY_RETRY,
                on_retry=waiting,
                wait=self._stopping.wait,
                failed=failed,
            )
        except RetriesStopped:
            return None

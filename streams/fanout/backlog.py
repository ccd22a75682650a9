"""Catch-up reads: ranges older than the hub's cache, in chunks, with a consumer lent for each chunk.

Run in the Kafka pool (:class:`~streams.fanout.kafka.KafkaAccess`), one reader per
catching-up stream, each chunk with a consumer of the cluster's
:class:`~streams.fanout.backlog_pool.BacklogConsumers`; :mod:`streams.fanout.catchup`
decides the ranges and joins the stream to the live feed after them.
"""

from __future__ import annotations

import logging

from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition

from streams.core.records import Record
from streams.fanout.backlog_pool import LentConsumer
from streams.fanout.kafka import KafkaAccess, KafkaUnavailable, RecordMake, message_position

logger = logging.getLogger("sluice.kafka")


class BacklogReader:
    """A catch-up's reads of ranges older than the cache, in chunks, each with a consumer of the cluster's pool."""

    def __init__(self, access: KafkaAccess, topic: str, record_make: RecordMake = Record.from_kafka) -> None:
        self.topic = topic
        self._access = access
        self._record_make = record_make
        # The consumer the last chunk was read with: asked for again, its fetch goes on where it was.
        self._last: LentConsumer | None = None

    def read(
        self, ranges: dict[int, tuple[int, int]], max_records: int, max_bytes: int
    ) -> tuple[list[Record], dict[int, int]]:
        """Read records in ``[start, stop)`` per partition (blocking; run it in the pool, holding a reader slot).

        Returns the records and, per partition, how far the read got: the next
        offset to read, never beyond ``stop``. A start below the log start moves
        to the log start.
        """
        pool = self._access.backlog_consumers
        lent, self._last = pool.take(self.topic, {p: start for p, (start, _) in ranges.items()}, self._last), None
        try:
            found = self._read(lent, ranges, max_records, max_bytes)
        except BaseException:
            pool.discard(lent)  # what it fetched and handed out is not known
            raise
        pool.give(lent)
        self._last = lent
        return found

    def _read(
        self, lent: LentConsumer, ranges: dict[int, tuple[int, int]], max_records: int, max_bytes: int
    ) -> tuple[list[Record], dict[int, int]]:
        topic = self.topic
        positions = {p: start for p, (start, _) in ranges.items()}
        if lent.topic != topic or positions != lent.assigned:
            if any(o < lent.fetched.get((topic, p), -1) for p, o in positions.items()):
                # librdkafka applies assign() asynchronously: records and ends fetched for
                # the old positions can still come out after it, and when the new range
                # starts below them they would pass for its next records. A fresh consumer
                # has none (going forward, the filter below drops them; another topic's, the topic check).
                self._access.backlog_consumers.renew(lent)
            lent.consumer.assign(
                [TopicPartition(topic, p, o if o >= 0 else OFFSET_BEGINNING) for p, o in positions.items()]
            )
            lent.topic, lent.assigned = topic, dict(positions)
        consumer = lent.consumer
        stops = {p: stop for p, (_, stop) in ranges.items()}
        pending = {p for p in ranges if positions[p] < stops[p]}
        records: list[Record] = []
        size = 0
        idle_polls = 0
        overshot = False
        while pending and len(records) < max_records and size < max_bytes:
            messages = consumer.consume(num_messages=min(500, max_records - len(records)), timeout=0.2)
            if not messages:
                idle_polls += 1
                if idle_polls * 0.2 > self._access.timeout:
                    raise KafkaUnavailable(f"no data from {topic} within {self._access.timeout}s")
                continue
            idle_polls = 0
            for message in messages:
                partition, offset = message_position(message)
                error = message.error()
                is_end = error is not None and error.code() == KafkaError._PARTITION_EOF
                if error is not None and not is_end:
                    logger.warning("backlog read of %s: %s", topic, error)
                    continue
                where = (message.topic(), partition)
                lent.fetched[where] = max(lent.fetched.get(where, -1), offset if is_end else offset + 1)
                if where[0] != topic:
                    continue  # fetched for another catch-up's topic, before this assignment
                if partition not in pending:
                    overshot = True  # the consumer has moved on past `positions` here
                    continue
                if error is None and offset < positions[partition]:
                    continue  # fetched for an earlier assignment
                if is_end:
                    positions[partition] = max(positions[partition], min(offset, stops[partition]))
                    if positions[partition] >= stops[partition]:
                        pending.discard(partition)
                    continue
                if offset >= stops[partition]:
                    overshot = True
                    positions[partition] = stops[partition]
                    pending.discard(partition)
                    continue
                # RegistryUnavailable propagates: the catch-up waits and reads this range again.
                record = self._record_make(message)
                records.append(record)
                size += record.size
                positions[partition] = offset + 1
                if positions[partition] >= stops[partition]:
                    pending.discard(partition)
        # Every message consume() returned was looked at, so a read that goes on
        # from `positions` needs no re-assignment, unless records past a stop were
        # dropped (the consumer is then ahead of `positions`).
        lent.assigned = {} if overshot else dict(positions)
        return records, positions

    def close(self) -> None:
        """The catch-up is over: its last consumer, if idle, stops fetching."""
        last, self._last = self._last, None
        self._access.backlog_consumers.rest(last)

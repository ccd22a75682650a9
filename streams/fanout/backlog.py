"""Catch-up reads: a short-lived consumer that reads ranges older than the hub's cache, in chunks.

Run in the Kafka pool (:class:`~streams.fanout.kafka.KafkaAccess`), one per catching-up
stream; :mod:`streams.fanout.catchup` decides the ranges and joins the stream to the
live feed after them.
"""

from __future__ import annotations

import logging

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from streams.core.records import Record
from streams.fanout.kafka import KafkaAccess, KafkaUnavailable, RecordMake, consumer_config, message_position

logger = logging.getLogger("sluice.kafka")


class BacklogReader:
    """A short-lived consumer that reads ranges older than the cache, in chunks."""

    def __init__(self, access: KafkaAccess, topic: str, record_make: RecordMake = Record.from_kafka) -> None:
        self.topic = topic
        self._access = access
        self._record_make = record_make
        self._consumer: Consumer | None = None
        self._assigned: dict[int, int] = {}
        # Per partition: just past the last record (or end) this consumer handed out.
        self._fetched: dict[int, int] = {}

    def read(
        self, ranges: dict[int, tuple[int, int]], max_records: int, max_bytes: int
    ) -> tuple[list[Record], dict[int, int]]:
        """Read records in ``[start, stop)`` per partition (blocking; run it in the pool).

        Returns the records and, per partition, how far the read got: the next
        offset to read, never beyond ``stop``. A start below the log start moves
        to the log start.
        """
        positions = {p: start for p, (start, _) in ranges.items()}
        if positions != self._assigned:
            if any(o < self._fetched.get(p, -1) for p, o in positions.items()):
                # librdkafka applies assign() asynchronously: records and ends fetched for
                # the old positions can still come out after it, and when the new range
                # starts below them they would pass for its next records. A fresh consumer
                # has none (going forward, the filter below drops them).
                self.close()
            if self._consumer is None:
                # The data is there, and any broker answers at once: the wait paces the fetches
                # librdkafka goes on sending once this reader is at the log's end.
                wait = self._access.backlog_wait_ms
                self._consumer = Consumer(consumer_config(self._access.client, **{"fetch.wait.max.ms": wait}))
            self._consumer.assign(
                [TopicPartition(self.topic, p, o if o >= 0 else OFFSET_BEGINNING) for p, o in positions.items()]
            )
            self._assigned = dict(positions)
        consumer = self._consumer
        assert consumer is not None
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
                    raise KafkaUnavailable(f"no data from {self.topic} within {self._access.timeout}s")
                continue
            idle_polls = 0
            for message in messages:
                partition, offset = message_position(message)
                error = message.error()
                is_end = error is not None and error.code() == KafkaError._PARTITION_EOF
                if error is None or is_end:
                    self._fetched[partition] = max(self._fetched.get(partition, -1), offset if is_end else offset + 1)
                if partition not in pending:
                    overshot = True  # the consumer has moved on past `positions` here
                    continue
                if error is None and offset < positions[partition]:
                    continue  # fetched for an earlier assignment
                if error is not None:
                    if is_end:
                        positions[partition] = max(positions[partition], min(offset, stops[partition]))
                        if positions[partition] >= stops[partition]:
                            pending.discard(partition)
                        continue
                    logger.warning("backlog read of %s: %s", self.topic, error)
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
        self._assigned = {} if overshot else dict(positions)
        return records, positions

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        self._assigned = {}
        self._fetched = {}

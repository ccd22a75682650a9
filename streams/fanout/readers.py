"""The Kafka readers of a hub: its live fetch and its catch-ups' backlog reads, on one cluster's access."""

from __future__ import annotations

from dataclasses import dataclass

from streams.fanout.access import BatchDeliver
from streams.fanout.backlog import BacklogReader
from streams.fanout.kafka import KafkaAccess, LiveFetcher, RecordMake


@dataclass(frozen=True, slots=True)
class KafkaReaders:
    """Makes each :class:`~streams.fanout.kafka.LiveFetcher` and :class:`~streams.fanout.backlog.BacklogReader`."""

    access: KafkaAccess

    def live(self, topic: str, start: dict[int, int], deliver: BatchDeliver, record_make: RecordMake) -> LiveFetcher:
        return LiveFetcher(self.access, topic, start, deliver, record_make=record_make)

    def backlog(self, topic: str, record_make: RecordMake) -> BacklogReader:
        return BacklogReader(self.access, topic, record_make)

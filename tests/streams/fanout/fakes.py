"""A Kafka cluster in memory for the hub's unit tests: its look-ups, its live feed and its backlog reads."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from streams.core.records import Record
from streams.fanout.access import BatchDeliver
from streams.fanout.kafka import KafkaUnavailable, RecordMake


class FakeFeed:
    """A live feed that never fetches: the test hands the hub its batches."""

    registry_waiting: str | None = None
    fetch_wait_ms = 0

    def __init__(self, start: dict[int, int]) -> None:
        self.start_positions = dict(start)
        self.high_watermarks: dict[int, int] = {}
        self.added: dict[int, int] = {}

    def start(self) -> None:
        return None

    def stop(self) -> None:
        return None

    def partitions_add(self, starts: dict[int, int]) -> None:
        self.added.update(starts)


class FakeBacklog:
    """Reads the fake cluster's log; ``down`` makes every read fail as an unreachable broker would."""

    def __init__(self, cluster: FakeAccess) -> None:
        self.cluster = cluster
        self.closed = False

    def read(
        self, ranges: dict[int, tuple[int, int]], max_records: int, max_bytes: int
    ) -> tuple[list[Record], dict[int, int]]:
        if self.cluster.down:
            raise KafkaUnavailable("the fake cluster is down")
        self.cluster.reads.append(dict(ranges))
        records: list[Record] = []
        reached: dict[int, int] = {}
        for p, (start, stop) in ranges.items():
            found = [r for r in self.cluster.log.get(p, []) if start <= r.offset < stop][:max_records]
            records += found
            reached[p] = found[-1].offset + 1 if len(found) == max_records else stop
        return records, reached

    def close(self) -> None:
        self.closed = True


class FakeAccess:
    """One topic's partitions, watermarks and log (``{partition: records}``), with no broker.

    Satisfies :class:`~streams.fanout.access.TopicAccess` and :class:`~streams.fanout.access.TopicReaders`.
    """

    executor = None
    timeout = 1.0

    def __init__(
        self,
        partitions: Iterable[int] = (0, 1),
        marks: dict[int, tuple[int, int]] | None = None,
        log: dict[int, list[Record]] | None = None,
    ) -> None:
        self.partition_ids = sorted(partitions)
        self.log = log or {}
        self.marks = marks or {p: self.log_marks(p) for p in self.partition_ids}
        self.backlog_slots = asyncio.Semaphore(4)
        self.down = False
        self.reads: list[dict[int, tuple[int, int]]] = []
        self.backlogs: list[FakeBacklog] = []
        self.feeds: list[FakeFeed] = []

    def log_marks(self, partition: int) -> tuple[int, int]:
        records = self.log.get(partition, [])
        return (records[0].offset, records[-1].offset + 1) if records else (0, 0)

    def partitions(self, topic: str) -> list[int]:
        return list(self.partition_ids)

    def watermarks(self, topic: str, partitions: Iterable[int]) -> dict[int, tuple[int, int]]:
        return {p: self.marks[p] for p in partitions}

    def offsets_for_time(self, topic: str, partitions: Iterable[int], timestamp_ms: int) -> dict[int, int]:
        found = {}
        for p in partitions:
            offsets = [r.offset for r in self.log.get(p, []) if r.timestamp >= timestamp_ms]
            found[p] = offsets[0] if offsets else -1
        return found

    def unavailable(self, detail: str) -> KafkaUnavailable:
        return KafkaUnavailable(detail)

    def live(self, topic: str, start: dict[int, int], deliver: BatchDeliver, record_make: RecordMake) -> FakeFeed:
        feed = FakeFeed(start)
        self.feeds.append(feed)
        return feed

    def backlog(self, topic: str, record_make: RecordMake) -> FakeBacklog:
        reader = FakeBacklog(self)
        self.backlogs.append(reader)
        return reader

"""The record cache of a topic hub: one contiguous run per partition, bounded by the topic's limits."""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterator
from dataclasses import dataclass

from streams.core.records import Record
from streams.fanout.keyindex import KeyIndex


@dataclass(frozen=True, slots=True)
class CacheLimits:
    """Per-topic bounds (SPEC 2.5): messages, bytes and age across all partitions."""

    max_messages: int = 10_000
    max_bytes: int = 16 * 1024 * 1024
    max_age_seconds: float = 3600.0


class PartitionCache:
    """Records of one partition, contiguous from ``start`` to the hub's position.

    ``start`` is the first offset the cache can answer for: a resume at or after
    it is served from memory, one before it must read Kafka. ``keys`` indexes the
    same records by key (:mod:`streams.fanout.keyindex`).
    """

    __slots__ = ("partition", "start", "keys", "_records", "_offsets", "_head", "bytes")

    def __init__(self, partition: int, start: int) -> None:
        self.partition = partition
        self.start = start
        self._records: list[Record] = []
        self._offsets: list[int] = []
        self._head = 0
        self.bytes = 0
        self.keys = KeyIndex()

    def __len__(self) -> int:
        return len(self._records) - self._head

    def append(self, record: Record) -> None:
        self._records.append(record)
        self._offsets.append(record.offset)
        self.bytes += record.size
        self.keys.add(record)

    def oldest(self) -> Record | None:
        return self._records[self._head] if self._head < len(self._records) else None

    def evict_oldest(self) -> Record:
        record = self._records[self._head]
        self._records[self._head] = None  # type: ignore[call-overload]
        self._head += 1
        self.bytes -= record.size
        self.start = record.offset + 1
        self.keys.remove(record)
        if self._head > 1024 and self._head * 2 > len(self._records):
            del self._records[: self._head]
            del self._offsets[: self._head]
            self._head = 0
        return record

    def covers(self, offset: int) -> bool:
        return offset >= self.start

    def records_from(self, offset: int, limit: int) -> list[Record]:
        """Up to ``limit`` cached records with offset >= ``offset`` (which must be covered)."""
        index = bisect.bisect_left(self._offsets, offset, lo=self._head)
        return self._records[index : index + limit]

    def count_between(self, offset: int, end: int | None = None) -> int:
        """How many cached records have an offset from ``offset`` (covered) up to ``end`` (excluded; None: all)."""
        offsets, head = self._offsets, self._head
        first = bisect.bisect_left(offsets, offset, lo=head)
        last = len(offsets) if end is None else bisect.bisect_left(offsets, end, lo=first)
        return last - first

    def first_at_or_after(self, timestamp_ms: int) -> Record | None:
        for record in self:
            if record.timestamp >= timestamp_ms:
                return record
        return None

    def __iter__(self) -> Iterator[Record]:
        return iter(self._records[self._head :])


class TopicCache:
    """The :class:`PartitionCache` of each partition, with the totals the topic's limits bound."""

    __slots__ = ("bytes", "limits", "partitions", "records")

    def __init__(self, limits: CacheLimits) -> None:
        self.limits = limits
        self.partitions: dict[int, PartitionCache] = {}
        self.records = 0
        self.bytes = 0

    def reset(self, starts: dict[int, int]) -> None:
        """Empty caches that start at ``starts`` (the hub's position per partition)."""
        self.partitions = {p: PartitionCache(p, o) for p, o in starts.items()}
        self.records = self.bytes = 0

    def partition_restart(self, partition: int, start: int) -> None:
        """Forget what ``partition`` held (its log began anew): an empty cache starting at ``start``."""
        old = self.partitions[partition]
        self.records -= len(old)
        self.bytes -= old.bytes
        self.partitions[partition] = PartitionCache(partition, start)

    def __getitem__(self, partition: int) -> PartitionCache:
        return self.partitions[partition]

    def append(self, record: Record) -> None:
        self.partitions[record.partition].append(record)
        self.records += 1
        self.bytes += record.size

    def evict(self) -> None:
        """Drop the oldest records (by time, across partitions) until within the count and byte bounds.

        A full cache evicts about one record per record it takes; the partitions' oldest
        records wait in a heap, so picking each victim does not look at every partition.
        """
        limits = self.limits
        if self.records <= limits.max_messages and self.bytes <= limits.max_bytes:
            return
        partitions = self.partitions
        oldest = [(record.timestamp, p) for p, c in partitions.items() if (record := c.oldest()) is not None]
        heapq.heapify(oldest)
        while self.records > limits.max_messages or self.bytes > limits.max_bytes:
            cache = partitions[oldest[0][1]]
            record = cache.evict_oldest()
            self.records -= 1
            self.bytes -= record.size
            following = cache.oldest()
            if following is None:
                heapq.heappop(oldest)
            else:
                heapq.heapreplace(oldest, (following.timestamp, cache.partition))

    def evict_expired(self, now_ms: int) -> None:
        """Drop records older than the age bound."""
        cutoff = now_ms - int(self.limits.max_age_seconds * 1000)
        for cache in self.partitions.values():
            while (oldest := cache.oldest()) is not None and oldest.timestamp < cutoff:
                cache.evict_oldest()
                self.records -= 1
                self.bytes -= oldest.size

    def behind(self, positions: dict[int, int]) -> bool:
        """Whether any of ``positions`` lies before what the cache holds (only Kafka has it)."""
        return any(offset < self.partitions[p].start for p, offset in positions.items())

"""The per-partition record cache of a topic hub, bounded by the topic's limits."""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass

from streams.core.records import Record


@dataclass(frozen=True, slots=True)
class CacheLimits:
    """Per-topic bounds (SPEC 2.5): messages, bytes and age across all partitions."""

    max_messages: int = 10_000
    max_bytes: int = 16 * 1024 * 1024
    max_age_seconds: float = 3600.0


class PartitionCache:
    """Records of one partition, contiguous from ``start`` to the hub's position.

    ``start`` is the first offset the cache can answer for: a resume at or after
    it is served from memory, one before it must read Kafka.
    """

    __slots__ = ("partition", "start", "_records", "_offsets", "_head", "bytes")

    def __init__(self, partition: int, start: int) -> None:
        self.partition = partition
        self.start = start
        self._records: list[Record] = []
        self._offsets: list[int] = []
        self._head = 0
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._records) - self._head

    def append(self, record: Record) -> None:
        self._records.append(record)
        self._offsets.append(record.offset)
        self.bytes += record.size

    def oldest(self) -> Record | None:
        return self._records[self._head] if self._head < len(self._records) else None

    def evict_oldest(self) -> Record:
        record = self._records[self._head]
        self._records[self._head] = None  # type: ignore[call-overload]
        self._head += 1
        self.bytes -= record.size
        self.start = record.offset + 1
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

    def first_at_or_after(self, timestamp_ms: int) -> Record | None:
        for record in self:
            if record.timestamp >= timestamp_ms:
                return record
        return None

    def __iter__(self) -> Iterator[Record]:
        return iter(self._records[self._head :])

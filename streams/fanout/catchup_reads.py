"""One catch-up's reads of Kafka, older than the hub's cache: in chunks, on the access's pool.

Shared by :mod:`~streams.fanout.catchup` and :mod:`~streams.fanout.snapshot`;
the reader is made on first use and closed (or dropped after a failure) by the
catch-up that owns it.
"""

from __future__ import annotations

from streams.core.records import Record
from streams.fanout.access import BacklogRead, TopicAccess, TopicReaders, access_call
from streams.fanout.backlog_pool import CHUNK_BYTES, CHUNK_RECORDS
from streams.fanout.kafka import RecordMake

__all__ = ["CHUNK_BYTES", "CHUNK_RECORDS", "BacklogSession"]


class BacklogSession:
    """A catch-up's :class:`~streams.fanout.access.BacklogRead`, made on first use."""

    __slots__ = ("access", "reader", "readers", "record_make", "topic")

    def __init__(self, topic: str, access: TopicAccess, readers: TopicReaders, record_make: RecordMake) -> None:
        self.topic = topic
        self.access = access
        self.readers = readers
        self.record_make = record_make
        self.reader: BacklogRead | None = None

    async def read(
        self, ranges: dict[int, tuple[int, int]], max_bytes: int = CHUNK_BYTES
    ) -> tuple[list[Record], dict[int, int]]:
        """Records in ``[start, stop)`` per partition, up to a chunk, and how far the read got per partition."""
        if self.reader is None:
            self.reader = self.readers.backlog(self.topic, self.record_make)
        reader = self.reader
        # Wait for a slot on the loop: a pool thread blocked on it could starve the reads holding the slots.
        async with self.access.backlog_slots:
            return await access_call(self.access, reader.read, ranges, CHUNK_RECORDS, max_bytes)

    async def close(self) -> None:
        """Close the reader, if there is one (the next read makes a new one)."""
        reader, self.reader = self.reader, None
        if reader is not None:
            await access_call(self.access, reader.close)

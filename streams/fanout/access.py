"""What a hub and its catch-ups ask of a Kafka cluster, as Protocols.

:class:`~streams.fanout.kafka.KafkaAccess` satisfies :class:`TopicAccess`, and
:class:`~streams.fanout.readers.KafkaReaders` satisfies :class:`TopicReaders`;
unit tests hand a hub fakes of both, with no broker and no ``type: ignore``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from concurrent.futures import Executor
from typing import Any, Protocol, TypeVar

from streams.core.records import Record
from streams.fanout.kafka import PartitionEnd, RecordMake

T = TypeVar("T")

# Takes one fetched batch (on the fetch thread).
BatchDeliver = Callable[[list[Record | PartitionEnd]], None]


class TopicAccess(Protocol):
    """A cluster's look-ups (blocking: run them on ``executor``) and the bounds catch-ups share."""

    @property
    def executor(self) -> Executor | None:
        """The pool the blocking calls run on (None: the event loop's default)."""

    @property
    def timeout(self) -> float: ...

    @property
    def backlog_slots(self) -> asyncio.Semaphore: ...

    def partitions(self, topic: str) -> list[int]: ...

    def watermarks(self, topic: str, partitions: Iterable[int]) -> dict[int, tuple[int, int]]: ...

    def offsets_for_time(self, topic: str, partitions: Iterable[int], timestamp_ms: int) -> dict[int, int]: ...

    def unavailable(self, detail: str) -> Exception: ...


class LiveFeed(Protocol):
    """The one fetch of a topic that feeds its hub (:class:`~streams.fanout.kafka.LiveFetcher`)."""

    @property
    def registry_waiting(self) -> str | None: ...

    @property
    def high_watermarks(self) -> dict[int, int]: ...

    @property
    def fetch_wait_ms(self) -> int: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def partitions_add(self, starts: dict[int, int]) -> None: ...


class BacklogRead(Protocol):
    """A catch-up's reads older than the cache (:class:`~streams.fanout.backlog.BacklogReader`; blocking)."""

    def read(
        self, ranges: dict[int, tuple[int, int]], max_records: int, max_bytes: int
    ) -> tuple[list[Record], dict[int, int]]: ...

    def close(self) -> None: ...


class TopicReaders(Protocol):
    """Makes a topic's live feed and its catch-ups' backlog reads."""

    def live(self, topic: str, start: dict[int, int], deliver: BatchDeliver, record_make: RecordMake) -> LiveFeed: ...

    def backlog(self, topic: str, record_make: RecordMake) -> BacklogRead: ...


async def access_call(access: TopicAccess, func: Callable[..., T], *args: Any) -> T:
    """Run a blocking Kafka call on the access's thread pool."""
    return await asyncio.get_running_loop().run_in_executor(access.executor, func, *args)

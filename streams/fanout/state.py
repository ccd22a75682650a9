"""What a hub's fan-out, catch-ups and start planning share: its position, cache, live set and counters.

:class:`~streams.fanout.hub.TopicHub` owns one :class:`HubState` and hands it
to :mod:`~streams.fanout.ingest`, :mod:`~streams.fanout.catchup` and
:mod:`~streams.fanout.planning`, with itself as the :class:`HubControl` that
moves streams between the live set and catch-up; none of them sees the hub.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from streams.core.ids import ProgressEncoder
from streams.core.records import Record
from streams.fanout.cache import TopicCache
from streams.fanout.counts import RouteTally
from streams.fanout.cutoffs import Cutoffs
from streams.fanout.liveset import LiveSet
from streams.fanout.subscriber import Subscriber

if TYPE_CHECKING:
    from streams.core.schemas import SchemaCheck
    from streams.fanout.kafka import PartitionEnd


class BatchWatch(Protocol):
    """Something that looks at each batch after its fan-out (traces: ``streams.edge.streaming.tracing``).

    Set on a hub only while used: with none, the fan-out pays one test per batch.
    """

    def batch(self, state: HubState, batch: list[Record | PartitionEnd]) -> None: ...


@dataclass(slots=True)
class HubCounters:
    """A hub's totals, bumped once per batch (or per rare event) on the loop and read at scrape time."""

    records_in: int = 0
    deliveries: int = 0
    cut_slow: int = 0
    demotions: int = 0
    invalid: int = 0  # records with no frame in a stream's id form (not UTF-8 text)
    schema_invalid: int = 0  # records the topic's schema rejected
    undecodable: int = 0  # records whose value or key did not decode by the topic's formats
    # Resumes whose id named offsets past the log's end (started at the end), and records
    # resumes could not have because retention removed them (started at the log's start).
    clamped_past_end: int = 0
    gap_records: int = 0
    # Catch-ups that read the cache / Kafka (a catch-up counts once per source it used).
    catch_ups_cache: int = 0
    catch_ups_kafka: int = 0
    # Partitions whose log began anew under the hub (the topic was deleted and created again).
    log_restarts: int = 0


@dataclass(slots=True, eq=False)
class HubState:
    """One topic's position, cache and streams as the fan-out reads and moves them (on the event loop)."""

    topic: str
    cache: TopicCache
    # Ends due by wall-clock time (a token's exp), run before each write.
    cutoffs: Cutoffs
    partitions: list[int] = field(default_factory=list)
    # The next offset of each partition, and its progress token, which moves with it:
    # whoever moves a partition in ``positions`` moves it in ``progress`` too.
    positions: dict[int, int] = field(default_factory=dict)
    progress: ProgressEncoder = field(default_factory=lambda: ProgressEncoder({}))
    live: LiveSet = field(default_factory=LiveSet)
    # The topic's schema: a record it rejects reaches no stream (SPEC 5).
    schema: SchemaCheck | None = None
    tally: RouteTally = field(default_factory=RouteTally)
    counters: HubCounters = field(default_factory=HubCounters)
    # Kafka timestamp (epoch ms) of the newest record the hub has read: the fetch lag in seconds.
    newest_ms: int = 0
    # Called with each batch after its fan-out, if set (traces).
    watch: BatchWatch | None = None
    # Set (and replaced) after every batch: catch-ups ahead of the hub wait on it.
    advanced: asyncio.Event = field(default_factory=asyncio.Event)
    # Where each partition's log began anew, for partitions the hub saw start over (a topic created
    # again): a resume naming an offset past the end is of the old log, and starts here.
    restarts: dict[int, int] = field(default_factory=dict)

    def positions_reset(self, positions: dict[int, int]) -> None:
        """Take ``positions`` as the hub's position (its progress token made anew)."""
        self.positions = positions
        self.progress = ProgressEncoder(positions)

    def admits(self, sub: Subscriber, record: Record) -> bool:
        """Whether the topic's and the stream's route schema let ``record`` through (catch-up path)."""
        schema = self.schema
        if schema is not None and not schema.admits(record):
            return False
        schema = sub.schema
        return schema is None or schema.admits(record)


class HubControl(Protocol):
    """What the fan-out's helpers ask of their hub: move a stream between live, catch-up and ended."""

    def go_live(self, sub: Subscriber) -> None:
        """A caught-up stream joins the live set (in the step that found it level)."""

    def demote(self, sub: Subscriber, positions: dict[int, int]) -> None:
        """A live stream that has not taken what it was sent catches up from ``positions``."""

    def cut(self, sub: Subscriber) -> None:
        """A stream over its pending-bytes bound: dropped; it resumes from its last id."""

    def log_restart(self, partition: int, offset: int) -> None:
        """``partition``'s log began anew at ``offset`` (the topic was created again): the hub reads it from there."""

    def unsubscribe(self, sub: Subscriber) -> None:
        """Take ``sub`` out of the hub (live, catching up, keep-alives)."""

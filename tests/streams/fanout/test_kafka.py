"""The Kafka wrapper with a stand-in for confluent-kafka's Consumer: look-ups, backlog reads, the live fetch."""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from streams.core.records import Record
from streams.fanout import kafka
from streams.fanout.backlog import BacklogReader
from streams.fanout.backlog_pool import LentConsumer
from streams.fanout.kafka import (
    KafkaAccess,
    KafkaUnavailable,
    LiveFetcher,
    PartitionEnd,
    TopicNotFound,
    consumer_config,
)
from streams.fanout.kafka_config import ConsumerDefaults


@dataclass
class Message:
    """What a consumed confluent-kafka message answers."""

    partition_: int
    offset_: int
    value_: bytes | None = b"v"
    key_: bytes | None = None
    eof: bool = False
    failure: int | None = None
    topic_: str = "scores"

    def topic(self) -> str:
        return self.topic_

    def partition(self) -> int:
        return self.partition_

    def offset(self) -> int:
        return self.offset_

    def error(self) -> KafkaError | None:
        if self.eof:
            return KafkaError(KafkaError._PARTITION_EOF)
        if self.failure is not None:
            return KafkaError(self.failure)
        return None

    def key(self) -> bytes | None:
        return self.key_

    def value(self) -> bytes | None:
        return self.value_

    def headers(self) -> list[tuple[str, bytes]] | None:
        return None

    def timestamp(self) -> tuple[int, int]:
        return (1, 1_000 + self.offset_)


@dataclass
class TopicMetadata:
    partitions: dict[int, Any]
    error: KafkaError | None = None


@dataclass
class FakeConsumer:
    """Answers from queued batches; records what was assigned and whether it was closed."""

    config: dict[str, Any]
    batches: deque[list[Message]] = field(default_factory=deque)
    topics: dict[str, TopicMetadata] = field(default_factory=dict)
    marks: dict[int, tuple[int, int]] = field(default_factory=dict)
    failing: bool = False
    assigned: list[list[tuple[int, int]]] = field(default_factory=list)
    closed: bool = False
    consume_timeouts: list[float] = field(default_factory=list)

    def assign(self, partitions: list[Any]) -> None:
        self.assigned.append([(tp.partition, tp.offset) for tp in partitions])

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]:
        self.consume_timeouts.append(timeout)
        return self.batches.popleft() if self.batches else []

    def poll(self, timeout: float = -1) -> Message | None:
        batch = self.batches.popleft() if self.batches else []
        if not batch:
            return None
        first, rest = batch[0], batch[1:]
        if rest:
            self.batches.appendleft(rest)
        return first

    def list_topics(self, topic: str, timeout: float = -1) -> Any:
        if self.failing:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT))
        return type("Metadata", (), {"topics": self.topics, "cluster_id": "kafka-cluster"})()

    def get_watermark_offsets(self, tp: Any, timeout: float = -1, cached: bool = False) -> tuple[int, int]:
        if self.failing:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT))
        return self.marks[tp.partition]

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def consumers(monkeypatch: pytest.MonkeyPatch) -> list[FakeConsumer]:
    """Every consumer the wrapper makes, in order."""
    made: list[FakeConsumer] = []

    def make(config: dict[str, Any]) -> FakeConsumer:
        consumer = FakeConsumer(config)
        made.append(consumer)
        return consumer

    monkeypatch.setattr(kafka, "Consumer", make)
    return made


def test_consumer_config_never_joins_a_group_and_takes_extras() -> None:
    config = consumer_config("k:9092", **{"fetch.wait.max.ms": 5})
    assert config["bootstrap.servers"] == "k:9092"
    assert config["enable.auto.commit"] is False
    assert config["enable.partition.eof"] is True
    assert config["fetch.wait.max.ms"] == 5
    assert consumer_config("k:9092")["group.id"] != config["group.id"]  # a group id nobody else has


def test_consumer_config_defaults_under_the_clusters_settings() -> None:
    defaults = ConsumerDefaults("readers", fetch_wait_ms=10, log_level=0)
    config = consumer_config({"bootstrap.servers": "k:9092", "log_level": "7"}, defaults)
    assert config["group.id"] == "readers"
    assert config["fetch.wait.max.ms"] == 10
    assert config["log_level"] == "7"  # the cluster's settings win over the defaults


async def test_partitions_unknown_topic_and_unavailable(consumers: list[FakeConsumer]) -> None:
    access = KafkaAccess("k:9092", timeout=1.0)
    try:
        lookup = access._lookup_consumer()
        lookup.topics = {
            "scores": TopicMetadata({2: None, 0: None, 1: None}),
            "gone": TopicMetadata({}, KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)),
        }
        assert access.partitions("scores") == [0, 1, 2]
        with pytest.raises(TopicNotFound):
            access.partitions("gone")
        with pytest.raises(TopicNotFound):
            access.partitions("never-heard-of")
        lookup.failing = True
        with pytest.raises(KafkaUnavailable):
            access.partitions("scores")
        with pytest.raises(KafkaUnavailable):
            access.watermarks("scores", [0])
        lookup.failing = False
        lookup.marks = {0: (3, 10), 1: (0, 0)}
        assert access.watermarks("scores", [0, 1]) == {0: (3, 10), 1: (0, 0)}
        assert len(consumers) == 1  # one look-up consumer, reused
    finally:
        access.close()
    assert consumers[0].closed


async def test_backlog_read_stops_at_the_range_and_at_partition_ends(consumers: list[FakeConsumer]) -> None:
    access = KafkaAccess("k:9092", timeout=1.0)
    reader = BacklogReader(access, "scores")
    try:
        access.backlog_consumers.give(
            LentConsumer(
                consumers_make(
                    consumers,
                    [
                        # A record from before the range (an earlier assignment), records of the range, and the
                        # end of partition 1 past offsets it never had records at (compaction, control records).
                        [Message(0, 1), Message(0, 2), Message(0, 3), Message(1, 2, eof=True)],
                        # The last record of the range, then one past its stop (left for the next read).
                        [Message(0, 4), Message(0, 5)],
                    ],
                )
            )
        )
        records, reached = reader.read({0: (2, 5), 1: (0, 2)}, max_records=100, max_bytes=1 << 20)
        assert [(r.partition, r.offset) for r in records] == [(0, 2), (0, 3), (0, 4)]
        assert reached == {0: 5, 1: 2}
        assert consumers[-1].assigned == [[(0, 2), (1, 0)]]
    finally:
        reader.close()
        access.close()


async def test_backlog_read_without_data_is_kafka_unavailable(consumers: list[FakeConsumer]) -> None:
    access = KafkaAccess("k:9092", timeout=0.3)
    reader = BacklogReader(access, "scores")
    try:
        access.backlog_consumers.give(LentConsumer(consumers_make(consumers, [])))
        with pytest.raises(KafkaUnavailable, match=r"no data from scores within 0\.3s"):
            reader.read({0: (0, 10)}, max_records=100, max_bytes=1 << 20)
    finally:
        reader.close()
        access.close()


async def test_backlog_readers_share_the_clusters_consumers_one_chunk_at_a_time(consumers: list[FakeConsumer]) -> None:
    access = KafkaAccess("k:9092", timeout=1.0, backlog_readers=1)
    pool = access.backlog_consumers
    made = len(consumers)
    first, second = BacklogReader(access, "scores"), BacklogReader(access, "other")
    try:
        pool.give(LentConsumer(consumers_make(consumers, [[Message(0, 0), Message(0, 1)]])))
        records, reached = first.read({0: (0, 2)}, 100, 1 << 20)
        assert ([r.offset for r in records], reached) == ([0, 1], {0: 2})
        consumer = consumers[made]
        # Fetched for the first reader's topic after its chunk, then the other topic's records.
        consumer.batches.extend([[Message(0, 2), Message(0, 5, topic_="other")], [Message(0, 6, topic_="other")]])
        records, reached = second.read({0: (5, 7)}, 100, 1 << 20)
        assert [(r.partition, r.offset) for r in records] == [(0, 5), (0, 6)]  # never the first topic's record
        assert reached == {0: 7}
        assert len(consumers) == made + 1  # the one consumer, lent to each in turn
        assert consumer.assigned[-1] == [(0, 5)]
        second.close()
        assert consumer.assigned[-1] == []  # idle and its catch-up over: it stops fetching
        assert pool.idle == 1
    finally:
        first.close()
        access.close()
    assert consumer.closed


def test_backlog_consumers_stay_within_their_number() -> None:
    from streams.fanout.backlog_pool import BacklogConsumers

    made: list[FakeConsumer] = []

    def make() -> FakeConsumer:
        made.append(FakeConsumer({}))
        return made[-1]

    pool = BacklogConsumers(make, size=2, idle_seconds=60.0)
    lent = [pool.take() for _ in range(3)]  # three at once: more than the slots would let through
    for each in lent:
        pool.give(each)
    assert len(made) == 3
    assert pool.idle == 2
    assert [c.closed for c in made] == [False, False, True]  # the third is not kept
    assert pool.take(preferred=lent[0]) is lent[0]  # a catch-up gets its own consumer back when it is idle
    assert pool.take(preferred=lent[0]) is lent[1]  # else another idle one
    assert len(made) == 3
    assert pool.take() is not None  # two lent, none idle, fewer than 2 open: a new one, not a renewal
    assert (len(made), pool.count) == (4, 3)
    pool.give(lent[0])
    pool.idle_seconds = 0.0
    pool.take().consumer.close()  # expired: closed, and a new one made
    assert made[0].closed
    assert len(made) == 5
    pool.close()


async def test_a_backlog_read_below_what_its_consumer_fetched_gets_a_fresh_one(consumers: list[FakeConsumer]) -> None:
    access = KafkaAccess("k:9092", timeout=1.0, backlog_readers=1)
    reader = BacklogReader(access, "scores")
    try:
        lent = access.backlog_consumers.take()  # made by the pool, so counted
        lent.consumer.batches.append([Message(0, 10), Message(0, 11)])
        access.backlog_consumers.give(lent)
        records, _ = reader.read({0: (10, 12)}, 100, 1 << 20)
        assert [r.offset for r in records] == [10, 11]
        made = len(consumers)
        consumers_before = consumers[-1]
        reader.read({0: (3, 3)}, 100, 1 << 20)  # below offset 12, which the consumer fetched: not reused
        assert len(consumers) == made + 1
        assert consumers_before.closed
    finally:
        reader.close()
        access.close()


def consumers_make(consumers: list[FakeConsumer], batches: list[list[Message]]) -> Any:
    consumer = FakeConsumer({}, deque(batches))
    consumers.append(consumer)
    return consumer


async def test_live_fetcher_hands_records_and_partition_ends_to_the_loop(consumers: list[FakeConsumer]) -> None:
    access = KafkaAccess("k:9092", timeout=1.0, fetch_linger_seconds=0.0)
    delivered: list[list[Record | PartitionEnd]] = []
    got = threading.Event()

    def deliver(batch: list[Record | PartitionEnd]) -> None:
        delivered.append(batch)
        got.set()

    fetcher = LiveFetcher(access, "scores", {0: 4, 1: 0}, deliver)
    try:
        live = consumers[-1]
        assert live.assigned == [[(0, 4), (1, 0)]]
        live.marks = {0: (0, 6), 1: (0, 0)}
        live.batches.append(
            [
                Message(0, 4, key_=b"a"),
                Message(0, 5),
                Message(1, 0, eof=True),
                Message(0, 6, failure=KafkaError._MSG_TIMED_OUT),
            ]
        )
        fetcher.start()
        assert got.wait(5), "no batch delivered"
    finally:
        fetcher.stop()
        access.close()
    [batch] = delivered
    assert [(type(item).__name__, item.partition, item.offset) for item in batch] == [
        ("Record", 0, 4),
        ("Record", 0, 5),
        ("PartitionEnd", 1, 0),
    ]
    assert isinstance(batch[0], Record)
    assert batch[0].key == b"a"
    assert live.closed


@pytest.mark.parametrize(("records", "lingered"), [(1, False), (3, False), (4, True), (40, True)])
async def test_live_fetcher_lingers_only_when_a_fetch_brings_many(
    consumers: list[FakeConsumer], records: int, lingered: bool
) -> None:
    """A record alone goes out at once; a fetch that brought many waits for more (one write per batch)."""
    access = KafkaAccess("k:9092", timeout=1.0, fetch_linger_seconds=0.004)
    got = threading.Event()
    fetcher = LiveFetcher(access, "scores", {0: 0}, lambda batch: got.set())
    try:
        live = consumers[-1]
        live.marks = {0: (0, records)}
        live.batches.append([Message(0, n) for n in range(records)])
        fetcher.start()
        assert got.wait(5), "no batch delivered"
    finally:
        fetcher.stop()
        access.close()
    # The first consume after the poll takes only what is queued; a second one lingers.
    assert live.consume_timeouts[0] == 0
    assert (0.004 in live.consume_timeouts) is lingered


async def test_live_fetcher_does_not_linger_on_the_loaded_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """Behind the log's end on a broker that holds fetches: the loaded wait gathers, so no linger on top."""
    from streams.fanout.pacing import HOLDING_WAIT_MS, LOADED_WAIT_MS

    made: list[FakeConsumer] = []

    def make(config: dict[str, Any]) -> FakeConsumer:
        consumer = FakeConsumer(config)
        consumer.marks = {0: (0, 100)}  # the fetch is 100 records behind: the loaded wait
        if config["fetch.wait.max.ms"] == LOADED_WAIT_MS:
            consumer.batches.append([Message(0, n) for n in range(40)])
        made.append(consumer)
        return consumer

    monkeypatch.setattr(kafka, "Consumer", make)
    access = KafkaAccess("k:9092", timeout=1.0, fetch_linger_seconds=0.004)
    access.cluster_id = "tansu_cluster"
    got = threading.Event()
    fetcher = LiveFetcher(access, "scores", {0: 0}, lambda batch: got.set())
    try:
        fetcher.start()
        assert got.wait(5), "no batch delivered"
    finally:
        fetcher.stop()
        access.close()
    [short, loaded] = made
    assert short.config["fetch.wait.max.ms"] == HOLDING_WAIT_MS
    assert short.closed
    assert loaded.config["fetch.wait.max.ms"] == LOADED_WAIT_MS
    assert loaded.consume_timeouts  # it took the 40 records ...
    assert 0.004 not in loaded.consume_timeouts  # ... and did not linger for more


def test_fetch_wait_is_fitted_to_the_broker() -> None:
    from streams.fanout.pacing import ANSWERING_WAIT_MS, HOLDING_WAIT_MS, fetch_wait_ms

    assert fetch_wait_ms(None, "tansu_cluster") == HOLDING_WAIT_MS
    assert fetch_wait_ms(None, "lkc-abc123") == ANSWERING_WAIT_MS
    assert fetch_wait_ms(None, None) == ANSWERING_WAIT_MS
    assert fetch_wait_ms(7, "tansu_cluster") == 7  # told: the setting wins


def test_catch_up_reads_do_not_spin_on_a_broker_that_holds_fetches() -> None:
    from streams.fanout.pacing import HOLDING_BACKLOG_WAIT_MS, HOLDING_WAIT_MS, backlog_wait_ms

    assert HOLDING_WAIT_MS < HOLDING_BACKLOG_WAIT_MS
    assert backlog_wait_ms(HOLDING_WAIT_MS, "tansu_cluster") == HOLDING_BACKLOG_WAIT_MS
    assert backlog_wait_ms(50, "tansu_cluster") == 50  # never shorter than the live fetch's
    assert backlog_wait_ms(100, "lkc-abc123") == 100  # Kafka answers at once: the live wait


async def test_backlog_reader_uses_the_catch_up_wait(consumers: list[FakeConsumer]) -> None:
    from streams.fanout.pacing import HOLDING_BACKLOG_WAIT_MS

    access = KafkaAccess("k:9092", timeout=1.0)
    try:
        access.cluster_id = "tansu_cluster"
        consumers_made = len(consumers)
        reader = BacklogReader(access, "scores")
        assert reader.read({0: (0, 0)}, 10, 1000) == ([], {0: 0})  # an empty range: nothing to read
        assert consumers[consumers_made].config["fetch.wait.max.ms"] == HOLDING_BACKLOG_WAIT_MS
        reader.close()
    finally:
        access.close()


async def test_live_fetcher_fetch_wait_follows_the_cluster(consumers: list[FakeConsumer]) -> None:
    from streams.fanout.pacing import HOLDING_WAIT_MS

    access = KafkaAccess("k:9092", timeout=1.0)
    try:
        consumers_made = len(consumers)
        access.cluster_id = "tansu_cluster"
        LiveFetcher(access, "scores", {0: 0}, lambda batch: None)
        assert consumers[consumers_made].config["fetch.wait.max.ms"] == HOLDING_WAIT_MS
        access.cluster_id = "a-kafka-cluster"
        LiveFetcher(access, "scores", {0: 0}, lambda batch: None)
        assert consumers[consumers_made + 1].config["fetch.wait.max.ms"] == 100
    finally:
        access.close()


def test_fetch_wait_goes_long_when_quiet_and_short_with_records() -> None:
    from streams.fanout.pacing import QUIET_SECONDS, FetchWait

    wait = FetchWait(2)
    assert wait.when_records(100.0) is None  # busy already
    assert wait.when_idle(100.0 + QUIET_SECONDS / 2) is None
    assert wait.when_idle(100.0 + QUIET_SECONDS) == 100
    wait.current_ms = 100
    assert wait.when_idle(200.0) is None  # quiet already
    assert wait.when_records(201.0) == 2
    answering = FetchWait(100)  # a broker that answers early: one wait, never remade
    assert answering.when_idle(1e9) is None
    assert answering.when_records(1e9) is None


def test_quiet_topic_remakes_its_consumer_from_where_it_was(
    consumers: list[FakeConsumer], monkeypatch: pytest.MonkeyPatch
) -> None:
    from streams.fanout import pacing

    monkeypatch.setattr(pacing, "QUIET_SECONDS", 0.0)
    access = KafkaAccess("k:9092", timeout=1.0, fetch_linger_seconds=0.0)
    access.cluster_id = "tansu_cluster"
    got = threading.Event()
    fetcher = LiveFetcher(access, "scores", {0: 3}, lambda batch: got.set())
    try:
        first = consumers[-1]
        first.marks = {0: (0, 5)}
        first.batches.append([Message(0, 3), Message(0, 4)])
        fetcher.start()
        assert got.wait(5), "no batch delivered"
        deadline = time.monotonic() + 5
        while fetcher.fetch_wait_ms != 100 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        fetcher.stop()
        access.close()
    assert fetcher.fetch_wait_ms == 100
    assert first.closed
    quiet = next(c for c in consumers if c.config.get("fetch.wait.max.ms") == 100)
    assert quiet.assigned == [[(0, 5)]]  # on from the next offset, nothing read twice or skipped


def test_fetch_wait_lengthens_under_load_and_shortens_after() -> None:
    from streams.fanout.pacing import CHANGE_SECONDS, LOADED_WAIT_MS, STREAK_FETCHES, FetchWait

    wait = FetchWait(2)
    changes = [wait.when_records(float(n) / 100, 40) for n in range(STREAK_FETCHES)]
    assert changes[:-1] == [None] * (STREAK_FETCHES - 1)  # a burst alone changes nothing
    assert changes[-1] == LOADED_WAIT_MS
    assert wait.batches  # the loaded wait gathers records: no linger on top of it
    now = 0.2
    changes = [wait.when_records(now + n / 100, 1) for n in range(STREAK_FETCHES)]
    assert changes[-1] is None  # a change remakes the consumer: not twice within CHANGE_SECONDS
    assert wait.when_records(now + CHANGE_SECONDS, 1) == 2  # the load fell: the short wait, nothing held
    assert not wait.batches  # the short wait: the fetcher may linger


def test_fetch_wait_lengthens_when_the_fetch_falls_behind() -> None:
    from streams.fanout.pacing import BEHIND_RECORDS, CHANGE_SECONDS, LOADED_WAIT_MS, STREAK_FETCHES, FetchWait

    wait = FetchWait(2)
    assert wait.when_measured(0.0, BEHIND_RECORDS - 1) is None
    assert wait.when_measured(0.0, BEHIND_RECORDS) == LOADED_WAIT_MS
    now = CHANGE_SECONDS
    assert [wait.when_records(now + n, 1) for n in range(STREAK_FETCHES)] == [None] * STREAK_FETCHES  # still behind
    wait.when_measured(now + STREAK_FETCHES, 0)
    changes = [wait.when_records(now + STREAK_FETCHES + n, 1) for n in range(STREAK_FETCHES)]
    assert changes[0] == 2  # caught up, and the fetches brought few: the short wait again, as it was
    assert wait.busy_ms == 2
    assert FetchWait(100).when_measured(0.0, 10_000, 500.0) is None  # a broker that answers early keeps its wait
    assert not FetchWait(100).batches  # ... and lingers after a fetch that brought many


def test_fetch_wait_backs_off_from_a_slow_broker_and_comes_back() -> None:
    from streams.fanout.pacing import (
        ANSWERING_WAIT_MS,
        CHANGE_SECONDS,
        EASE_MEASUREMENTS,
        SLOW_ANSWER_MS,
        SLOW_FACTOR,
        FetchWait,
        slow_broker_wait_ms,
    )

    assert slow_broker_wait_ms(SLOW_ANSWER_MS) == 0  # answers in time: no floor
    assert slow_broker_wait_ms(SLOW_ANSWER_MS + 2) >= SLOW_FACTOR * (SLOW_ANSWER_MS + 2)
    assert slow_broker_wait_ms(1000.0) == ANSWERING_WAIT_MS  # never longer than the quiet wait
    wait = FetchWait(1)
    assert wait.when_records(0.0, 1) is None
    assert wait.when_measured(1.0, 0, 12.0) == 50  # 4 x 12 ms: the broker's pace, at once
    assert wait.batches
    assert wait.when_measured(2.0, 0, 0.2) is None  # one fast answer is not enough to come down
    now = 2.0 + CHANGE_SECONDS
    changes = [wait.when_measured(now + n, 0, 0.2) for n in range(EASE_MEASUREMENTS - 1)]
    assert changes[-1] == 1  # answering fast again: back to the short wait, within seconds
    wait.when_idle(1000.0)  # quiet: the long wait ...
    assert wait.when_measured(1001.0, 0, 10.0) is None  # ... whatever the broker's pace
    assert wait.when_records(1002.0, 1) == 50  # the first record: a slow broker's pace, not the short wait


def test_fetch_answer_is_the_round_trip_beyond_the_wait() -> None:
    from streams.fanout.pacing import fetch_answer_ms

    def broker(nodeid: int, p50_us: int, count: int) -> dict[str, Any]:
        return {"nodeid": nodeid, "rtt": {"p50": p50_us, "cnt": count}}

    stats = {"brokers": {"b1": broker(1, 13_000, 40), "boot": broker(-1, 90_000, 2), "b2": broker(2, 0, 0)}}
    assert fetch_answer_ms(stats, 10) == pytest.approx(3.0)  # the bootstrap entry and an idle broker do not count
    assert fetch_answer_ms(stats, 20) == 0.0  # answered before the wait ran out: no time of its own
    assert fetch_answer_ms({"brokers": {}}, 10) is None

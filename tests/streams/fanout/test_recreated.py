"""A topic deleted and created again under a hub: the fetch notices, the hub reads the new log from its start."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from streams.core.closing import CloseReason
from streams.core.filters import FilterSet, MessageFilter
from streams.core.ids import progress_decode
from streams.fanout.kafka import PartitionEnd
from streams.fanout.planning import StartPlan
from streams.fanout.restarts import RestartWatch
from streams.fanout.subscriber import Subscriber, SubscriberOptions
from tests.streams.fanout.test_hub import FakeSink, feed, make_hub, rec
from tests.streams.fanout.test_planning import marks, resume


def restarted(partition: int, offset: int = 0) -> PartitionEnd:
    return PartitionEnd(partition, offset, restarted=True)


def data_and_ids(sink: FakeSink) -> list[tuple[str, dict[int, int]]]:
    return [(e.data, progress_decode(e.id)) for e in sink.events() if e.has_data]


async def test_live_streams_get_the_new_log_with_ids_naming_its_offsets() -> None:
    hub = make_hub()
    feed(hub, *(rec(p, o, value=f"old {p}:{o}".encode()) for o in range(5) for p in (0, 1)))
    sink = FakeSink()
    hub.subscribe(Subscriber(sink), StartPlan(dict(hub.next)), 0)
    feed(hub, restarted(0), restarted(1), rec(0, 0, value=b"new 0:0"), rec(1, 0, value=b"new 1:0"))
    assert data_and_ids(sink) == [("new 0:0", {0: 1, 1: 0}), ("new 1:0", {0: 1, 1: 1})]
    assert hub.next == {0: 1, 1: 1}
    assert hub.counters.log_restarts == 2
    assert hub.state.restarts == {0: 0, 1: 0}


async def test_what_the_old_log_gave_in_the_same_batch_goes_out_first_with_its_own_ids() -> None:
    hub = make_hub(partitions=1)
    shared, keyed = FakeSink(), FakeSink()
    hub.subscribe(Subscriber(shared), StartPlan(dict(hub.next)), 0)
    only_k = SubscriberOptions(FilterSet((MessageFilter(key=b"k"),)))
    hub.subscribe(Subscriber(keyed, only_k), StartPlan(dict(hub.next)), 0)
    feed(hub, rec(0, 0, value=b"old 0"), rec(0, 1, value=b"old 1"), restarted(0), rec(0, 0, value=b"new 0"))
    expected = [("old 0", {0: 1}), ("old 1", {0: 2}), ("new 0", {0: 1})]
    assert data_and_ids(shared) == expected
    assert data_and_ids(keyed) == expected


async def test_the_cache_forgets_the_old_log() -> None:
    hub = make_hub()
    feed(hub, *(rec(0, o, value=b"x" * 10) for o in range(4)), rec(1, 0))
    before = hub.cache.records
    feed(hub, restarted(0), rec(0, 0))
    assert [r.offset for r in hub.cache[0]] == [0]
    assert hub.cache[0].start == 0
    assert hub.cache.records == before - 4 + 1
    assert hub.cache.bytes == sum(r.size for p in (0, 1) for r in hub.cache[p])


async def test_a_quiet_stream_gets_a_checkpoint_naming_the_new_start() -> None:
    hub = make_hub()
    feed(hub, *(rec(p, o) for o in range(3) for p in (0, 1)))
    sink = FakeSink()
    hub.subscribe(Subscriber(sink, SubscriberOptions(heartbeat_seconds=0)), StartPlan(dict(hub.next)), 0)
    feed(hub, restarted(0), restarted(1))
    hub.heartbeat(asyncio.get_running_loop().time() + 10**6)
    assert progress_decode(sink.events()[-1].id) == {0: 0, 1: 0}


async def test_streams_catching_up_in_the_old_log_end_to_resume() -> None:
    hub = make_hub()
    feed(hub, *(rec(0, o) for o in range(5)))
    sink = FakeSink()
    sub = Subscriber(sink)
    hub.subscribe(sub, StartPlan({0: 0, 1: 0}), 0)
    assert sub in hub.catching_up
    feed(hub, restarted(0), restarted(1))
    assert sub not in hub.catching_up
    assert sub.close_reason == CloseReason.KAFKA
    await asyncio.sleep(0)


async def test_a_resume_with_an_id_of_the_old_log_gets_the_new_log_from_its_start(
    caplog: pytest.LogCaptureFixture,
) -> None:
    hub = make_hub(partitions=2, access=marks({0: (0, 3), 1: (0, 2)}))
    feed(hub, *(rec(0, o) for o in range(20)))
    feed(hub, restarted(0), restarted(1), *(rec(0, o) for o in range(3)), *(rec(1, o) for o in range(2)))
    plan = await hub.plan(last=resume({0: 20, 1: 0}), initial="live", since_ms=None)
    assert plan.positions == {0: 0, 1: 0}
    assert hub.counters.clamped_past_end == 1
    assert "where the log began anew (the topic was recreated)" in caplog.text


async def test_without_a_restart_seen_an_id_past_the_end_still_starts_at_the_end() -> None:
    hub = make_hub(partitions=1, access=marks({0: (0, 3)}))
    feed(hub, *(rec(0, o) for o in range(3)))
    plan = await hub.plan(last=resume({0: 20}), initial="live", since_ms=None)
    assert plan.positions == {0: 3}


# -- the fetch thread's watch -----------------------------------------------------


class Ids:
    """A cluster's topic ids as the watch asks them; ``None``: the topic is missing (or no ids)."""

    def __init__(self, *answers: str | None) -> None:
        self.answers = list(answers)
        self.asked = 0

    def __call__(self, topic: str) -> str | None:
        self.asked += 1
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def watch(ids: Ids) -> RestartWatch:
    found = RestartWatch("t", ids)
    found.learn()
    return found


def test_a_watermark_gone_back_is_confirmed_by_a_new_topic_id() -> None:
    ids = Ids("old", "new")
    w = watch(ids)
    w.highs_note({0: 20, 1: 20}, {0: 20, 1: 20}, idle=False)
    assert not w.suspect
    w.highs_note({0: 0, 1: 20}, {0: 20, 1: 20}, idle=False)
    assert w.suspect
    assert w.recreated() == ("old", "new")
    assert not w.suspect
    assert w.topic_id == "new"


def test_a_watermark_gone_back_counts_even_where_the_fetch_already_moved_back() -> None:
    # Kafka answers out of range, and librdkafka's auto.offset.reset moves the fetch to 0 itself.
    w = watch(Ids("old", "new"))
    w.highs_note({0: 20}, {0: 20}, idle=False)
    w.highs_note({0: 3}, {0: 3}, idle=False)
    assert w.suspect
    assert w.recreated() == ("old", "new")


def test_a_watermark_gone_back_under_the_same_id_is_not_a_recreation() -> None:
    w = watch(Ids("same"))
    w.highs_note({0: 20}, {0: 20}, idle=False)
    w.highs_note({0: 19}, {0: 20}, idle=False)  # a leader change, for a moment
    assert w.suspect
    assert w.recreated() is None
    assert not w.suspect


def test_while_the_topic_is_missing_the_suspicion_stays() -> None:
    ids = Ids("old", None, None, "new")
    w = watch(ids)
    w.error_note(0)  # the fetch said out of range
    assert w.recreated() is None
    assert w.suspect
    assert w.recreated() is None
    assert w.suspect
    assert w.recreated() == ("old", "new")


def test_waiting_past_the_watermark_while_idle_is_asked_once_per_watermark_and_position() -> None:
    # Some brokers report the last batch's base + 1: a quiet topic may show it for good.
    ids = Ids("same")
    w = watch(ids)
    w.highs_note({0: 8}, {0: 10}, idle=False)
    assert not w.suspect  # records flow: not a wait
    for _ in range(3):
        w.highs_note({0: 8}, {0: 10}, idle=True)
        if w.suspect:
            assert w.recreated() is None
    assert ids.asked == 2  # learn, then one question
    w.highs_note({0: 9}, {0: 12}, idle=True)
    assert w.suspect


def test_without_topic_ids_only_a_watermark_gone_back_below_the_position_counts() -> None:
    w = watch(Ids(None))
    w.highs_note({0: 20}, {0: 20}, idle=True)
    w.highs_note({0: 8}, {0: 5}, idle=True)  # went back, but not below where the fetch is
    assert not w.suspect
    w.highs_note({0: 3}, {0: 5}, idle=True)
    assert w.suspect
    assert w.recreated() == (None, None)


class FakeConsumer:
    """The consumer calls a restart makes."""

    def __init__(self, lows: dict[int, int]) -> None:
        self.lows = lows
        self.seeks: list[tuple[int, int]] = []

    def get_watermark_offsets(self, tp: Any, timeout: float, cached: bool) -> tuple[int, int]:
        assert not cached
        return self.lows[tp.partition], self.lows[tp.partition]

    def seek(self, tp: Any) -> None:
        self.seeks.append((tp.partition, tp.offset))


def test_a_recreation_seeks_every_partition_to_its_new_start_and_logs_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    w = watch(Ids("old", "new"))
    w.error_note(1)
    consumer = FakeConsumer({0: 0, 1: 0})
    starts = w.check(consumer, [0, 1], timeout=1.0)  # type: ignore[arg-type]
    assert starts == {0: 0, 1: 0}
    assert consumer.seeks == [(0, 0), (1, 0)]
    lines = [r for r in caplog.records if "was deleted and created again" in r.getMessage()]
    assert len(lines) == 1
    assert "id old -> new" in lines[0].getMessage()

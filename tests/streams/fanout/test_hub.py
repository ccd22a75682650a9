"""The hub's fan-out and cache logic, driven directly (Kafka faked: records are handed in)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from streams.core.filters import FilterSet, MessageFilter
from streams.core.ids import progress_decode
from streams.core.records import Record
from streams.fanout.cache import CacheLimits
from streams.fanout.hub import TopicHub
from streams.fanout.hubs import Hubs
from streams.fanout.kafka import KafkaAccess, PartitionEnd
from streams.fanout.planning import StartPlan
from streams.fanout.sinks import FlowSink
from streams.fanout.subscriber import Subscriber, SubscriberOptions
from tests.streams.fanout.fakes import FakeAccess
from tests.streams.fanout.test_sinks import FakeFlow
from tests.support.garbage import cyclic_garbage, of_types
from tests.support.sse_client import EventParser


class FakeSink:
    """Collects writes; can refuse like a client past its pending-bytes bound."""

    def __init__(self, limit: int = 1 << 20) -> None:
        self.limit = limit
        self.last_write = time.monotonic()
        self.writes: list[bytes] = []
        self.full = False
        self.busy = False
        self.aborted = False

    def write(self, data: bytes) -> bool:
        self.writes.append(data)
        self.last_write = time.monotonic()
        return not self.full

    async def writable(self) -> None:
        await asyncio.sleep(0)

    def pending(self) -> int:
        return 0

    def congested(self) -> bool:
        return self.busy

    def abort(self) -> None:
        self.aborted = True

    def events(self) -> list:
        return EventParser().feed(b"".join(self.writes))


def make_hub(
    partitions: int = 2, limits: CacheLimits | None = None, access: FakeAccess | None = None, topic: str = "topic"
) -> TopicHub:
    """A hub level at offset 0 of every partition, on a fake cluster (``access``), never started."""
    access = access or FakeAccess(range(partitions))
    hub = TopicHub(topic, access, limits or CacheLimits(), readers=access)
    hub.partitions = list(range(partitions))
    hub.next = dict.fromkeys(hub.partitions, 0)
    hub.cache.reset(dict.fromkeys(hub.partitions, 0))
    return hub


def feed(hub: TopicHub, *records: Record | PartitionEnd) -> None:
    hub.ingest(list(records))


def rec(
    partition: int, offset: int, value: bytes | None = b"v", key: bytes | None = b"k", ts: int | None = None
) -> Record:
    return Record(partition, offset, ts if ts is not None else int(time.time() * 1000), key, value)


async def test_live_frame_is_encoded_once_and_shared() -> None:
    hub = make_hub()
    sinks = [FakeSink() for _ in range(3)]
    for sink in sinks:
        hub.subscribe(Subscriber(sink), StartPlan(dict(hub.next)), retry_ms=2000)
    feed(hub, rec(0, 0, b"hello"))
    frames = [sink.writes[-1] for sink in sinks]
    assert frames[0] == b"id: AQQAAgIA\ndata: hello\n\n"
    assert all(frame is frames[0] for frame in frames)  # the same bytes object, not copies


async def test_filters_progress_and_checkpoint_on_heartbeat() -> None:
    hub = make_hub()
    mine = FakeSink()
    hub.subscribe(
        Subscriber(mine, SubscriberOptions(FilterSet((MessageFilter(key=b"me"),)), heartbeat_seconds=0)),
        StartPlan(dict(hub.next)),
        0,
    )
    feed(hub, rec(1, 0, key=b"other"), rec(0, 0, key=b"me", value=b"x"), rec(1, 1, key=b"other"))
    events = [e for e in mine.events() if e.has_data]
    assert [e.data for e in events] == ["x"]
    assert progress_decode(events[0].id) == {0: 1, 1: 1}
    hub.heartbeat(time.monotonic() + 1)
    assert progress_decode(mine.events()[-1].id) == {0: 1, 1: 2}


async def test_partition_end_moves_progress_past_gaps() -> None:
    hub = make_hub()
    feed(hub, rec(0, 0), PartitionEnd(0, 5))
    assert hub.next == {0: 5, 1: 0}


async def test_catch_up_from_cache_then_live_without_gap_or_duplicate() -> None:
    hub = make_hub()
    feed(hub, *(rec(p, o, value=f"{p}:{o}".encode()) for o in range(5) for p in (0, 1)))
    sink = FakeSink()
    sub = Subscriber(sink)
    hub.subscribe(sub, StartPlan({0: 2, 1: 3}), 0)
    assert not sub.is_live
    feed(hub, rec(0, 5, value=b"0:5"))  # arrives while the subscriber is still behind
    await asyncio.wait_for(sub.task, timeout=5)  # type: ignore[arg-type]
    assert sub.is_live
    feed(hub, rec(1, 5, value=b"1:5"))
    got = [e.data for e in sink.events() if e.has_data]
    assert sorted(got) == sorted(["0:2", "0:3", "0:4", "0:5", "1:3", "1:4", "1:5"])
    assert [d for d in got if d.startswith("0:")] == ["0:2", "0:3", "0:4", "0:5"]
    last = [e for e in sink.events() if e.has_data][-1]
    assert progress_decode(last.id) == {0: 6, 1: 6}


async def test_slow_subscriber_is_cut_and_others_continue() -> None:
    hub = make_hub()
    slow, fast = FakeSink(), FakeSink()
    slow_sub = Subscriber(slow)
    hub.subscribe(slow_sub, StartPlan(dict(hub.next)), 0)
    hub.subscribe(Subscriber(fast), StartPlan(dict(hub.next)), 0)
    slow.full = True
    feed(hub, rec(0, 0))
    assert slow.aborted
    assert slow_sub.closed.result() == "slow"
    assert slow_sub not in hub.live
    feed(hub, rec(0, 1))
    assert len([e for e in fast.events() if e.has_data]) == 2
    assert hub.counters.cut_slow == 1


@pytest.mark.parametrize(
    ("limits", "expected_start"),
    [
        (CacheLimits(max_messages=3), {0: 1, 1: 1}),
        (CacheLimits(max_bytes=4 * (200 + 1 + 3)), {0: 1, 1: 0}),
    ],
)
async def test_cache_bounds_evict_oldest_first(limits: CacheLimits, expected_start: dict[int, int]) -> None:
    hub = make_hub(limits=limits)
    base = 1_000_000
    feed(
        hub,
        rec(0, 0, ts=base),
        rec(1, 0, ts=base + 1),
        rec(0, 1, ts=base + 2),
        rec(1, 1, ts=base + 3),
        rec(0, 2, ts=base + 4),
    )
    assert {p: c.start for p, c in hub.cache.partitions.items()} == expected_start
    assert hub.cache.records == sum(len(c) for c in hub.cache.partitions.values())


async def test_cache_age_bound() -> None:
    hub = make_hub(limits=CacheLimits(max_age_seconds=10))
    now = int(time.time() * 1000)
    feed(hub, rec(0, 0, ts=now - 20_000), rec(0, 1, ts=now))
    hub.cache.evict_expired(now)
    assert hub.cache[0].start == 1
    assert hub.cache.records == 1


async def test_the_servers_flows_get_a_batch_framed_once_and_paused_ones_are_demoted() -> None:
    hub = make_hub()
    flows = [FakeFlow() for _ in range(3)]
    subs = [Subscriber(FlowSink(flow, limit=1 << 20)) for flow in flows]
    for sub in subs:
        hub.subscribe(sub, StartPlan(dict(hub.next)), 0)
    flows[2].pause()
    feed(hub, rec(0, 0, value=b"x"), rec(1, 0, value=b"y"))
    assert [flow.shared for flow in flows] == [1, 1, 0]
    assert flows[0].sent[-1] is flows[1].sent[-1]
    assert [e.data for e in EventParser().feed(flows[0].sent[-1])] == ["x", "y"]
    assert subs[0].events == 2
    assert subs[0].bytes == len(flows[0].sent[-1])
    assert subs[2].demoted  # its client has not taken its bytes: it catches up from the cache
    assert hub.counters.deliveries == 4


async def test_congested_subscriber_is_demoted_then_catches_up_without_loss() -> None:
    hub = make_hub()
    sink = FakeSink()
    sub = Subscriber(sink)
    hub.subscribe(sub, StartPlan(dict(hub.next)), 0)
    feed(hub, rec(0, 0, value=b"a"))
    sink.busy = True  # the client has not read the last write yet
    feed(hub, rec(0, 1, value=b"b"), rec(1, 0, value=b"c"))
    assert sub not in hub.live
    assert sub.demoted
    assert hub.counters.demotions == 1
    sink.busy = False
    await asyncio.wait_for(sub.task, timeout=5)  # type: ignore[arg-type]
    assert sub.is_live
    assert not sub.demoted
    feed(hub, rec(1, 1, value=b"d"))
    events = [e for e in sink.events() if e.has_data]
    assert [e.data for e in events] == ["a", "b", "c", "d"]
    assert progress_decode(events[-1].id) == {0: 2, 1: 2}
    assert not sink.aborted


async def test_demoted_subscriber_that_leaves_the_cache_is_cut() -> None:
    hub = make_hub(limits=CacheLimits(max_messages=2))
    sink = FakeSink()
    sub = Subscriber(sink)
    hub.subscribe(sub, StartPlan(dict(hub.next)), 0)
    sink.busy = True
    feed(hub, rec(0, 0))
    assert sub.demoted
    feed(hub, rec(0, 1), rec(0, 2), rec(0, 3))  # its position (offset 0) is evicted
    hub.heartbeat(time.monotonic())
    assert sink.aborted
    assert sub.closed.result() == "slow"


async def test_unfiltered_subscribers_share_one_batch_buffer() -> None:
    hub = make_hub()
    sinks = [FakeSink() for _ in range(3)]
    for sink in sinks:
        hub.subscribe(Subscriber(sink), StartPlan(dict(hub.next)), 0)
    feed(hub, rec(0, 0, value=b"x"), rec(1, 0, value=b"y"))
    batches = [sink.writes[-1] for sink in sinks]
    assert all(batch is batches[0] for batch in batches)
    assert [e.data for e in EventParser().feed(batches[0])] == ["x", "y"]
    assert hub.counters.deliveries == 6


async def test_batches_that_come_while_one_waits_for_the_loop_go_out_with_it() -> None:
    hub = make_hub()
    sink = FakeSink()
    hub.subscribe(Subscriber(sink), StartPlan(dict(hub.next)), 0)
    written = len(sink.writes)

    def fetch_thread(offsets: range) -> None:
        for offset in offsets:
            hub.handoff.put([rec(0, offset, value=f"r{offset}".encode())])

    # The loop is busy (this test holds it) while the fetch thread hands over three batches.
    thread = threading.Thread(target=fetch_thread, args=(range(3),))
    thread.start()
    thread.join()
    await asyncio.sleep(0)
    assert len(sink.writes) == written + 1  # one fan-out, one write for the three records
    assert [e.data for e in EventParser().feed(sink.writes[-1])] == ["r0", "r1", "r2"]
    # Once the loop took it, a new batch starts: later records go out after, in order.
    thread = threading.Thread(target=fetch_thread, args=(range(3, 5),))
    thread.start()
    thread.join()
    await asyncio.sleep(0)
    assert [e.data for e in sink.events() if e.data] == ["r0", "r1", "r2", "r3", "r4"]
    assert hub.next[0] == 5


async def test_idle_hubs_are_stopped_and_busy_ones_kept() -> None:
    registry = Hubs(access=KafkaAccess("localhost:9", timeout=1.0), idle_seconds=10)  # never asked
    idle, busy = make_hub(topic="idle"), make_hub(topic="busy")
    registry.hubs.update({"idle": idle, "busy": busy})
    hold = Subscriber(FakeSink())
    busy.subscribe(hold, StartPlan(dict(busy.next)), 0)
    assert registry.sweep_idle(100.0) == []  # idle clock starts
    assert registry.sweep_idle(105.0) == []
    assert registry.sweep_idle(110.0) == ["idle"]
    assert set(registry.hubs) == {"busy"}
    busy.unsubscribe(hold)
    assert registry.sweep_idle(111.0) == []
    assert registry.sweep_idle(121.0) == ["busy"]


async def test_key_filters_are_indexed_and_match_like_any_other_filter() -> None:
    hub = make_hub()
    by_key = FakeSink()  # one of two keys, with a header condition on one of them
    by_header = FakeSink()  # no key: matched against every record
    hub.subscribe(
        Subscriber(
            by_key,
            SubscriberOptions(
                filters=FilterSet((MessageFilter(key=b"a"), MessageFilter(key=b"b", headers=(("h", b"1"),))))
            ),
        ),
        StartPlan(dict(hub.next)),
        0,
    )
    header_only = Subscriber(by_header, SubscriberOptions(filters=FilterSet((MessageFilter(headers=(("h", b"1"),)),))))
    hub.subscribe(header_only, StartPlan(dict(hub.next)), 0)
    feed(
        hub,
        rec(0, 0, key=b"a", value=b"1"),
        rec(0, 1, key=b"b", value=b"2"),
        Record(1, 0, 0, b"b", b"3", [("h", b"1")]),
        Record(1, 1, 0, b"c", b"4", [("h", b"1")]),
        rec(1, 2, key=None, value=b"5"),
    )
    assert [e.data for e in by_key.events() if e.data] == ["1", "3"]
    assert [e.data for e in by_header.events() if e.data] == ["3", "4"]
    hub.unsubscribe(header_only)
    assert set(hub.live.by_key) == {b"a", b"b"}
    for sub in list(hub.live):
        hub.unsubscribe(sub)
    assert hub.live.by_key == {}
    assert hub.live.any_key == {}


def test_filter_set_keys() -> None:
    assert FilterSet().keys is None
    assert FilterSet((MessageFilter(key=b"a"), MessageFilter(headers=(("h", b"1"),)))).keys is None
    assert FilterSet((MessageFilter(key=b"a"), MessageFilter(key=b"b"))).keys == frozenset({b"a", b"b"})


async def test_partitions_added_to_a_topic_are_read_and_carried_in_ids() -> None:
    # A cluster whose topic gains two partitions (the embedded broker cannot add partitions).
    hub = make_hub(partitions=1, access=FakeAccess(partitions=[0, 1, 2]))
    sink = FakeSink()
    hub.subscribe(Subscriber(sink), StartPlan(dict(hub.next)), 0)
    hubs = Hubs(access=KafkaAccess("localhost:9", timeout=1.0), idle_seconds=10)  # asks the hub's access
    hubs.hubs["topic"] = hub
    await hubs.partitions_check()
    assert hub.partitions == [0, 1, 2]
    assert hub.next == {0: 0, 1: 0, 2: 0}
    feed(hub, rec(2, 0, value=b"on the new partition"))
    [event] = [e for e in sink.events() if e.has_data]
    assert event.data == "on the new partition"
    assert progress_decode(event.id) == {0: 0, 1: 0, 2: 1}


async def test_undecodable_records_are_skipped_counted_and_moved_past() -> None:
    hub = make_hub(1)
    sink = FakeSink()
    hub.subscribe(Subscriber(sink, SubscriberOptions(route="/r")), StartPlan(dict(hub.next)), 0)
    bad = Record(0, 1, 0, b"k", b"\x00\x00\x00\x00\x09garbage", problem="unknown schema id 9")
    feed(hub, rec(0, 0, value=b'{"n":0}'), bad, rec(0, 2, value=b'{"n":2}'))
    assert [e.data for e in sink.events() if e.has_data] == ['{"n":0}', '{"n":2}']
    assert hub.counters.undecodable == 1
    assert hub.tally("/r").undecodable == 1
    assert hub.next == {0: 3}
    # A catch-up from the cache skips it too, and counts it for the stream's route.
    late = FakeSink()
    sub = Subscriber(late, SubscriberOptions(route="/late"))
    hub.subscribe(sub, StartPlan({0: 0}), 0)
    await asyncio.sleep(0.05)
    assert [e.data for e in late.events() if e.has_data] == ['{"n":0}', '{"n":2}']
    assert hub.tally("/late").undecodable == 1


async def test_key_filters_compare_the_decoded_key() -> None:
    hub = make_hub(1)
    sink = FakeSink()
    options = SubscriberOptions(filters=FilterSet((MessageFilter(key=b"m1"),)), route="/k")
    hub.subscribe(Subscriber(sink, options), StartPlan(dict(hub.next)), 0)
    raw_m1, raw_m2 = b"\x00\x00\x00\x03\xe9\x04m1", b"\x00\x00\x00\x03\xe9\x04m2"
    feed(
        hub,
        Record(0, 0, 0, raw_m1, b'"a"', match_key=b"m1"),
        Record(0, 1, 0, raw_m2, b'"b"', match_key=b"m2"),
    )
    [event] = [e for e in sink.events() if e.has_data]
    assert event.data == '"a"'


def keyed_sub(hub: TopicHub, key: bytes) -> tuple[Subscriber, FakeSink]:
    sink = FakeSink()
    sub = Subscriber(sink, SubscriberOptions(FilterSet((MessageFilter(key=key),))))
    hub.subscribe(sub, StartPlan(dict(hub.next)), 0)
    return sub, sink


async def test_per_user_streams_are_written_before_a_large_batch_ends() -> None:
    from streams.fanout.ingest import FLUSH_STREAMS

    hub = make_hub(partitions=1)
    users = [keyed_sub(hub, b"u%d" % n) for n in range(FLUSH_STREAMS * 2)]
    written_when_matched: list[int] = []

    class Noting(FilterSet):
        """A key filter that notes, when the hub matches a record to it, how many users have been written."""

        def matches(self, key: bytes | None, headers: object) -> bool:
            written_when_matched.append(sum(len(sink.writes) > 1 for _, sink in users))
            return FilterSet.matches(self, key, headers)  # type: ignore[arg-type]

    late = FakeSink()
    hub.subscribe(Subscriber(late, SubscriberOptions(Noting((MessageFilter(key=b"late"),)))), StartPlan({0: 0}), 0)
    records = [rec(0, n, key=b"u%d" % n, value=b"to u%d" % n) for n in range(FLUSH_STREAMS * 2)]
    records.append(rec(0, len(records), key=b"late", value=b"late"))
    # A later record of the first user, after the first flush: one more write, in order.
    records.append(rec(0, len(records), key=b"u0", value=b"to u0 again"))
    feed(hub, *records)
    # By the time the batch's late record was read, every user before it had been written.
    assert written_when_matched == [FLUSH_STREAMS * 2]
    assert [e.data for e in late.events() if e.has_data] == ["late"]
    for n, (_, sink) in enumerate(users):
        got = [e.data for e in sink.events() if e.has_data]
        assert got == ([f"to u{n}", "to u0 again"] if n == 0 else [f"to u{n}"])
    ids = [e.id for e in users[0][1].events() if e.has_data]
    assert [progress_decode(i) for i in ids] == [{0: 1}, {0: len(records)}]
    assert hub.counters.deliveries == len(records)


async def test_a_stream_congested_after_a_flush_catches_up_from_there_without_duplicates() -> None:
    from streams.fanout.ingest import FLUSH_STREAMS

    hub = make_hub(partitions=1)
    others = [keyed_sub(hub, b"o%d" % n) for n in range(FLUSH_STREAMS - 1)]
    me, mine = keyed_sub(hub, b"me")
    records = [rec(0, 0, key=b"me", value=b"first")]
    records += [rec(0, n + 1, key=b"o%d" % n) for n in range(FLUSH_STREAMS - 1)]  # the flush comes here
    records.append(rec(0, len(records), key=b"me", value=b"second"))
    original = mine.write

    def write_then_busy(data: bytes) -> bool:
        mine.busy = b"first" in data  # the client has not read the first record when the second comes
        return original(data)

    mine.write = write_then_busy  # type: ignore[method-assign]
    feed(hub, *records)
    assert me.demoted
    mine.busy = False
    await asyncio.wait_for(me.task, timeout=5)  # type: ignore[arg-type]
    assert [e.data for e in mine.events() if e.has_data] == ["first", "second"]
    assert all(len([e for e in sink.events() if e.has_data]) == 1 for _, sink in others)


async def test_a_catch_up_cancelled_by_its_stream_leaving_leaves_no_cycle() -> None:
    """A task cancelled and never awaited keeps its CancelledError, whose frames hold the catch-up and
    its subscriber: the subscriber must not keep the task (docs/reliability.md, "What is left")."""

    async def left_while_catching_up() -> None:
        hub = make_hub()
        sink = FakeSink()
        sub = Subscriber(sink)
        hub.subscribe(sub, StartPlan(dict(hub.next)), 0)
        sink.busy = True
        feed(hub, rec(0, 0), rec(0, 1))
        task = sub.task
        assert task is not None
        await asyncio.sleep(0)  # the catch-up runs, waiting for the client
        hub.unsubscribe(sub)
        for _ in range(100):  # as the hub does, never awaited
            if task.done():
                break
            await asyncio.sleep(0)
        assert task.cancelled()

    with cyclic_garbage() as garbage:
        await left_while_catching_up()
    assert of_types(garbage, Subscriber) == []

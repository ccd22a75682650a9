"""A stream's catch-up, driven directly: from a fake cluster's log, from the cache, and as a snapshot."""

from __future__ import annotations

import asyncio
from unittest.mock import patch

from streams.core.filters import FilterSet, MessageFilter
from streams.core.ids import progress_decode
from streams.core.records import Record
from streams.fanout.cache import CacheLimits, PartitionCache, TopicCache
from streams.fanout.catchup import CatchUp
from streams.fanout.catchup_reads import BacklogSession
from streams.fanout.cutoffs import loop_cutoffs
from streams.fanout.state import HubState
from streams.fanout.subscriber import Subscriber, SubscriberOptions
from tests.streams.fanout.fakes import FakeAccess
from tests.streams.fanout.test_hub import FakeSink


class Control:
    """The hub as a catch-up sees it, noting what the catch-up asked."""

    def __init__(self) -> None:
        self.live: list[Subscriber] = []
        self.cut_streams: list[Subscriber] = []
        self.left: list[Subscriber] = []

    def go_live(self, sub: Subscriber) -> None:
        sub.positions = None
        self.live.append(sub)

    def demote(self, sub: Subscriber, positions: dict[int, int]) -> None:
        raise AssertionError("a catch-up never demotes")

    def cut(self, sub: Subscriber) -> None:
        self.cut_streams.append(sub)
        sub.end("slow")

    def unsubscribe(self, sub: Subscriber) -> None:
        self.left.append(sub)


def rec(partition: int, offset: int, key: bytes | None = None, value: bytes | None = None) -> Record:
    value = value if value is not None else f"{partition}:{offset}".encode()
    return Record(partition, offset, 1000 + offset, key, value)


def state_at(
    positions: dict[int, int], cached: tuple[Record, ...] = (), cache_start: dict[int, int] | None = None
) -> HubState:
    """A hub's state at ``positions``, its cache holding ``cached`` from ``cache_start`` (else from ``positions``)."""
    state = HubState("topic", TopicCache(CacheLimits()), loop_cutoffs(), partitions=sorted(positions))
    state.cache.reset(cache_start or positions)
    for record in cached:
        state.cache.append(record)
    state.positions_reset(dict(positions))
    return state


async def catch_up(
    state: HubState, access: FakeAccess, start: dict[int, int], snapshot: bool = False
) -> tuple[Subscriber, FakeSink, Control]:
    sink, control = FakeSink(), Control()
    sub = Subscriber(sink)
    sub.positions = dict(start)
    reads = BacklogSession(state.topic, access, access, Record.from_kafka)
    await asyncio.wait_for(CatchUp(state, control, sub, reads).run(snapshot), timeout=5)
    return sub, sink, control


async def test_a_catch_up_from_kafka_reaches_live() -> None:
    log = {0: [rec(0, o) for o in range(5)], 1: [rec(1, o) for o in range(3)]}
    access = FakeAccess(log=log)
    state = state_at({0: 5, 1: 3})  # the cache starts at the hub's position: everything is older
    sub, sink, control = await catch_up(state, access, {0: 0, 1: 0})
    assert control.live == [sub]
    expected = [f"{r.partition}:{r.offset}" for p in log for r in log[p]]
    assert sorted(e.data for e in sink.events() if e.has_data) == sorted(expected)
    assert state.counters.catch_ups_kafka == 1
    assert state.counters.catch_ups_cache == 0
    assert state.tally("").delivered == 8
    assert access.reads == [{0: (0, 5), 1: (0, 3)}]
    assert [reader.closed for reader in access.backlogs] == [True]


async def test_a_catch_up_reads_kafka_up_to_the_cache_then_the_cache() -> None:
    log = {0: [rec(0, o) for o in range(10)]}
    access = FakeAccess(partitions=[0], log=log)
    state = state_at({0: 10}, cached=tuple(log[0][6:]), cache_start={0: 6})
    sub, sink, control = await catch_up(state, access, {0: 2})
    assert control.live == [sub]
    assert [e.data for e in sink.events() if e.has_data] == [f"0:{o}" for o in range(2, 10)]
    assert access.reads == [{0: (2, 6)}]
    assert (state.counters.catch_ups_kafka, state.counters.catch_ups_cache) == (1, 1)


async def test_a_snapshot_sends_the_latest_value_per_key_then_goes_live() -> None:
    log = {
        0: [
            rec(0, 0, b"a", b"a1"),
            rec(0, 1, b"b", b"b1"),
            rec(0, 2, b"a", b"a2"),
            Record(0, 3, 1003, b"b", None),  # b's tombstone
            rec(0, 4, None, b"keyless"),
        ]
    }
    access = FakeAccess(partitions=[0], log=log)
    state = state_at({0: 5})
    sub, sink, control = await catch_up(state, access, {0: 0}, snapshot=True)
    assert control.live == [sub]
    assert [e.data for e in sink.events() if e.has_data] == ["a2", "keyless"]


async def test_a_catch_up_waits_while_kafka_is_down_and_ends_with_the_stream() -> None:
    access = FakeAccess(partitions=[0], log={0: [rec(0, 0)]})
    access.down = True
    state = state_at({0: 1})
    sink, control = FakeSink(), Control()
    sub = Subscriber(sink)
    sub.positions = {0: 0}
    reads = BacklogSession("topic", access, access, Record.from_kafka)
    task = asyncio.ensure_future(CatchUp(state, control, sub, reads).run(False))
    await asyncio.sleep(0.05)
    assert not task.done()  # retried, stream open
    sub.end("gone")
    await asyncio.wait_for(task, timeout=5)
    assert control.live == []
    assert [reader.closed for reader in access.backlogs] == [True]


def keyed_log(count: int) -> list[Record]:
    """Record n on partition n % 3 at time 1000 + n, with key ``k<n % 7>``; record 10 does not decode."""
    return [
        Record(n % 3, n // 3, 1000 + n, b"k%d" % (n % 7), b"%d" % n, problem="bad bytes" if n == 10 else None)
        for n in range(count)
    ]


def keyed_state(records: list[Record]) -> HubState:
    ends = {p: 1 + max(r.offset for r in records if r.partition == p) for p in range(3)}
    return state_at(ends, cached=tuple(records), cache_start={p: 0 for p in range(3)})


async def keyed_catch_up(state: HubState, start: dict[int, int]) -> tuple[Subscriber, FakeSink, Control]:
    sink, control = FakeSink(), Control()
    sub = Subscriber(sink, SubscriberOptions(filters=FilterSet((MessageFilter(key=b"k3"),))))
    sub.positions = dict(start)
    access = FakeAccess(partitions=[0, 1, 2])
    reads = BacklogSession(state.topic, access, access, Record.from_kafka)
    await asyncio.wait_for(CatchUp(state, control, sub, reads).run(False), timeout=30)
    return sub, sink, control


async def test_a_catch_up_on_a_key_asks_its_filters_only_about_that_keys_records() -> None:
    records = keyed_log(4500)  # more than one chunk per partition
    state = keyed_state(records)
    asked = []

    def admits(filters: FilterSet, record: Record) -> bool:
        asked.append(record)
        return filters.matches(record.match_key, record.headers) and filters.where is None

    with patch.object(FilterSet, "admits", admits):
        sub, sink, control = await keyed_catch_up(state, {0: 0, 1: 0, 2: 0})
    wanted = [r for r in records if r.match_key == b"k3" and r.problem is None]
    assert control.live == [sub]
    assert [e.data for e in sink.events() if e.has_data] == [r.value.decode() for r in wanted if r.value]
    assert asked == wanted
    tally = state.tally("")
    assert (tally.delivered, tally.undecodable, tally.filtered) == (len(wanted), 1, len(records) - len(wanted) - 1)


async def test_every_id_of_a_catch_up_on_a_key_resumes_with_nothing_lost_or_repeated() -> None:
    records = keyed_log(600)
    state = keyed_state(records)
    _, sink, _ = await keyed_catch_up(state, {0: 0, 1: 0, 2: 0})
    events = [e for e in sink.events() if e.has_data]
    wanted = [r.value.decode() for r in records if r.match_key == b"k3" and r.value and r.problem is None]
    assert [e.data for e in events] == wanted
    for n, event in enumerate(events):
        _, again, control = await keyed_catch_up(state, progress_decode(event.id))
        assert [e.data for e in again.events() if e.has_data] == wanted[n + 1 :]
        assert len(control.live) == 1


def wrapped_keyed_state(count: int, kept: int) -> tuple[HubState, list[Record]]:
    """``keyed_log(count)`` through a cache of ``kept`` records, which evicted the rest (every partition's start
    moved), and the cached records by time."""
    records = keyed_log(count)
    ends = {p: 1 + max(r.offset for r in records if r.partition == p) for p in range(3)}
    state = HubState("topic", TopicCache(CacheLimits(max_messages=kept)), loop_cutoffs(), partitions=[0, 1, 2])
    state.cache.reset({p: 0 for p in range(3)})
    for record in records:
        state.cache.append(record)
        state.cache.evict()
    state.positions_reset(ends)
    cached = [r for p in range(3) for r in state.cache[p]]
    return state, sorted(cached, key=lambda r: r.timestamp)


async def test_a_keyed_catch_up_reads_the_cache_by_its_index_only() -> None:
    state = keyed_state(keyed_log(900))
    with patch.object(PartitionCache, "records_from", side_effect=AssertionError("a linear read")):
        sub, sink, control = await keyed_catch_up(state, {0: 0, 1: 0, 2: 0})
    assert control.live == [sub]
    wanted = [r for r in keyed_log(900) if r.match_key == b"k3" and r.problem is None]
    assert len([e for e in sink.events() if e.has_data]) == len(wanted)


async def test_every_id_of_a_chunked_keyed_catch_up_from_a_wrapped_cache_resumes_exactly() -> None:
    # Chunks of 4 records: most end on a picked record, the position passing the other keys' records before it.
    state, cached = wrapped_keyed_state(3000, kept=700)
    assert all(state.cache[p].start > 0 for p in range(3))
    start = {p: state.cache[p].start for p in range(3)}
    wanted = [r.value.decode() for r in cached if r.match_key == b"k3" and r.value and r.problem is None]
    with patch("streams.fanout.catchup.CHUNK_RECORDS", 4):
        sub, sink, control = await keyed_catch_up(state, start)
        events = [e for e in sink.events() if e.has_data]
        assert [e.data for e in events] == wanted
        assert control.live == [sub]
        tally = state.tally("")
        assert (tally.delivered, tally.filtered) == (len(wanted), len(cached) - len(wanted))
        for n, event in enumerate(events):
            _, again, control = await keyed_catch_up(state, progress_decode(event.id))
            assert [e.data for e in again.events() if e.has_data] == wanted[n + 1 :]
            assert len(control.live) == 1


async def test_a_keyed_catch_up_counts_the_undecodable_records_it_passes() -> None:
    state, cached = wrapped_keyed_state(3000, kept=2995)
    assert [r.value for r in cached if r.problem is not None] == [b"10"]  # still cached
    with patch("streams.fanout.catchup.CHUNK_RECORDS", 4):
        await keyed_catch_up(state, {p: state.cache[p].start for p in range(3)})
    wanted = [r for r in cached if r.match_key == b"k3" and r.problem is None]
    tally = state.tally("")
    assert (tally.delivered, tally.undecodable, tally.filtered) == (len(wanted), 1, len(cached) - len(wanted) - 1)

"""Conflated live streams in the hub: the rate, slow clients never cut, tombstones, ids, counts and the bound."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable

from streams.core.ids import progress_decode
from streams.core.records import Record
from streams.fanout.hub import TopicHub
from streams.fanout.planning import StartPlan
from streams.fanout.subscriber import Subscriber, SubscriberOptions
from tests.streams.fanout.test_hub import FakeSink, feed, make_hub, rec
from tests.support.polling import condition_wait_async

ROUTE = "/ticker"


def conflated(hub: TopicHub, max_rate: int = 0, sink: FakeSink | None = None) -> tuple[Subscriber, FakeSink]:
    sink = sink or FakeSink()
    sub = Subscriber(sink, SubscriberOptions(route=ROUTE, conflate=max_rate, heartbeat_seconds=1))
    hub.subscribe(sub, StartPlan(dict(hub.next)), 0)
    return sub, sink


def values(sink: FakeSink) -> list[str]:
    return [e.data for e in sink.events() if e.has_data]


async def until(condition: Callable[[], object], within: float = 2.0) -> None:
    await condition_wait_async(condition, within=within, what="the writes", interval=0.005)


async def test_a_batch_is_written_once_with_the_latest_record_of_each_key() -> None:
    hub = make_hub(partitions=1)
    _, sink = conflated(hub)
    lossless = FakeSink()
    hub.subscribe(Subscriber(lossless), StartPlan(dict(hub.next)), 0)
    feed(hub, rec(0, 0, b"a1", b"a"), rec(0, 1, b"b1", b"b"), rec(0, 2, b"a2", b"a"))
    writes = len(sink.writes)  # the preamble
    await until(lambda: len(sink.writes) > writes)
    assert values(sink) == ["b1", "a2"]
    assert values(lossless) == ["a1", "b1", "a2"]
    assert hub.tally(ROUTE).conflated == 1
    assert hub.tally(ROUTE).delivered == 2


async def test_max_rate_spaces_the_writes_and_each_carries_the_latest_value() -> None:
    hub = make_hub(partitions=1)
    sub, sink = conflated(hub, max_rate=10)
    stamps: list[float] = []
    original = sink.write

    def stamped(data: bytes) -> bool:
        stamps.append(time.monotonic())
        return original(data)

    sink.write = stamped  # type: ignore[method-assign]
    offset = 0
    for _ in range(30):  # 10 records a key for 3 keys, over 0.3 s: 3 writes or 4, never 30
        feed(hub, *(rec(0, offset + n, b"%d" % (offset + n), b"k%d" % (n % 3)) for n in range(3)))
        offset += 3
        await asyncio.sleep(0.01)
    await until(lambda: not hub.live.conflation.groups[next(iter(hub.live.conflation.groups))].owes(sub))
    assert 2 <= len(stamps) <= 6
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    assert min(gaps) >= 0.1 - 0.005
    last = {}
    for value in values(sink):
        last[int(value) % 3] = int(value)
    assert last == {0: 87, 1: 88, 2: 89}  # the latest of every key arrived


async def test_a_slow_client_is_never_cut_and_gets_the_latest_of_every_key_once_it_reads() -> None:
    hub = make_hub(partitions=2)
    sub, sink = conflated(hub, max_rate=50)
    feed(hub, rec(0, 0, b"a0", b"a"))
    await until(lambda: values(sink) == ["a0"])
    sink.busy = True  # it stopped reading
    records: list[Record] = []
    for n in range(1, 200):
        records.append(rec(n % 2, n // 2 + (n % 2 == 0), b"v%d" % n, b"k%d" % (n % 7)))
    for n in range(0, len(records), 20):
        feed(hub, *records[n : n + 20])
        await asyncio.sleep(0.005)
    feed(hub, rec(0, 200, None, b"k3"))  # a tombstone of k3 replaces its older value and is sent
    await asyncio.sleep(0.05)
    assert values(sink) == ["a0"]
    assert not sink.aborted
    assert sub.close_reason is None
    sink.busy = False
    await until(lambda: len(values(sink)) > 1, within=1.0)
    events = [e for e in sink.events() if e.has_data]
    latest = {e.data: e for e in events[1:]}
    assert len(events) == 1 + 7
    assert set(latest) == {"v193", "v194", "v195", "v196", "v197", "v198", "azM="}  # k3's tombstone: its key, base64
    assert [e for e in events if e.type == "delete"]
    # The last id is the newest record sent: a resume owes nothing before it.
    assert progress_decode(events[-1].id) == dict(hub.next)
    assert hub.counters.cut_slow == 0


async def test_a_stream_owed_records_gets_no_checkpoint_past_them() -> None:
    hub = make_hub(partitions=1)
    sub, sink = conflated(hub, max_rate=1)
    feed(hub, rec(0, 0, b"a0", b"a"))
    await until(lambda: values(sink) == ["a0"])
    sink.busy = True
    feed(hub, rec(0, 1, b"a1", b"a"))
    sink.busy = False
    sent = sub.sent_progress
    hub.heartbeat(time.monotonic() + 2)
    assert sub.sent_progress == sent  # a keep-alive without an id: a1 is still owed
    assert sink.events()[-1].id != hub.state.progress.token


async def test_what_the_slowest_are_owed_past_the_bound_cuts_them_alone() -> None:
    hub = make_hub(partitions=1)
    slow_sub, slow = conflated(hub, sink=FakeSink(limit=4096))
    fast_sub, fast = conflated(hub, sink=FakeSink(limit=4096))
    feed(hub, rec(0, 0, b"x", b"a"))
    await until(lambda: values(slow) == ["x"] and values(fast) == ["x"])
    slow.busy = True
    for n in range(1, 60):  # distinct keys of 100 bytes: nothing to conflate, 6 kB owed
        feed(hub, rec(0, n, b"y" * 100, b"k%d" % n))
        await asyncio.sleep(0)
    await until(lambda: slow_sub.close_reason is not None)
    assert slow.aborted
    assert fast_sub.close_reason is None
    assert len(values(fast)) == 60
    assert hub.counters.cut_slow == 1


async def test_streams_leave_their_group_and_the_last_one_takes_it_away() -> None:
    hub = make_hub(partitions=1)
    first, _ = conflated(hub, max_rate=5)
    second, _ = conflated(hub, max_rate=5)
    other, _ = conflated(hub, max_rate=0)
    assert len(hub.live.conflation.groups) == 2
    feed(hub, rec(0, 0, b"a", b"a"))
    for sub in (first, second, other):
        hub.unsubscribe(sub)
    assert not hub.live.conflation.groups
    assert not hub.live.members


async def test_streams_with_other_filters_have_tables_of_their_own() -> None:
    from streams.core.filters import FilterSet, MessageFilter

    hub = make_hub(partitions=1)
    sinks = {}
    for key in (b"a", b"b"):
        sinks[key] = FakeSink()
        options = SubscriberOptions(FilterSet((MessageFilter(key=key),)), route=ROUTE, conflate=0)
        hub.subscribe(Subscriber(sinks[key], options), StartPlan(dict(hub.next)), 0)
    assert len(hub.live.conflation.groups) == 2
    feed(hub, rec(0, 0, b"a1", b"a"), rec(0, 1, b"b1", b"b"), rec(0, 2, b"a2", b"a"), rec(0, 3, b"c1", b"c"))
    await until(lambda: values(sinks[b"a"]) == ["a2"] and values(sinks[b"b"]) == ["b1"])
    assert hub.tally(ROUTE).conflated == 1  # a1, for the stream of a

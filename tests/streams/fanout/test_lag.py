"""The delivery lag histogram: record timestamp to socket write, once per batch and route, and for slow streams."""

from __future__ import annotations

import asyncio
import time

from streams.core.records import Record
from streams.fanout.counts import LAG_BOUNDS, LagHistogram
from streams.fanout.planning import StartPlan
from streams.fanout.subscriber import Subscriber, SubscriberOptions
from tests.streams.fanout.test_hub import FakeSink, feed, make_hub, rec


def test_histogram_buckets_are_cumulative_and_end_with_inf() -> None:
    lag = LagHistogram()
    for seconds in (0.001, 0.2, 0.2, 100.0):
        lag.observe(seconds)
    pairs = lag.cumulative()
    assert pairs[-1] == ("+Inf", 4)
    assert dict(pairs)["0.005"] == 1
    assert dict(pairs)["0.25"] == 3
    assert dict(pairs)[str(LAG_BOUNDS[-1])] == 3
    assert lag.count == 4
    assert abs(lag.total - 100.401) < 1e-9


class SlowSink(FakeSink):
    """A client that reads when the test says so: ``writable`` waits for :meth:`reads`, as a paused transport does."""

    def __init__(self) -> None:
        super().__init__()
        self.resumed = asyncio.Event()

    async def writable(self) -> None:
        await self.resumed.wait()

    def reads(self) -> None:
        self.busy = False
        self.resumed.set()


def subscribe(hub, route: str, sink: FakeSink | None = None) -> tuple[Subscriber, FakeSink]:
    sink = sink or FakeSink()
    sub = Subscriber(sink, SubscriberOptions(route=route))
    hub.subscribe(sub, StartPlan(dict(hub.next)), 0)
    return sub, sink


def ago(seconds: float) -> int:
    return int((time.time() - seconds) * 1000)


async def test_live_lag_is_observed_once_per_batch_and_route_from_its_oldest_record() -> None:
    hub = make_hub()
    for _ in range(3):
        subscribe(hub, "/a")
    subscribe(hub, "/b")
    feed(hub, rec(0, 0, ts=ago(2.0)), rec(1, 0, ts=ago(0.5)), rec(0, 1, ts=ago(0.1)))
    for route in ("/a", "/b"):
        lag = hub.tally(route).lag
        assert lag.count == 1  # one batch: one observation, however many streams and records
        assert 2.0 <= lag.total < 3.0
    assert abs(hub.state.newest_ms - ago(0.1)) < 1000


async def test_a_batch_no_stream_is_written_from_observes_nothing() -> None:
    hub = make_hub()
    feed(hub, rec(0, 0, ts=ago(1.0)))
    assert hub.tally.by_route == {}


async def test_the_lag_moves_for_a_slow_consumer_catching_up_and_not_for_a_replay() -> None:
    hub = make_hub()
    sink = SlowSink()
    sub, _ = subscribe(hub, "/slow", sink)
    feed(hub, rec(0, 0, value=b"a"))
    before = hub.tally("/slow").lag.count
    sink.busy = True  # the client has not read the last write: the next batch demotes it
    feed(hub, rec(0, 1, value=b"b"), rec(1, 0, value=b"c"))
    assert sub.demoted
    await asyncio.sleep(0)  # the catch-up writes what it has at once, then waits for the client
    feed(hub, rec(0, 2, value=b"d"), rec(1, 1, value=b"e"))  # produced while the client is behind
    await asyncio.sleep(0.3)  # the client reads slowly
    sink.reads()
    await asyncio.wait_for(sub.task, timeout=5)  # type: ignore[arg-type]
    lag = hub.tally("/slow").lag
    assert lag.count > before
    buckets = dict(lag.cumulative())
    assert buckets["0.25"] < buckets["+Inf"]  # the catch-up wrote records more than 0.25 s old

    # A stream replaying history from the start is not late: nothing is observed for it.
    replay = Subscriber(FakeSink(), SubscriberOptions(route="/replay"))
    hub.subscribe(replay, StartPlan(dict.fromkeys(hub.partitions, 0)), 0)
    await asyncio.wait_for(replay.task, timeout=5)  # type: ignore[arg-type]
    assert hub.tally("/replay").lag.count == 0


async def test_records_without_a_timestamp_are_not_observed() -> None:
    hub = make_hub()
    subscribe(hub, "/a")
    feed(hub, Record(0, 0, -1, b"k", b"v"))
    assert hub.tally("/a").lag.count == 0

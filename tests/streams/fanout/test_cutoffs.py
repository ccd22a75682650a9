"""Ends by wall-clock time that come before any later delivery (a token's exp, SPEC 4.3)."""

from __future__ import annotations

import asyncio
import threading
import time

from streams.fanout.cutoffs import Cutoffs, loop_cutoffs
from streams.fanout.planning import StartPlan
from streams.fanout.subscriber import Subscriber
from tests.streams.fanout.test_hub import FakeSink, feed, make_hub, rec


async def test_due_ends_run_in_time_order_and_later_ones_wait() -> None:
    cutoffs = Cutoffs(asyncio.get_running_loop())
    ran: list[str] = []
    now = time.time()
    cutoffs.at(now + 60, lambda: ran.append("later"))
    cutoffs.at(now - 1, lambda: ran.append("second"))
    cutoffs.at(now - 2, lambda: ran.append("first"))
    cutoffs.run_due()
    assert ran == ["first", "second"]
    cutoffs.run_due()
    assert ran == ["first", "second"]  # each runs once
    assert len(cutoffs) == 1


async def test_a_cancelled_end_never_runs() -> None:
    cutoffs = Cutoffs(asyncio.get_running_loop())
    ran: list[str] = []
    cutoffs.at(time.time() - 1, lambda: ran.append("cancelled")).cancel()
    cutoffs.at(time.time() - 1, lambda: ran.append("kept"))
    cutoffs.run_due()
    assert ran == ["kept"]


async def test_the_timer_ends_what_nothing_is_written_to() -> None:
    cutoffs = Cutoffs(asyncio.get_running_loop())
    ended = asyncio.get_running_loop().create_future()
    moved = cutoffs.at(time.time() + 0.05, lambda: ended.set_result("old"))
    moved.cancel()  # extended: the end moves later
    cutoffs.at(time.time() + 0.1, lambda: ended.set_result("new"))
    assert await asyncio.wait_for(ended, timeout=5) == "new"
    assert len(cutoffs) == 0


async def test_cancelled_ends_do_not_pile_up() -> None:
    now = [time.time()]
    cutoffs = Cutoffs(asyncio.get_running_loop(), clock=lambda: now[0])
    ran: list[int] = []
    # Long-lived tokens: each entry would wait an hour in the heap.
    ends = [cutoffs.at(now[0] + 3600 + n, lambda n=n: ran.append(n)) for n in range(1000)]
    for end in ends[:900]:  # streams that closed, or tokens that were extended
        end.cancel()
    assert len(cutoffs) < 1000 // 2
    now[0] += 7200
    cutoffs.run_due()
    assert ran == list(range(900, 1000))
    assert len(cutoffs) == 0


async def test_one_heap_per_loop() -> None:
    assert loop_cutoffs() is loop_cutoffs()


def expiring(hub, sink: FakeSink, after: float) -> Subscriber:  # type: ignore[no-untyped-def]
    sub = Subscriber(sink)

    def expire() -> None:
        hub.unsubscribe(sub)
        sub.end("expired")

    loop_cutoffs().at(time.time() + after, expire)
    return sub


async def test_a_batch_the_late_loop_runs_before_the_timer_reaches_no_expired_stream() -> None:
    hub = make_hub()
    sink, other = FakeSink(), FakeSink()
    sub = expiring(hub, sink, after=0.05)
    hub.subscribe(sub, StartPlan(dict(hub.next)), 0)
    hub.subscribe(Subscriber(other), StartPlan(dict(hub.next)), 0)
    feed(hub, rec(0, 0, value=b"before"))
    # The loop runs late (this test holds it) past the stream's end, while the fetch thread
    # hands over a record: the loop runs that batch before the timers that came due.
    time.sleep(0.1)  # noqa: ASYNC251 (holding the loop is the point)
    thread = threading.Thread(target=hub.handoff.put, args=([rec(0, 1, value=b"after")],))
    thread.start()
    thread.join()
    await asyncio.sleep(0)
    assert [e.data for e in sink.events() if e.data] == ["before"]
    assert sub.close_reason == "expired"
    assert [e.data for e in other.events() if e.data] == ["before", "after"]


async def test_a_catch_up_writes_nothing_after_the_end() -> None:
    hub = make_hub()
    feed(hub, *(rec(0, o, value=f"r{o}".encode()) for o in range(5)))
    sink = FakeSink()
    sub = expiring(hub, sink, after=-1)  # due already; the loop has not run its timer yet
    hub.subscribe(sub, StartPlan({0: 0, 1: 0}), 0)
    assert sub.task is not None
    await asyncio.wait_for(sub.closed, timeout=5)
    assert sub.close_reason == "expired"
    assert [e.data for e in sink.events() if e.data] == []

"""The keep-alive wheel: a tick sees only the streams whose second has come."""

from __future__ import annotations

import time

from streams.fanout.hub import TopicHub
from streams.fanout.planning import StartPlan
from streams.fanout.sinks import FlowSink
from streams.fanout.subscriber import Subscriber, SubscriberOptions
from streams.fanout.wheel import HeartbeatWheel
from tests.streams.fanout.test_hub import FakeSink, make_hub
from tests.streams.fanout.test_sinks import FakeFlow


def test_members_come_due_in_order_once() -> None:
    wheel: HeartbeatWheel[str] = HeartbeatWheel()
    wheel.schedule("b", 12.5)
    wheel.schedule("a", 10.0)
    wheel.schedule("c", 30.0)
    assert wheel.due(9.9) == []
    assert wheel.due(13.0) == ["a", "b"]
    assert wheel.due(13.0) == []
    assert len(wheel) == 1
    wheel.schedule("c", 14.0)  # moved, not added twice
    wheel.discard("nobody")
    assert wheel.due(100.0) == ["c"]
    assert len(wheel) == 0


def test_members_taken_out_go_back_together() -> None:
    wheel: HeartbeatWheel[str] = HeartbeatWheel()
    for member, at in (("a", 10.0), ("b", 10.5), ("c", 11.0)):
        wheel.schedule(member, at)
    due = wheel.due(10.9)
    assert due == ["a", "b"]
    wheel.schedule_all(due, 25.2)
    assert len(wheel) == 3
    assert wheel.due(24.9) == ["c"]
    assert wheel.due(25.0) == ["a", "b"]
    wheel.discard("a")  # nothing left behind by the bulk schedule
    assert len(wheel) == 0


async def test_a_tick_writes_only_to_streams_that_are_due() -> None:
    hub: TopicHub = make_hub()
    now = time.monotonic()
    quiet, chatty = FakeSink(), FakeSink()
    for sink in (quiet, chatty):
        hub.subscribe(Subscriber(sink, SubscriberOptions(heartbeat_seconds=5)), StartPlan(dict(hub.next)), None)
    written = {id(quiet): len(quiet.writes), id(chatty): len(chatty.writes)}
    hub.heartbeat(now + 1)
    assert len(quiet.writes) == written[id(quiet)]  # not due yet: not even looked at
    chatty.last_write = now + 4  # it wrote since: due later
    hub.heartbeat(now + 6)
    assert quiet.writes[-1] == b":\n\n"
    assert len(chatty.writes) == written[id(chatty)]
    hub.heartbeat(now + 10)
    assert chatty.writes[-1] == b":\n\n"
    assert len(hub.beats) == 2


async def test_streams_that_leave_leave_the_wheel() -> None:
    hub: TopicHub = make_hub()
    sub = Subscriber(FakeSink(), SubscriberOptions(heartbeat_seconds=3600))
    hub.subscribe(sub, StartPlan(dict(hub.next)), None)
    assert len(hub.beats) == 1
    hub.unsubscribe(sub)
    assert len(hub.beats) == 0  # nothing keeps a closed stream (and its connection) alive


async def test_a_one_second_keep_alive_goes_out_every_tick() -> None:
    hub: TopicHub = make_hub()
    sink = FakeSink()
    hub.subscribe(Subscriber(sink, SubscriberOptions(heartbeat_seconds=1)), StartPlan(dict(hub.next)), None)
    start = sink.last_write
    beats = 0
    for tick in range(1, 11):  # ten ticks a second apart, in whatever phase against the clock's seconds
        now = start + tick + 0.003
        before = len(sink.writes)
        hub.heartbeat(now)
        if len(sink.writes) > before:
            beats += 1
            sink.last_write = now
    assert beats == 10


async def test_keep_alives_to_the_servers_flows_are_written_shared_and_checkpoints_plain() -> None:
    hub: TopicHub = make_hub()
    flow = FakeFlow()
    sink = FlowSink(flow, limit=1 << 20)
    sub = Subscriber(sink, SubscriberOptions(heartbeat_seconds=5))
    hub.subscribe(sub, StartPlan(dict(hub.next)), None)
    start = sink.last_write
    sent = len(flow.sent)
    hub.heartbeat(start + 5.5)
    assert flow.sent[sent:] == [b":\n\n"]
    assert flow.shared == 1  # the keep-alive framed once for the sweep, one call
    assert sink.last_write > start
    hub.state.positions[0] = 3
    hub.state.progress.move(0, 3)  # progress moved with nothing written: the next one is a checkpoint
    hub.heartbeat(start + 11)  # the wheel had it due at start + 10.5
    assert len(flow.sent) == sent + 2
    assert flow.sent[-1].startswith(b":\n")
    assert b"id:" in flow.sent[-1]
    assert flow.shared == 1
    flow.pause()  # a client that has not taken its bytes gets no keep-alive on top
    hub.heartbeat(start + 17)
    assert len(flow.sent) == sent + 2
    assert len(hub.beats) == 1

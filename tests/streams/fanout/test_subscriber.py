"""A subscriber's end: told to callbacks on the loop, and as a future made only when asked for."""

from __future__ import annotations

import asyncio

from streams.fanout.sinks import QueueSink
from streams.fanout.subscriber import Subscriber


async def _nothing(_message: object) -> None:
    pass


def subscriber() -> Subscriber:
    return Subscriber(QueueSink(_nothing, 1 << 20))


async def test_end_calls_each_callback_once_on_the_loop_with_the_reason_kept() -> None:
    sub = subscriber()
    told: list[str] = []
    sub.on_end(lambda: told.append("teardown"))
    sub.on_end(lambda: told.append("mux"))
    sub.end("expired")
    sub.end("client")  # a second end changes nothing
    assert told == []  # soon, not inside end(): the fan-out may be ending it mid-batch
    await asyncio.sleep(0)
    assert told == ["teardown", "mux"]
    assert (sub.close_reason, sub.is_closed) == ("expired", True)


async def test_a_callback_given_after_the_end_is_called_too() -> None:
    sub = subscriber()
    sub.end("slow")
    told: list[str] = []
    sub.on_end(lambda: told.append("late"))
    await asyncio.sleep(0)
    assert told == ["late"]


async def test_the_future_is_made_when_asked_for_and_resolves_with_the_reason() -> None:
    sub = subscriber()
    assert sub._closed is None  # an open stream on daphne never asks for it
    waiting = sub.closed
    assert not waiting.done()
    assert sub.closed is waiting
    sub.end("route_removed")
    assert await asyncio.wait_for(waiting, 1) == "route_removed"


async def test_a_future_asked_for_after_the_end_is_resolved_already() -> None:
    sub = subscriber()
    sub.end("unauthorized")
    assert sub.closed.done()
    assert sub.closed.result() == "unauthorized"

"""The sinks a hub writes to: the direct one over the server's flow, and the queue for any ASGI server."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from streams.fanout.sinks import FlowSink, QueueSink, SharedFrames


class FakeFlow:
    """A :class:`~streams.fanout.sinks.Flow` whose transport pauses when told to."""

    def __init__(self) -> None:
        self.paused = False
        self.paused_bytes = 0
        self.sent: list[bytes] = []
        self.shared = 0  # writes through write_shared
        self.aborted = False
        self._resumed = asyncio.Event()

    def write(self, data: bytes) -> bool:
        if self.paused:
            self.paused_bytes += len(data)
        self.sent.append(data)
        return True

    def write_shared(self, frames: SharedFrames) -> None:
        self.write(frames.data)
        self.shared += 1

    async def wait_resumed(self) -> None:
        if self.paused:
            await self._resumed.wait()

    def on_gone(self, callback: Callable[[], object]) -> None:
        pass

    def release(self) -> None:
        pass

    def abort(self) -> None:
        self.aborted = True

    def finish(self) -> None:
        pass

    def pause(self) -> None:
        self.paused = True
        self._resumed.clear()

    def resume(self) -> None:
        self.paused, self.paused_bytes = False, 0
        self._resumed.set()


async def test_flow_sink_is_over_its_limit_only_by_bytes_written_while_paused() -> None:
    flow = FakeFlow()
    sink = FlowSink(flow, limit=10)
    assert sink.write(b"x" * 100)  # not paused: everything goes to the transport
    assert not sink.congested()
    flow.pause()
    assert sink.write(b"y" * 6)
    assert sink.congested()
    assert sink.pending() == 6
    assert not sink.write(b"z" * 6)  # 12 bytes behind a limit of 10
    waiting = asyncio.ensure_future(sink.writable())
    await asyncio.sleep(0)
    assert not waiting.done()
    flow.resume()
    await asyncio.wait_for(waiting, 1)
    assert sink.pending() == 0
    sink.abort()
    assert flow.aborted
    assert flow.sent == [b"x" * 100, b"y" * 6, b"z" * 6]


def test_shared_frames_are_framed_once_as_an_http_chunk() -> None:
    frames = SharedFrames(b"id: 1\ndata: x\n\n")
    chunk = frames.chunk
    assert chunk == b"f\r\nid: 1\ndata: x\n\n\r\n"  # 15 bytes, in hex
    assert frames.chunk is chunk  # built once, for every stream the group writes


class Receiver:
    """An ASGI ``send`` that holds each body until released, as a slow socket would."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.gate = asyncio.Event()
        self.gate.set()

    async def __call__(self, message: dict[str, Any]) -> None:
        await self.gate.wait()
        self.bodies.append(message["body"])


async def test_queue_sink_joins_what_queued_while_the_socket_was_busy() -> None:
    receiver = Receiver()
    sink = QueueSink(receiver, limit=1000)
    receiver.gate.clear()
    for part in (b"a", b"b", b"c"):
        assert sink.write(part)
    await asyncio.sleep(0)
    receiver.gate.set()
    await asyncio.wait_for(sink.writable(), 1)
    assert b"".join(receiver.bodies) == b"abc"
    assert sink.pending() == 0
    await sink.close()


async def test_queue_sink_bounds_pending_bytes_and_reports_congestion() -> None:
    receiver = Receiver()
    receiver.gate.clear()
    sink = QueueSink(receiver, limit=10)
    assert sink.write(b"12345")
    assert not sink.congested()  # at half the limit, not over it
    assert sink.write(b"6")
    assert sink.congested()
    assert not sink.write(b"78901")  # 11 pending over a limit of 10
    receiver.gate.set()
    await asyncio.wait_for(sink.writable(), 1)
    assert b"".join(receiver.bodies) == b"12345678901"
    await sink.close()


async def test_queue_sink_abort_drops_what_is_pending_and_takes_no_more() -> None:
    receiver = Receiver()
    receiver.gate.clear()
    sink = QueueSink(receiver, limit=100)
    sink.write(b"never sent")
    sink.abort()
    assert sink.pending() == 0
    assert not sink.write(b"after")
    receiver.gate.set()
    await asyncio.sleep(0.01)
    assert receiver.bodies == []


@pytest.mark.parametrize("parts", [[b"only"], [b"first", b"second"]])
async def test_queue_sink_close_flushes_before_it_returns(parts: list[bytes]) -> None:
    receiver = Receiver()
    sink = QueueSink(receiver, limit=100)
    for part in parts:
        sink.write(part)
    await asyncio.wait_for(sink.close(), 1)
    assert b"".join(receiver.bodies) == b"".join(parts)

"""The on-demand input queue daphne gets for each request."""

from __future__ import annotations

import asyncio

from streams.server.inputs import InputQueue


async def test_messages_come_out_in_order_whether_put_before_or_after_the_reader_waits() -> None:
    queue = InputQueue()
    queue.put_nowait({"type": "http.request", "body": b""})
    queue.put_nowait({"type": "http.request", "body": b"x"})
    assert await queue.get() == {"type": "http.request", "body": b""}
    assert await queue.get() == {"type": "http.request", "body": b"x"}
    waiting = asyncio.ensure_future(queue.get())
    await asyncio.sleep(0)
    assert not waiting.done()
    queue.put_nowait({"type": "http.disconnect"})
    queue.put_nowait({"type": "later"})
    assert await asyncio.wait_for(waiting, 5) == {"type": "http.disconnect"}
    assert await queue.get() == {"type": "later"}


def test_a_queue_nobody_reads_holds_only_its_messages() -> None:
    queue = InputQueue()
    queue.put_nowait({"type": "http.request"})
    assert queue._queue is None  # no asyncio.Queue (three deques and an event) until someone waits

"""Where a stream's bytes go, with the client's pending bytes bounded (SPEC 2.5).

The hub writes frames synchronously; a sink either hands them to the
transport at once (daphne, with Twisted's flow control telling us how much is
still unsent) or queues them for a writer task (any other ASGI server).
Either way ``write`` returns ``False`` once the client is more than
``limit`` bytes behind, and the hub then cuts the client.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol

from streams.core.asgi import Send
from streams.core.compression import Encoder


def http_chunk(data: bytes) -> bytes:
    """``data`` as one HTTP/1.1 chunk: what a plain chunked response puts on the wire for it."""
    return b"%x\r\n%b\r\n" % (len(data), data)


class SharedFrames:
    """The same bytes for many streams at once (a batch's frames for a group, a keep-alive), framed once.

    The fan-out hands one to each :class:`FlowSink` of the group through :meth:`Flow.write_shared`: the
    flow sends :attr:`chunk`, built on first use for all of them, instead of framing ``data`` per stream.
    """

    __slots__ = ("_chunk", "data")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self._chunk: bytes | None = None

    @property
    def chunk(self) -> bytes:
        """``data`` as one HTTP/1.1 chunk (what a plain chunked response puts on the wire)."""
        chunk = self._chunk
        if chunk is None:
            chunk = self._chunk = http_chunk(self.data)
        return chunk


class Flow(Protocol):
    """The socket end of one response, as the server gives it to the stream app.

    ``write`` hands bytes to the connection at once; ``paused`` and ``paused_bytes``
    say whether (and by how much) the client is behind, from the transport's own
    flow control. ``streams.server.flow.RequestFlow`` is the implementation on daphne.
    """

    paused: bool
    paused_bytes: int

    def write(self, data: bytes) -> bool:
        """Send ``data`` now (or queue it in the transport); False only if it cannot be taken."""

    def write_shared(self, frames: SharedFrames) -> None:
        """``write(frames.data)`` while not paused, sending the chunk ``frames`` built once for every stream."""

    def compress(self, encoder: Encoder) -> None:
        """Compress and flush every later write with ``encoder`` (the head said ``Content-Encoding``)."""

    async def wait_resumed(self) -> None:
        """Return once the transport asks for more (at once if it is not paused)."""

    def on_gone(self, callback: Callable[[], object]) -> None:
        """Call ``callback`` once when the client goes away before the response ends."""

    def release(self) -> None:
        """Stop reporting flow control (before the response ends)."""

    def abort(self) -> None:
        """Drop the connection without sending what is pending."""

    def finish(self) -> None:
        """End the response (unless it ended or the client went)."""


class Sink(Protocol):
    limit: int
    last_write: float

    def write(self, data: bytes) -> bool:
        """Queue ``data``; ``False`` means the client is over its pending-bytes limit."""

    async def writable(self) -> None:
        """Return once the client has room for more (used by catch-up reads)."""

    def pending(self) -> int:
        """Bytes written but not yet accepted by the client's connection."""

    def congested(self) -> bool:
        """True while the client has not yet taken what it was sent (stop pushing)."""

    def abort(self) -> None:
        """Drop the connection without waiting for pending bytes."""


class FlowSink:
    """A sink over a daphne request whose producer registration reports back-pressure.

    ``flow`` is the server's :class:`Flow` of the request: ``write``/``abort`` act on
    the connection at once, and ``paused_bytes`` counts what was written since the
    transport said stop. The fan-out's broadcast and keep-alive loops write to ``flow``
    directly (:meth:`Flow.write_shared`, ``last_write`` set by them): one call per stream.
    """

    __slots__ = ("flow", "limit", "last_write")

    def __init__(self, flow: Flow, limit: int) -> None:
        self.flow = flow
        self.limit = limit
        self.last_write = time.monotonic()

    def write(self, data: bytes) -> bool:
        self.last_write = time.monotonic()
        return self.flow.write(data) and self.flow.paused_bytes <= self.limit

    async def writable(self) -> None:
        await self.flow.wait_resumed()

    def pending(self) -> int:
        return self.flow.paused_bytes

    def congested(self) -> bool:
        return self.flow.paused

    def abort(self) -> None:
        self.flow.abort()


class QueueSink:
    """A sink for any ASGI server: a bounded byte queue drained by one writer task."""

    def __init__(self, send: Send, limit: int) -> None:
        self._send = send
        self.limit = limit
        self.last_write = time.monotonic()
        self._chunks: deque[bytes] = deque()
        self._bytes = 0
        self._wakeup = asyncio.Event()
        self._drained = asyncio.Event()
        self._drained.set()
        self._closed = False
        self._task = asyncio.get_running_loop().create_task(self._drain())

    def write(self, data: bytes) -> bool:
        if self._closed:
            return False
        self.last_write = time.monotonic()
        self._chunks.append(data)
        self._bytes += len(data)
        self._drained.clear()
        self._wakeup.set()
        return self._bytes <= self.limit

    async def writable(self) -> None:
        await self._drained.wait()

    def pending(self) -> int:
        return self._bytes

    def congested(self) -> bool:
        return self._bytes > self.limit // 2

    def abort(self) -> None:
        self._closed = True
        self._chunks.clear()
        self._bytes = 0
        self._task.cancel()

    async def _drain(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            while self._chunks:
                chunk = b"".join(self._chunks)
                self._chunks.clear()
                await self._send({"type": "http.response.body", "body": chunk, "more_body": True})
                self._bytes = max(0, self._bytes - len(chunk))
            self._drained.set()

    async def close(self) -> None:
        """Flush what is queued (used when a stream ends normally)."""
        if not self._closed:
            await self._drained.wait()
        self._task.cancel()

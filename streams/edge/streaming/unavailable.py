"""Streams that cannot start for a temporary reason, answered so that a browser's ``EventSource`` comes back.

``EventSource`` gives up for good on any status but 200 (the WHATWG algorithm
"fails the connection"). So when Kafka does not answer (unreachable, or the
topic's first metadata not loaded yet) and the client asked for
``text/event-stream``, the answer is ``200`` with a ``retry:`` line and a comment
saying why, and the stream is *held*: heartbeats go out while the start is tried
again with backoff; once Kafka answers, delivery starts from the position the
client asked for. If Kafka stays away for ``UNAVAILABLE_HOLD_SECONDS`` the
response ends cleanly and the browser reconnects after ``retry`` with its
``Last-Event-ID`` intact. A worker holds at most ``MAX_WAITING_STREAMS`` such
streams; past that they end at once (the browser still comes back).

Answers that need an operator stay final: TLS or authentication
misconfiguration, a bad id, an unknown topic, 401/403, 429 (docs/operations.md).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from streams.conf import streams_settings
from streams.core.asgi import Receive, Send
from streams.core.errors import KafkaNotAvailable, StreamError
from streams.core.sse import retry_line
from streams.edge.http.request import StreamRequest
from streams.edge.http.responses import stream_finish, stream_start
from streams.edge.runtime import WorkerRuntime
from streams.edge.streaming.stream import client_disconnect

logger = logging.getLogger("sluice.streams")

T = TypeVar("T")
# Causes a browser should wait out; the others need an operator.
TEMPORARY_CAUSES = (None, "unreachable")
RETRY_MS = 2000
_BACKOFF_FIRST, _BACKOFF_MAX = 0.5, 5.0


def temporary(error: StreamError, request: StreamRequest) -> bool:
    """Whether ``error`` is worth holding the stream for: Kafka away, asked by an event stream client."""
    return (
        isinstance(error, KafkaNotAvailable)
        and error.cause in TEMPORARY_CAUSES
        and streams_settings.UNAVAILABLE_HOLD_SECONDS > 0
        and request.method == "GET"
        and b"text/event-stream" in (request.header(b"accept") or b"")
    )


async def stream_hold(
    runtime: WorkerRuntime,
    request: StreamRequest,
    receive: Receive,
    send: Send,
    error: KafkaNotAvailable,
    retry: Callable[[], Awaitable[T]],
    heartbeat_seconds: float,
) -> T | None:
    """Answer 200 with ``retry`` and a comment, then call ``retry`` with backoff until it succeeds.

    Returns its result (the response is started: the caller serves the stream without a new head),
    or None once the hold is over, the client left, or this worker holds too many (the response
    has then ended cleanly). The worker's ``runtime`` counts the streams it holds.
    """
    await stream_start(send)
    reason = f": {error.detail.replace(chr(10), ' ')[:300]}; waiting for Kafka\n\n".encode()
    await send({"type": "http.response.body", "body": retry_line(RETRY_MS) + reason, "more_body": True})
    if runtime.waiting >= streams_settings.MAX_WAITING_STREAMS:
        await stream_finish(send)
        return None
    runtime.waiting += 1
    gone = _client_gone(request, receive)
    try:
        deadline = time.monotonic() + streams_settings.UNAVAILABLE_HOLD_SECONDS
        backoff = _BACKOFF_FIRST
        beat = time.monotonic()
        while time.monotonic() < deadline:
            await asyncio.wait([gone], timeout=min(backoff, max(0.0, deadline - time.monotonic())))
            if gone.done():
                return None
            try:
                return await retry()
            except KafkaNotAvailable as again:
                if again.cause not in TEMPORARY_CAUSES:
                    await _comment_end(send, again)
                    return None
            except StreamError as final:
                await _comment_end(send, final)
                return None
            backoff = min(backoff * 2, _BACKOFF_MAX)
            if time.monotonic() - beat >= heartbeat_seconds:
                beat = time.monotonic()
                await send({"type": "http.response.body", "body": b":\n\n", "more_body": True})
        logger.info(
            "stream on %s ended after %.0fs without Kafka; the client comes back",
            request.scope.get("path"),
            streams_settings.UNAVAILABLE_HOLD_SECONDS,
        )
        await stream_finish(send)
        return None
    finally:
        runtime.waiting -= 1
        gone.cancel()


async def _comment_end(send: Send, error: StreamError) -> None:
    """A refusal found while holding: the status is out already, so a comment says it, then the end."""
    text = f": {error.code}: {error.detail}".replace("\n", " ")[:500]
    await send({"type": "http.response.body", "body": text.encode() + b"\n\n", "more_body": True})
    await stream_finish(send)


def _client_gone(request: StreamRequest, receive: Receive) -> asyncio.Future[None]:
    """A future that resolves when the client leaves (cancel it when done)."""
    loop = asyncio.get_running_loop()
    if request.flow is not None:
        gone: asyncio.Future[None] = loop.create_future()

        def left() -> None:
            if not gone.done():
                gone.set_result(None)

        request.flow.on_gone(left)
        return gone

    return client_disconnect(receive)

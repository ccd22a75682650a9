"""Streams that cannot start for a temporary reason, answered so that a browser's ``EventSource`` comes back.

``EventSource`` gives up for good on any status but 200 (the WHATWG algorithm
"fails the connection"). So when Kafka does not answer (unreachable, or the
topic's first metadata not loaded yet), or a configured topic does not exist in
Kafka yet (a Topic row, or a route's literal topic, not created there), and the
client asked for ``text/event-stream``, the answer is ``200`` with a ``retry:``
line and a comment saying why, and the stream is *held*: heartbeats go out while
the start is tried again with backoff (0.5 s doubling to 5 s); once Kafka answers
and has the topic, delivery starts from the position the client asked for (a
stream that waited for its topic, from the topic's beginning). If that takes
longer than ``UNAVAILABLE_HOLD_SECONDS`` the response ends cleanly and the
browser reconnects after ``retry`` with its ``Last-Event-ID`` intact. A worker
holds at most ``MAX_WAITING_STREAMS`` such streams; past that they end at once
(the browser still comes back).

Answers that need an operator stay final: TLS or authentication
misconfiguration, a bad id, a topic the configuration does not name, 401/403,
429 (docs/operations.md).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from streams.conf import streams_settings
from streams.core.asgi import Receive, Send
from streams.core.errors import KafkaNotAvailable, StreamError, UnknownTopic
from streams.core.ids import progress_encode
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


def passing(error: StreamError) -> bool:
    """Whether ``error`` may pass by itself: Kafka away, or a configured topic not created yet."""
    if isinstance(error, KafkaNotAvailable):
        return error.cause in TEMPORARY_CAUSES
    return isinstance(error, UnknownTopic) and error.configured


def temporary(error: StreamError, request: StreamRequest) -> bool:
    """Whether ``error`` is worth holding the stream for: it may pass, and an event stream client asked."""
    return (
        passing(error)
        and streams_settings.UNAVAILABLE_HOLD_SECONDS > 0
        and request.method == "GET"
        and b"text/event-stream" in (request.header(b"accept") or b"")
    )


def unpositioned(request: StreamRequest) -> bool:
    """A request that names no position (no last event id, no ``since``): it starts where the route says."""
    return request.last_event_id_raw() is None and "since" not in request.query


async def stream_hold(
    runtime: WorkerRuntime,
    request: StreamRequest,
    receive: Receive,
    send: Send,
    error: StreamError,
    retry: Callable[[], Awaitable[T]],
    heartbeat_seconds: float,
    *,
    resume_from_start: bool = False,
) -> T | None:
    """Answer 200 with ``retry`` and a comment, then call ``retry`` with backoff until it succeeds.

    Returns its result (the response is started: the caller serves the stream without a new head),
    or None once the hold is over, the client left, or this worker holds too many (the response
    has then ended cleanly). The worker's ``runtime`` counts the streams it holds.
    ``resume_from_start``: a stream with no position of its own, so that while it waits for its
    topic an ``id:`` (the topic's beginning) makes the browser's reconnection start there too.
    """
    await stream_start(send)
    said = hold_notice(error)
    lead = retry_line(RETRY_MS) + said + _from_start_id(error, resume_from_start)
    await send({"type": "http.response.body", "body": lead, "more_body": True})
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
            except StreamError as again:
                if not passing(again):
                    await _comment_end(send, again)
                    return None
                error = again
            backoff = min(backoff * 2, _BACKOFF_MAX)
            notice = hold_notice(error)
            if notice != said:  # the reason changed (Kafka came back without the topic, or went away)
                said, beat_body = notice, notice + _from_start_id(error, resume_from_start)
            elif time.monotonic() - beat >= heartbeat_seconds:
                beat_body = b":\n\n"
            else:
                continue
            beat = time.monotonic()
            await send({"type": "http.response.body", "body": beat_body, "more_body": True})
        logger.info(
            "stream on %s ended after %.0fs (%s); the client comes back",
            request.scope.get("path"),
            streams_settings.UNAVAILABLE_HOLD_SECONDS,
            error.code,
        )
        await stream_finish(send)
        return None
    finally:
        runtime.waiting -= 1
        gone.cancel()


def hold_notice(error: StreamError) -> bytes:
    """The comment saying why a stream is held: Kafka away, or the topic it waits for."""
    if isinstance(error, UnknownTopic):
        why = f"topic {error.topic!r} does not exist in Kafka yet; waiting for it to be created"
        if error.member is not None:
            why = f"member {error.member}: {why}"
    else:
        why = f"{error.detail.replace(chr(10), ' ')[:300]}; waiting for Kafka"
    return f": {why}\n\n".encode()


def _from_start_id(error: StreamError, resume_from_start: bool) -> bytes:
    """``id:`` naming no position (an event with no data: the browser keeps it as its last event id).

    Resumed from, it starts every partition at the log's start: what a client that waited
    for the topic to be created has not seen yet.
    """
    if not (resume_from_start and isinstance(error, UnknownTopic)):
        return b""
    return f"id: {progress_encode({})}\n\n".encode()


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

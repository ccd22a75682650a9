"""The life of one open stream response, shared by Kafka, proxy and multiplexed streams.

Start the response, hand the stream's source a sink, let live reconfiguration
and the token's deadline end it, and, off daphne, wait until the client or the
source ends it. What differs between the kinds (a hub subscription, an upstream,
several routes) is a :class:`~streams.edge.streaming.source.StreamSource`; what the stream
holds is given back by its :class:`~streams.edge.streaming.ending.StreamEnd`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from streams.conf import streams_settings
from streams.core.asgi import Receive, Send
from streams.core.closing import CloseReason
from streams.core.compression import BrotliEncoder, Encoding
from streams.core.routes import RouteSpec
from streams.edge.authorization.reconfiguration import OpenStream
from streams.edge.http.request import StreamRequest
from streams.edge.http.responses import stream_finish, stream_start
from streams.edge.streaming.ending import StreamEnd
from streams.edge.streaming.kafka_stream import HubStream
from streams.edge.streaming.source import StreamSource
from streams.fanout.sinks import Flow, FlowSink, QueueSink, Sink


def sink_for(flow: Flow | None, send: Send, limit: int) -> Sink:
    """Direct writes on daphne with Sluice's server, a queue drained by a task on any other server."""
    return FlowSink(flow, limit) if flow is not None else QueueSink(send, limit)


@dataclass(frozen=True, slots=True)
class Watched:
    """A route whose live changes may end (part of) a stream: ``end`` is called with the reason."""

    route: RouteSpec
    end: Callable[[str], None]


async def stream_serve(
    request: StreamRequest,
    receive: Receive,
    send: Send,
    source: StreamSource,
    end: StreamEnd,
    *,
    limit: int,
    watched: Sequence[Watched],
    head_sent: bool = False,
) -> None:
    """Serve ``source`` as this request's response until the client leaves or the stream ends.

    ``limit``: the client's pending bytes before it is cut; ``watched``: its routes, held
    against live reconfiguration; ``head_sent``: the response started already (a stream
    held while Kafka was away). On daphne with Sluice's server this returns once the
    stream is live, and ``end`` runs when its source ends; elsewhere it waits for the end.
    """
    flow = request.flow
    if not head_sent:
        encoding = stream_encoding(request, source, [watch.route for watch in watched])
        await stream_start(send, encoding)
        if encoding is not None and flow is not None:
            flow.compress(encoding.encoder())
    sink = sink_for(flow, send, limit)
    end.source_hold(source)
    source.attach(sink)
    if streams_settings.TRACING and isinstance(source, HubStream):
        from streams.edge.streaming.tracing import stream_trace  # optional: imported only with traces on

        stream_trace(source)
    # A change of a route (disabled, deleted, guard tightened) may end the stream (live reconfiguration).
    end.watch([OpenStream(watch.route, request.scope, request.query, end=watch.end) for watch in watched])
    # A guarded stream ends when its token expires (nothing after exp is delivered),
    # unless a challenge response moves the deadline first.
    for deadline in end.deadlines:
        deadline.start(on_challenge=source.challenge, on_expire=partial(source.end, CloseReason.EXPIRED))
    if flow is not None:
        # On daphne the request says when its client goes, and nothing needs to wait: no task,
        # no coroutine per open stream. The stream ends when its source's end resolves.
        flow.on_gone(end.client_gone)
        end.hand_off(source.on_closed)
        return
    try:
        disconnected = await wait_until_over(receive, source.closed)
    finally:
        end.run()
    if not disconnected and source.close_reason != CloseReason.SLOW:
        if isinstance(sink, QueueSink):
            await sink.close()
        await stream_finish(send)


def stream_encoding(request: StreamRequest, source: StreamSource, routes: Sequence[RouteSpec]) -> Encoding | None:
    """How to compress this stream: as the client accepts, if each of its routes compresses, else None.

    Only on Sluice's server (the encoder sits where the flow writes to the socket); a stream
    held while Kafka was away sent its head before its routes were known, and stays plain.
    A route whose events, as this worker has sent them so far, average under its
    ``compression_min_bytes`` is sent plain: a flush costs some bytes per write. Past
    ``BROTLI_MAX_STREAMS`` Brotli streams in this process, a client that accepts gzip gets gzip.
    """
    if request.flow is None or not routes or not all(route.compression for route in routes):
        return None
    encoding = request.encoding(brotli_ok=BrotliEncoder.live < streams_settings.BROTLI_MAX_STREAMS)
    if encoding is None:
        return None
    size = event_bytes_mean(source)
    if size is not None and size < max(route.compression_min_bytes for route in routes):
        return None
    return encoding


def event_bytes_mean(source: StreamSource) -> float | None:
    """The mean size of the events the source's route was sent by its hub so far (None: not known yet)."""
    if not isinstance(source, HubStream):
        return None
    counts = source.hub.state.tally.by_route.get(source.route.pattern.source)
    if counts is None or not counts.delivered:
        return None
    return counts.bytes / counts.delivered


def client_disconnect(receive: Receive) -> asyncio.Task[None]:
    """A task that ends when ASGI ``receive`` says the client went away (servers without a :class:`Flow`)."""

    async def read() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    return asyncio.ensure_future(read())


async def wait_until_over(receive: Receive, closed: asyncio.Future[str]) -> bool:
    """Wait for the client to leave or the source to end the stream; True if the client left.

    For servers without a :class:`Flow`: the client's going is read from ``receive`` in a task.
    """
    gone = client_disconnect(receive)
    try:
        waiters: list[asyncio.Future[Any]] = [gone, closed]
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    return not closed.done()

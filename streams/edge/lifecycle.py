"""One stream request from its first byte to the end of its stream, for one route or several.

The request protocol is written once, for a :class:`~streams.edge.streaming.routeset.RouteSet`
(a route's own path is a set of one): the address's slot (429), ``OPTIONS``
(CORS preflight or the allowed methods), the origin (a JSON 403 for one the
routes do not allow, logged once a minute per route and origin), CORS headers
on every other answer, the challenge response (``POST`` on a guarded path), then the stream: the
method, every member admitted and opened before the response starts (or the
start held while Kafka is away or a configured topic is not created yet), the
token's deadlines, and the response.
The request's :class:`~streams.edge.streaming.ending.StreamEnd` is made here and handed
down: it is where the stream ends.
"""

from __future__ import annotations

import time
from functools import partial

from streams.core.asgi import Receive, Scope, Send
from streams.core.errors import StreamError
from streams.edge.authorization.reauthorization import CHALLENGE_CONTENT_TYPE
from streams.edge.challenge import challenge_answer, stream_deadlines
from streams.edge.http.cors import (
    OriginRefused,
    cors_headers,
    cross_origin,
    is_preflight,
    preflight_headers,
    refusal_headers,
)
from streams.edge.http.request import StreamRequest
from streams.edge.http.responses import empty_answer, send_error, send_with_headers, stream_finish, stream_start
from streams.edge.runtime import WorkerRuntime
from streams.edge.streaming.ending import StreamEnd
from streams.edge.streaming.mux_stream import MuxStream
from streams.edge.streaming.opening import members_open
from streams.edge.streaming.routeset import RouteSet, mux_resolve, origins_named
from streams.edge.streaming.source import StreamSource
from streams.edge.streaming.stream import stream_serve
from streams.edge.streaming.unavailable import stream_hold, temporary, unpositioned
from streams.selectors import route_table


async def stream_request(
    runtime: WorkerRuntime, scope: Scope, receive: Receive, send: Send, routes: RouteSet | None
) -> None:
    """Serve one request on a stream path; ``routes`` None: the members ``/streams`` names."""
    request = StreamRequest.of(scope)
    end = StreamEnd(runtime, request.flow)
    try:
        await request_answer(runtime, request, receive, send, routes, end)
    finally:
        end.returned()


async def request_answer(
    runtime: WorkerRuntime,
    request: StreamRequest,
    receive: Receive,
    send: Send,
    routes: RouteSet | None,
    end: StreamEnd,
) -> None:
    """The request's kind: a preflight, a challenge response, or a stream."""
    try:
        end.address_hold(request.scope)
        if routes is None:
            routes = await mux_resolve(request)
    except StreamError as error:
        await send_error(send, error)
        return
    if request.method == "OPTIONS":
        await options_answer(runtime, routes, request, send)
        return
    refusal = await origin_check(runtime, routes, request, preflight=False)
    if refusal is not None:
        await send_error(send_with_headers(send, refusal_headers(refusal.origin)), refusal)
        return
    send = send_with_headers(send, cors_headers(request.scope, routes.allow_origins, routes.allow_credentials))
    if request.method == "POST" and routes.guarded and request.content_type == CHALLENGE_CONTENT_TYPE:
        await challenge_answer(runtime, routes, request, send)
    else:
        await stream_answer(runtime, routes, request, receive, send, end)


async def options_answer(runtime: WorkerRuntime, routes: RouteSet, request: StreamRequest, send: Send) -> None:
    """A CORS preflight for the stream GET or the challenge-response POST; else the allowed methods."""
    methods = routes.methods
    if is_preflight(request.scope):
        refusal = await origin_check(runtime, routes, request, preflight=True)
        if refusal is not None:
            await send_error(send, refusal)
            return
        try:
            headers = preflight_headers(request.scope, routes.allow_origins, routes.allow_credentials, methods)
        except StreamError as error:
            await send_error(send, error)
            return
    else:
        headers = [(b"allow", ", ".join((*methods, "OPTIONS")).encode())]
    await empty_answer(send, 204, headers)


async def origin_check(
    runtime: WorkerRuntime, routes: RouteSet, request: StreamRequest, *, preflight: bool
) -> OriginRefused | None:
    """The refusal of a cross-origin request the routes do not allow, counted and (once a minute) logged."""
    origin = cross_origin(request.scope)
    refusal = routes.origin_refusal(origin) if origin is not None else None
    if refusal is not None:
        known = origins_named(await route_table())
        runtime.refused_origins.refused(request.scope, refusal.route, refusal.origin, preflight=preflight, known=known)
    return refusal


async def stream_answer(
    runtime: WorkerRuntime, routes: RouteSet, request: StreamRequest, receive: Receive, send: Send, end: StreamEnd
) -> None:
    """Open every member, then respond; a refusal before the response is a status and a JSON body."""
    started = time.monotonic()
    try:
        routes.method_check(request)
        await members_open(runtime, routes, request, started)
    except StreamError as error:
        if temporary(error, request):
            # An EventSource would give up for good on 503 or 404: hold it with 200 and heartbeats instead.
            routes.waiting(request, started, error)
            retry = partial(members_open, runtime, routes, request, started)
            held = await stream_hold(
                runtime,
                request,
                receive,
                send,
                error,
                retry,
                routes.heartbeat_seconds,
                resume_from_start=not routes.multiplexed and unpositioned(request),
            )
            if held is not None:
                await stream_respond(routes, request, receive, send, end, head_sent=True)
            return
        routes.refused(request, error, started)
        await send_error(send, error)
        return
    await stream_respond(routes, request, receive, send, end)


async def stream_respond(
    routes: RouteSet,
    request: StreamRequest,
    receive: Receive,
    send: Send,
    end: StreamEnd,
    *,
    head_sent: bool = False,
) -> None:
    """The response of opened members: a bare head for ``HEAD``, else the stream until it ends."""
    if request.method == "HEAD":
        routes.sources_detach()
        if not head_sent:
            await stream_start(send)
        await stream_finish(send)
        return
    source: StreamSource
    if routes.multiplexed:
        source = MuxStream(routes.members, routes.retry_ms)
    else:
        assert routes.members[0].source is not None
        source = routes.members[0].source
    end.source_hold(source)
    await end.deadlines_register(stream_deadlines(routes.members))
    await stream_serve(
        request,
        receive,
        send,
        source,
        end,
        limit=routes.max_pending_bytes,
        watched=routes.watched(),
        head_sent=head_sent,
    )

"""Opening a request's members before the response starts: admission, then a start plan or an upstream join.

Everything that can refuse happens here, so a refusal is still a status and a
JSON body. A route's own stream reads its position from ``Last-Event-ID``; a
member of a multiplexed stream from its part of the composite id.
"""

from __future__ import annotations

from streams.core.errors import InvalidLastEventId, StreamError, UnknownTopic
from streams.core.ids import EventId, EventIdError, progress_encode, progress_from_bytes
from streams.core.mux.frames import kafka_part
from streams.core.mux.ids import composite_decode
from streams.edge.authorization.admission import stream_admit
from streams.edge.http.request import StreamRequest
from streams.edge.runtime import WorkerRuntime
from streams.edge.streaming.kafka_stream import hub_stream_open
from streams.edge.streaming.proxy_stream import RelayedStream, upstream_join
from streams.edge.streaming.routeset import Member, RouteSet


async def members_open(runtime: WorkerRuntime, routes: RouteSet, request: StreamRequest, started: float) -> RouteSet:
    """Admit and open every member (in order); on a refusal, release those already open and raise it."""
    try:
        parts = last_parts(routes, request)
        for member, part in zip(routes.members, parts, strict=True):
            member.source = None
            try:
                await member_open(runtime, member, request, started, part)
            except StreamError as error:
                member.refusal(error)
                raise
    except BaseException:
        routes.sources_detach()
        raise
    return routes


def last_parts(routes: RouteSet, request: StreamRequest) -> list[bytes | None]:
    """Each member's part of the composite last event id (None: a route's own stream reads its own)."""
    if not routes.multiplexed:
        return [None]
    raw = request.last_event_id_raw()
    if raw is None:
        return [b""] * len(routes.members)
    try:
        return list(composite_decode(raw, len(routes.members)))
    except EventIdError as exc:
        raise InvalidLastEventId(str(exc)) from exc


async def member_open(
    runtime: WorkerRuntime, member: Member, request: StreamRequest, started: float, part: bytes | None
) -> None:
    """Admit ``member`` and open its source from ``part`` (None: from the request's own last event id)."""
    route = member.route
    member.principal = await stream_admit(route, request.scope, request.query)
    if member.is_proxy:
        last_text = request.last_event_id_raw() if part is None else part.decode("utf-8", "replace") or None
        if part is None and request.method == "HEAD":
            return  # a route's own HEAD is answered without its upstream
        upstream, sub = await upstream_join(runtime.upstreams(), route, last_text)
        member.source = RelayedStream(route, upstream, sub)
        member.start = part or b""
        return
    if part is None:
        last = request.last_event_id()
    elif part:
        try:
            last = EventId(progress=progress_from_bytes(part))
        except EventIdError as exc:
            raise InvalidLastEventId(f"its position in the id: {exc}") from exc
    else:
        last = None
    try:
        stream = await hub_stream_open(
            runtime,
            route,
            member.params,
            request,
            started,
            member.principal,
            last,
            awaited=member.topic_awaited,
            multiplexed=member.spec is not None,
        )
    except UnknownTopic as error:
        member.topic_awaited = error.configured  # held for it (streams.edge.streaming.unavailable), then tried again
        raise
    assert stream.plan is not None
    member.source = stream
    member.start = kafka_part(progress_encode(stream.plan.positions))

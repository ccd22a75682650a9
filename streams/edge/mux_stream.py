"""Several routes' streams as one response: ``GET /streams?s=alias:/path&s=...`` (docs/multiplexing.md).

Each member is opened as its route would open it (admission, start plan or
upstream join) before the response starts, so any refusal is a status and a JSON
body naming the member. Then :class:`MuxStream` attaches every member to one
connection through a :class:`MemberSink` that relabels its frames and folds its
ids into the composite id. The members share the connection, its pending-bytes
bound, its per-address slot and one token deadline; a member that live
reconfiguration refuses ends alone, with an ``ended`` event.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from guards.verification import Principal
from streams.core.asgi import Receive, Send
from streams.core.errors import (
    InvalidLastEventId,
    InvalidMembers,
    KafkaNotAvailable,
    MethodNotAllowed,
    ReauthorizationUnavailable,
    StreamError,
    UnknownRoute,
)
from streams.core.ids import EventId, EventIdError, progress_encode, progress_from_bytes
from streams.core.mux.frames import MuxFramer, PartOf, kafka_part, proxy_part
from streams.core.mux.ids import composite_decode
from streams.core.mux.members import MemberError, MemberSpec, members_parse
from streams.core.routes import RouteSpec
from streams.edge.access import refusal_reason
from streams.edge.admission import stream_admit
from streams.edge.challenge import deadlines_register
from streams.edge.cors import cors_headers, is_preflight, preflight_headers
from streams.edge.counters import (
    admission_refusals,
    challenges_answered,
    challenges_sent,
    multiplexed_members,
    multiplexed_streams,
)
from streams.edge.kafka_stream import HubStream, hub_stream_open
from streams.edge.proxy_stream import RelayedStream, upstream_join
from streams.edge.reauthorization import CHALLENGE_CONTENT_TYPE, CHALLENGE_FRAME, NotPublished, StreamDeadline
from streams.edge.request import STREAM_METHODS, StreamRequest
from streams.edge.responses import empty_answer, send_error, send_with_headers, stream_finish, stream_start
from streams.edge.runtime import reauthorization_bus
from streams.edge.stream import CUT_SLOW, StreamSource, Watched, stream_serve
from streams.edge.teardown import future_then, stream_teardown
from streams.edge.unavailable import stream_hold, temporary
from streams.fanout.sinks import Sink
from streams.selectors import route_table

MUX_PATH = "/streams"
SSE_PROXY = "sse-proxy"
# Reasons that end one member and let the others go on: the member is not for this client any more.
MEMBER_ALONE = frozenset({"unauthorized", "route_removed"})
# Deadlines of several guarded members fire together: one challenge event for them all.
_CHALLENGE_GAP_SECONDS = 1.0


@dataclass(eq=False)
class Member:
    """One member of a multiplexed stream: what the request named, the route that serves it."""

    spec: MemberSpec
    route: RouteSpec
    params: dict[str, str]
    principal: Principal | None = None
    source: StreamSource | None = None
    start: bytes = b""  # its composite part before it sends an id

    @property
    def is_proxy(self) -> bool:
        return self.route.kind == SSE_PROXY

    def refusal(self, error: StreamError) -> StreamError:
        return error.for_member(self.spec.alias, self.spec.path)


class MemberSink:
    """One member's :class:`Sink`: its frames go, relabelled, to the shared connection."""

    __slots__ = ("_mux", "_index")

    def __init__(self, mux: MuxStream, index: int) -> None:
        self._mux = mux
        self._index = index

    @property
    def limit(self) -> int:
        return self._mux.sink.limit

    @limit.setter
    def limit(self, value: int) -> None:
        self._mux.sink.limit = value

    @property
    def last_write(self) -> float:
        """The connection's: one member's event keeps every member's heartbeat away."""
        return self._mux.sink.last_write

    @last_write.setter
    def last_write(self, value: float) -> None:
        self._mux.sink.last_write = value

    def write(self, data: bytes) -> bool:
        return self._mux.member_write(self._index, data)

    async def writable(self) -> None:
        await self._mux.sink.writable()

    def pending(self) -> int:
        return self._mux.sink.pending()

    def congested(self) -> bool:
        return self._mux.sink.congested()

    def abort(self) -> None:
        self._mux.sink.abort()


class MuxStream:
    """A :class:`~streams.edge.stream.StreamSource` over the members' own sources."""

    def __init__(self, members: Sequence[Member], retry_ms: int) -> None:
        self.members = list(members)
        self.retry_ms = retry_ms
        part_of: list[PartOf] = [proxy_part if m.is_proxy else kafka_part for m in members]
        self.framer = MuxFramer([m.spec.alias for m in members], part_of, [m.start for m in members])
        self.closed: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.close_reason: str | None = None
        self.ended: set[int] = set()
        self._sink: Sink | None = None
        self._challenged = 0.0

    @property
    def sink(self) -> Sink:
        assert self._sink is not None
        return self._sink

    def on_closed(self, callback: Callable[[], object]) -> None:
        future_then(self.closed, callback)

    def sources(self) -> list[StreamSource]:
        return [m.source for m in self.members if m.source is not None]

    def attach(self, sink: Sink) -> None:
        self._sink = sink
        multiplexed_streams.inc()
        multiplexed_members.inc(len(self.members))
        if not sink.write(self.framer.preamble(self.retry_ms)):
            self.end(CUT_SLOW)
            return
        for index, member in enumerate(self.members):
            assert member.source is not None
            member.source.attach(MemberSink(self, index))
            member.source.closed.add_done_callback(functools.partial(self._member_closed, index))
            if self.closed.done():
                return

    def member_write(self, index: int, data: bytes) -> bool:
        if index in self.ended or self.closed.done():
            return True
        frames = self.framer.frames(index, data)
        return self.sink.write(frames) if frames else True

    def _member_closed(self, index: int, done: asyncio.Future[str]) -> None:
        if self.closed.done() or index in self.ended:
            return
        reason = done.result()
        if reason not in MEMBER_ALONE:
            self.end(reason)  # as it would end a single route's stream: the client comes back for all
            return
        self.ended.add(index)
        self.sink.write(self.framer.ended(index, reason))
        if len(self.ended) == len(self.members):
            self.end("ended")

    def end(self, reason: str) -> None:
        if self.closed.done():
            return
        self.close_reason = reason
        self.closed.set_result(reason)
        for source in self.sources():
            source.end(reason)

    def challenge(self) -> None:
        now = time.monotonic()
        if self.closed.done() or now - self._challenged < _CHALLENGE_GAP_SECONDS:
            return
        self._challenged = now
        for member in self.members:
            if member.route.guard is not None:
                challenges_sent.labels(member.route.pattern.source).inc()
        if not self.sink.write(CHALLENGE_FRAME):
            self.end(CUT_SLOW)

    def detach(self) -> None:
        for source in self.sources():
            source.detach()
        if self._sink is not None:
            multiplexed_streams.dec()
            multiplexed_members.dec(len(self.members))


@dataclass
class MuxRequest:
    """A multiplexed request with its members resolved to routes (nothing opened yet)."""

    request: StreamRequest
    members: list[Member] = field(default_factory=list)

    @property
    def routes(self) -> list[RouteSpec]:
        return [m.route for m in self.members]

    @property
    def allow_origins(self) -> tuple[str, ...]:
        """The origins every member allows (``*`` only if all allow any)."""
        sets = [tuple(route.allow_origins) for route in self.routes]
        if all("*" in origins for origins in sets):
            return ("*",)
        explicit = [set(o.rstrip("/") for o in origins) for origins in sets if "*" not in origins]
        return tuple(sorted(set.intersection(*explicit))) if explicit else ()

    @property
    def allow_credentials(self) -> bool:
        return all(route.allow_credentials for route in self.routes)

    @property
    def guarded(self) -> bool:
        return any(route.guard is not None for route in self.routes)


async def mux_resolve(request: StreamRequest) -> MuxRequest:
    """The members the ``s`` parameters name, each with its route; 400 or 404 naming the member."""
    try:
        specs = members_parse(request.query.get("s", []))
    except MemberError as exc:
        raise InvalidMembers(str(exc)) from exc
    table = await route_table()
    resolved = MuxRequest(request)
    for spec in specs:
        found = table.match(spec.path)
        if found is None:
            raise UnknownRoute("no stream route serves this path").for_member(spec.alias, spec.path)
        route, params = found
        resolved.members.append(Member(spec, route, params))
    return resolved


async def mux_app(request: StreamRequest, receive: Receive, send: Send) -> None:
    """Serve one request of ``/streams``: preflight, challenge response, or the multiplexed stream."""
    try:
        mux = await mux_resolve(request)
    except StreamError as error:
        await send_error(send, error)
        return
    if request.method == "OPTIONS":
        await mux_options(mux, send)
        return
    send = send_with_headers(send, cors_headers(request.scope, mux.allow_origins, mux.allow_credentials))
    if request.method == "POST" and mux.guarded and request.content_type == CHALLENGE_CONTENT_TYPE:
        await mux_challenge_answer(mux, send)
    else:
        await mux_stream(mux, receive, send)


def mux_methods(mux: MuxRequest) -> tuple[str, ...]:
    return (*STREAM_METHODS, "POST") if mux.guarded else STREAM_METHODS


async def mux_options(mux: MuxRequest, send: Send) -> None:
    methods = mux_methods(mux)
    if is_preflight(mux.request.scope):
        try:
            headers = preflight_headers(mux.request.scope, mux.allow_origins, mux.allow_credentials, methods)
        except StreamError as error:
            await send_error(send, error)
            return
    else:
        headers = [(b"allow", ", ".join((*methods, "OPTIONS")).encode())]
    await empty_answer(send, 204, headers)


async def mux_stream(mux: MuxRequest, receive: Receive, send: Send) -> None:
    request = mux.request
    started = time.monotonic()
    try:
        if request.method not in STREAM_METHODS:
            allow = ", ".join(mux_methods(mux)).encode()
            raise MethodNotAllowed(f"{request.method} is not allowed on a stream", headers=[(b"allow", allow)])
        await mux_open(mux, started)
    except StreamError as error:
        if isinstance(error, KafkaNotAvailable) and temporary(error, request):
            retry_ms = max(m.route.retry_ms or 0 for m in mux.members)
            heartbeat = min(m.route.heartbeat_seconds for m in mux.members)
            held = await stream_hold(request, receive, send, error, lambda: mux_open(mux, started), heartbeat)
            if held is not None:
                await mux_respond(mux, receive, send, retry_ms, head_sent=True)
            return
        for member in mux.members:
            if error.member == member.spec.alias:
                admission_refusals.labels(member.route.pattern.source, refusal_reason(error)).inc()
        await send_error(send, error)
        return
    retry_ms = max(m.route.retry_ms or 0 for m in mux.members)
    await mux_respond(mux, receive, send, retry_ms)


async def mux_open(mux: MuxRequest, started: float) -> MuxRequest:
    """Admit and open every member (in order); on a refusal, release those already open and raise it."""
    request = mux.request
    try:
        parts = mux_last_parts(request, len(mux.members))
        for member, part in zip(mux.members, parts, strict=True):
            member.source = None
            try:
                await member_open(member, request, started, part)
            except StreamError as error:
                member.refusal(error)
                raise
    except BaseException:
        for member in mux.members:
            if member.source is not None:
                member.source.detach()
                member.source = None
        raise
    return mux


def mux_last_parts(request: StreamRequest, count: int) -> list[bytes]:
    raw = request.last_event_id_raw()
    if raw is None:
        return [b""] * count
    try:
        return composite_decode(raw, count)
    except EventIdError as exc:
        raise InvalidLastEventId(str(exc)) from exc


async def member_open(member: Member, request: StreamRequest, started: float, part: bytes) -> None:
    """Admit ``member`` and open its source from its composite ``part``."""
    route = member.route
    member.principal = await stream_admit(route, request.scope, request.query)
    if member.is_proxy:
        last_text = part.decode("utf-8", "replace") if part else None
        upstream, sub = await upstream_join(route, last_text)
        member.source = RelayedStream(route, upstream, sub)
        member.start = part
        return
    last = None
    if part:
        try:
            last = EventId(progress=progress_from_bytes(part))
        except EventIdError as exc:
            raise InvalidLastEventId(f"its position in the id: {exc}") from exc
    stream: HubStream = await hub_stream_open(route, member.params, request, started, member.principal, last)
    assert stream.plan is not None
    member.source = stream
    member.start = kafka_part(progress_encode(stream.plan.positions))


async def mux_respond(mux: MuxRequest, receive: Receive, send: Send, retry_ms: int, *, head_sent: bool = False) -> None:
    if mux.request.method == "HEAD":
        for member in mux.members:
            if member.source is not None:
                member.source.detach()
        if not head_sent:
            await stream_start(send)
        await stream_finish(send)
        return
    stream = MuxStream(mux.members, retry_ms)
    deadlines = mux_deadlines(mux.members)
    await deadlines_register(deadlines, stream_teardown(mux.request.scope))
    await stream_serve(
        mux.request,
        receive,
        send,
        stream,
        deadlines,
        limit=max(m.route.max_pending_bytes for m in mux.members),
        watched=[Watched(m.route, m.source.end) for m in mux.members if m.source is not None],
        head_sent=head_sent,
    )


def mux_deadlines(members: Sequence[Member]) -> list[StreamDeadline]:
    """One deadline per guard and identity among the guarded members; each ends the whole stream."""
    grouped: dict[tuple[str, str], tuple[set[str], float, int]] = {}
    for member in members:
        principal, guard = member.principal, member.route.guard
        if principal is None or guard is None or not principal.expires:
            continue
        key = (principal.guard, principal.identity)
        roles, expires, challenge = grouped.get(key, (set(), float(principal.expires), 0))
        roles |= set(member.route.roles)
        if guard.challenge > 0:
            challenge = min(challenge, guard.challenge) if challenge else guard.challenge
        grouped[key] = (roles, min(expires, float(principal.expires)), challenge)
    return [
        StreamDeadline(guard=guard, identity=identity, roles=roles, expires=expires, challenge=challenge)
        for (guard, identity), (roles, expires, challenge) in grouped.items()
    ]


async def mux_challenge_answer(mux: MuxRequest, send: Send) -> None:
    """A fresh token that admits every guarded member moves the whole stream's deadline (204)."""
    request = mux.request
    guarded = [m for m in mux.members if m.route.guard is not None]
    principals: dict[tuple[str, str], Principal] = {}
    for member in guarded:
        try:
            principal = await stream_admit(member.route, request.scope, request.query)
        except StreamError as error:
            challenges_answered.labels(member.route.pattern.source, "refused").inc()
            await send_error(send, member.refusal(error))
            return
        assert principal is not None
        principals[(principal.guard, principal.identity)] = principal
    bus = reauthorization_bus()
    try:
        for principal in principals.values():
            await bus.stream_reauthorize(
                guard=principal.guard,
                identity=principal.identity,
                roles=principal.roles,
                expires=float(principal.expires),
            )
    except NotPublished:
        for member in guarded:
            challenges_answered.labels(member.route.pattern.source, "unpublished").inc()
        refused = ReauthorizationUnavailable(
            "the new token could not be passed to every worker; send it again", headers=[(b"retry-after", b"1")]
        )
        await send_error(send, refused)
        return
    for member in guarded:
        challenges_answered.labels(member.route.pattern.source, "accepted").inc()
    await empty_answer(send, 204, [(b"cache-control", b"no-store")])

"""The stream app: a thin ASGI layer between an HTTP request and the topic hub (or an upstream).

Parse the request, find the route, resolve its topic and filters, ask the hub
for a start position, write the response head, subscribe, and unsubscribe in
``finally`` however the stream ends. ``sse-proxy`` routes join a shared
upstream connection (``streams.proxy.upstream``) instead of a hub; ``OPTIONS`` and the
CORS headers of every answer come from the route (``streams.edge.cors``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from guards.verification import Principal
from streams.core.errors import (
    InvalidLastEventId,
    InvalidParameter,
    InvalidSince,
    KafkaNotAvailable,
    MethodNotAllowed,
    ReauthorizationUnavailable,
    StreamError,
    UnknownTopic,
    UpstreamNotAvailable,
    UpstreamRefused,
)
from streams.core.ids import MAX_EVENT_ID_BYTES, EventId, EventIdError, event_id_parse
from streams.core.routes import RouteSpec
from streams.core.sse import CONTENT_TYPE
from streams.core.templating import ExpansionContext, TemplateError
from streams.edge.admission import client_address, stream_admit
from streams.edge.cors import cors_headers, is_preflight, preflight_headers
from streams.edge.counters import admission_refusals, challenges_answered, challenges_sent
from streams.edge.limits import stream_limited
from streams.edge.reauthorization import CHALLENGE_CONTENT_TYPE, CHALLENGE_FRAME, NotPublished, StreamDeadline
from streams.edge.reconfiguration import OpenStream
from streams.edge.runtime import config_bus, hub_registry, proxy_registry, reauthorization_bus
from streams.fanout.hub import PositionError, StartPlan, Subscriber, TopicHub
from streams.fanout.kafka import KafkaUnavailable, TopicNotFound
from streams.fanout.sinks import FlowSink, QueueSink, Sink
from streams.proxy.upstream import ProxySubscriber, Upstream, UpstreamError, heartbeats_write
from streams.selectors import route_table, topic_settings_async

if TYPE_CHECKING:
    from streams.server.flow import RequestFlow

logger = logging.getLogger("sluice.streams")
access_logger = logging.getLogger("sluice.access")

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

STREAM_METHODS = ("GET", "HEAD")
# The close reason of a stream whose client went away.
CLIENT_GONE = "client"
# A guarded route also takes the challenge response (SPEC 4.3).
GUARDED_METHODS = (*STREAM_METHODS, "POST")
SSE_PROXY = "sse-proxy"
STREAM_HEADERS = [
    (b"content-type", CONTENT_TYPE),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


class StreamRouter:
    """ASGI app: stream routes go to :class:`StreamConsumer`, everything else to ``fallback``."""

    def __init__(self, fallback: Callable[..., Awaitable[None]]) -> None:
        self.fallback = fallback

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await config_bus().start()  # from the first request on, this process hears configuration changes
            found = (await route_table()).match(scope["path"])
            if found is not None:
                route, params = found
                await stream_limited(StreamConsumer(route, params), scope, receive, send)
                return
        await self.fallback(scope, receive, send)


def last_event_id_raw(scope: Scope, query: dict[str, list[str]]) -> str | None:
    """``Last-Event-ID`` header, else the ``lastEventId`` query parameter (SPEC 1), as text; None if empty."""
    raw: str | None = None
    for name, value in scope.get("headers", []):
        if name == b"last-event-id" and value:
            if len(value) > MAX_EVENT_ID_BYTES:
                raise InvalidLastEventId(f"Last-Event-ID is longer than {MAX_EVENT_ID_BYTES} bytes")
            raw = value.decode("utf-8", "replace")
            break
    # An empty header (a client with no id yet) falls back to the query parameter.
    if raw is None and "lastEventId" in query:
        raw = query["lastEventId"][0]
        if len(raw.encode("utf-8")) > MAX_EVENT_ID_BYTES:
            raise InvalidLastEventId(f"lastEventId is longer than {MAX_EVENT_ID_BYTES} bytes")
    if raw is not None and any(c in raw for c in "\r\n\x00"):
        # No id holds these (SPEC 1), and a proxy route would pass it on as a header.
        raise InvalidLastEventId("a last event id cannot hold CR, LF or NUL")
    return raw or None


def last_event_id_read(scope: Scope, query: dict[str, list[str]]) -> EventId | None:
    """The last event id of a Kafka route, parsed (SPEC 2.2)."""
    raw = last_event_id_raw(scope, query)
    if raw is None:
        return None
    try:
        return event_id_parse(raw)
    except EventIdError as exc:
        raise InvalidLastEventId(str(exc)) from exc


def since_parse(text: str) -> int:
    """``since`` as epoch milliseconds: ISO-8601 (naive means UTC) or epoch ms."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise InvalidSince(f"since={text!r} is neither ISO-8601 nor epoch milliseconds") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def content_type(scope: Scope) -> str:
    """The request's media type, lower case, without parameters."""
    for name, value in scope.get("headers", []):
        if name == b"content-type":
            return value.decode("latin-1").split(";", 1)[0].strip().lower()
    return ""


def access_log(
    event: str,
    route: RouteSpec,
    scope: Scope,
    status: int,
    started: float,
    sub: Subscriber | None = None,
    reason: str | None = None,
) -> None:
    """One JSON line on ``sluice.access`` (the path without its query string: credentials may ride there)."""
    entry: dict[str, Any] = {
        "event": event,
        "route": route.pattern.source,
        "path": scope.get("path", ""),
        "method": scope.get("method", ""),
        "status": status,
        "duration": round(time.monotonic() - started, 3),
        "events": sub.events if sub is not None else 0,
        "bytes": sub.bytes if sub is not None else 0,
        "client": client_address(scope),
    }
    if reason is not None:
        entry["reason"] = reason
    access_logger.info(json.dumps(entry, separators=(",", ":")))


def refusal_reason(error: StreamError) -> str:
    return getattr(error, "reason", None) or error.code


def send_with_headers(send: Send, extra: list[tuple[bytes, bytes]]) -> Send:
    """``send``, adding ``extra`` to the response head (the route's CORS headers on every answer)."""
    if not extra:
        return send

    async def sending(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *extra]}
        await send(message)

    return sending


async def send_error(send: Send, error: StreamError) -> None:
    body = error.body()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"),
        *error.headers,
    ]
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class StreamConsumer:
    """Serves one request on one route."""

    def __init__(self, route: RouteSpec, params: dict[str, str]) -> None:
        self.route = route
        self.params = params

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = self.route
        if scope["method"] == "OPTIONS":
            await self._options(scope, send)
            return
        send = send_with_headers(send, cors_headers(scope, route.allow_origins, route.allow_credentials))
        if scope["method"] == "POST" and route.guard is not None and content_type(scope) == CHALLENGE_CONTENT_TYPE:
            await self._reauthorize(scope, send)
            return
        started = time.monotonic()
        if route.kind == SSE_PROXY:
            await self._proxy(scope, receive, send)
            return
        try:
            hub, plan, subscriber_args, principal = await self._prepare(scope)
        except StreamError as error:
            reason = refusal_reason(error)
            admission_refusals.labels(self.route.pattern.source, reason).inc()
            access_log("refused", self.route, scope, error.status, started, reason=reason)
            await send_error(send, error)
            return
        deadline = self._deadline(principal) if scope["method"] == "GET" else None
        if deadline is None:
            await self._stream(scope, receive, send, hub, plan, subscriber_args, None, started)
            return
        bus = reauthorization_bus()
        # Registered before the response starts: once a client sees 200, a challenge response reaches this stream.
        await bus.stream_open(deadline)
        try:
            await self._stream(scope, receive, send, hub, plan, subscriber_args, deadline, started)
        finally:
            bus.stream_close(deadline)

    def _deadline(self, principal: Principal | None) -> StreamDeadline | None:
        if principal is None or not principal.expires or self.route.guard is None:
            return None
        return StreamDeadline(
            guard=principal.guard,
            identity=principal.identity,
            roles=self.route.roles,
            expires=float(principal.expires),
            challenge=self.route.guard.challenge,
        )

    async def _stream(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        hub: TopicHub,
        plan: StartPlan,
        subscriber_args: dict[str, Any],
        deadline: StreamDeadline | None,
        started: float,
    ) -> None:
        route = self.route
        await send({"type": "http.response.start", "status": 200, "headers": STREAM_HEADERS})
        if scope["method"] == "HEAD":
            await send({"type": "http.response.body", "body": b""})
            return
        flow = scope.get("extensions", {}).get("sluice.flow")
        sink: Sink = FlowSink(flow, route.max_pending_bytes) if flow else QueueSink(send, route.max_pending_bytes)
        sub = Subscriber(sink, heartbeat_seconds=route.heartbeat_seconds, **subscriber_args)
        disconnected = False
        access_log("open", route, scope, 200, started)
        hub.subscribe(sub, plan, route.retry_ms)
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        # A change of this route (disabled, deleted, guard tightened) may end the stream (live reconfiguration).
        open_stream = OpenStream(route, scope, query, end=lambda reason: self._end(hub, sub, reason))
        open_streams = config_bus().streams
        open_streams.add(open_stream)
        # A guarded stream ends when its token expires (nothing after exp is delivered),
        # unless a challenge response moves the deadline first.
        if deadline is not None:
            deadline.start(on_challenge=lambda: self._challenge(sub), on_expire=lambda: self._expire(hub, sub))
        try:
            disconnected = await self._wait_until_over(receive, sub.closed, sub.end, flow)
        finally:
            open_streams.remove(open_stream)
            if deadline is not None:
                deadline.cancel()
            hub.unsubscribe(sub)
            if flow is not None:
                flow.release()
            access_log("close", route, scope, 200, started, sub, reason=sub.close_reason or CLIENT_GONE)
        if not disconnected and sub.close_reason != "slow":
            if isinstance(sink, QueueSink):
                await sink.close()
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    def _methods(self) -> tuple[str, ...]:
        return GUARDED_METHODS if self.route.guard is not None else STREAM_METHODS

    def _method_check(self, scope: Scope) -> None:
        if scope["method"] not in STREAM_METHODS:
            raise MethodNotAllowed(
                f"{scope['method']} is not allowed on a stream",
                headers=[(b"allow", ", ".join(self._methods()).encode())],
            )

    async def _options(self, scope: Scope, send: Send) -> None:
        """A CORS preflight for the stream GET or the challenge-response POST; else the allowed methods."""
        route = self.route
        if is_preflight(scope):
            try:
                headers = preflight_headers(scope, route.allow_origins, route.allow_credentials, self._methods())
            except StreamError as error:
                await send_error(send, error)
                return
        else:
            headers = [(b"allow", ", ".join((*self._methods(), "OPTIONS")).encode())]
        await send({"type": "http.response.start", "status": 204, "headers": headers})
        await send({"type": "http.response.body", "body": b""})

    async def _proxy(self, scope: Scope, receive: Receive, send: Send) -> None:
        """An ``sse-proxy`` route: admit, join (or open) the upstream, relay until either side ends (SPEC 3)."""
        route = self.route
        try:
            self._method_check(scope)
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
            principal = await stream_admit(route, scope, query)
            last = last_event_id_raw(scope, query)
            if scope["method"] == "HEAD":
                await send({"type": "http.response.start", "status": 200, "headers": STREAM_HEADERS})
                await send({"type": "http.response.body", "body": b""})
                return
            try:
                upstream, sub = await proxy_registry().subscribe(
                    route.upstream, last, retry_ms=route.retry_ms, limit=route.max_pending_bytes, schema=route.schema
                )
            except UpstreamError as exc:
                logger.warning("proxy stream on %s refused: %s", route.pattern.source, exc.detail)
                if exc.refused and exc.status is not None:
                    raise UpstreamRefused(exc.detail, upstream_status=exc.status) from exc
                raise UpstreamNotAvailable(
                    exc.detail, upstream_status=exc.status, headers=[(b"retry-after", b"5")]
                ) from exc
        except StreamError as error:
            await send_error(send, error)
            return
        deadline = self._deadline(principal)
        if deadline is None:
            await self._relay(scope, receive, send, upstream, sub, None)
            return
        bus = reauthorization_bus()
        try:
            await bus.stream_open(deadline)
        except BaseException:
            upstream.unsubscribe(sub)
            raise
        try:
            await self._relay(scope, receive, send, upstream, sub, deadline)
        finally:
            bus.stream_close(deadline)

    async def _relay(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        upstream: Upstream,
        sub: ProxySubscriber,
        deadline: StreamDeadline | None,
    ) -> None:
        route = self.route
        flow = scope.get("extensions", {}).get("sluice.flow")
        disconnected = False
        beats: asyncio.Task[None] | None = None
        sink: Sink | None = None
        open_stream: OpenStream | None = None
        try:
            await send({"type": "http.response.start", "status": 200, "headers": STREAM_HEADERS})
            sink = FlowSink(flow, route.max_pending_bytes) if flow else QueueSink(send, route.max_pending_bytes)
            upstream.attach(sub, sink)
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
            open_stream = OpenStream(route, scope, query, end=lambda reason: self._proxy_end(upstream, sub, reason))
            config_bus().streams.add(open_stream)
            beats = asyncio.ensure_future(heartbeats_write(upstream, sub, route.heartbeat_seconds))
            if deadline is not None:

                def challenge() -> None:
                    if not sub.closed.done() and not sub.write(CHALLENGE_FRAME):
                        upstream.cut(sub)

                deadline.start(on_challenge=challenge, on_expire=lambda: self._proxy_end(upstream, sub, "expired"))
            disconnected = await self._wait_until_over(receive, sub.closed, sub.end, flow)
        finally:
            if open_stream is not None:
                config_bus().streams.remove(open_stream)
            if deadline is not None:
                deadline.cancel()
            if beats is not None:
                beats.cancel()
            upstream.unsubscribe(sub)
            if flow is not None:
                flow.release()
        if not disconnected and sub.close_reason != "slow":
            if isinstance(sink, QueueSink):
                await sink.close()
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    @staticmethod
    def _proxy_end(upstream: Upstream, sub: ProxySubscriber, reason: str) -> None:
        upstream.unsubscribe(sub)
        sub.end(reason)

    async def _reauthorize(self, scope: Scope, send: Send) -> None:
        """The challenge response: a valid token for this route moves its holder's deadlines (SPEC 4.3)."""
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        try:
            principal = await stream_admit(self.route, scope, query)
        except StreamError as error:
            challenges_answered.labels(self.route.pattern.source, "refused").inc()
            await send_error(send, error)
            return
        assert principal is not None  # a guarded route admits a principal or raises
        try:
            await reauthorization_bus().stream_reauthorize(
                guard=principal.guard,
                identity=principal.identity,
                roles=principal.roles,
                expires=float(principal.expires),
            )
        except NotPublished:
            challenges_answered.labels(self.route.pattern.source, "unpublished").inc()
            refused = ReauthorizationUnavailable(
                "the new token could not be passed to every worker; send it again",
                headers=[(b"retry-after", b"1")],
            )
            await send_error(send, refused)
            return
        challenges_answered.labels(self.route.pattern.source, "accepted").inc()
        await send({"type": "http.response.start", "status": 204, "headers": [(b"cache-control", b"no-store")]})
        await send({"type": "http.response.body", "body": b""})

    def _challenge(self, sub: Subscriber) -> None:
        if not sub.closed.done():
            challenges_sent.labels(self.route.pattern.source).inc()
            sub.sink.write(CHALLENGE_FRAME)

    @staticmethod
    def _expire(hub: TopicHub, sub: Subscriber) -> None:
        StreamConsumer._end(hub, sub, "expired")

    @staticmethod
    def _end(hub: TopicHub, sub: Subscriber, reason: str) -> None:
        hub.unsubscribe(sub)
        sub.end(reason)

    async def _prepare(self, scope: Scope) -> tuple[TopicHub, StartPlan, dict[str, Any], Principal | None]:
        """Everything that can refuse the request, before the response starts; the admitted principal, if any."""
        route = self.route
        self._method_check(scope)
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        principal = await stream_admit(route, scope, query)
        last = last_event_id_read(scope, query)
        since_ms: int | None = None
        if "since" in query:
            if not route.allow_since:
                raise InvalidSince("this route does not accept since")
            since_ms = since_parse(query["since"][0])
        try:
            context = (
                ExpansionContext(self.params, identity=principal.identity, attributes=principal.attributes)
                if principal is not None
                else ExpansionContext(self.params)
            )
            topic, filters = route.resolve(context)
        except TemplateError as exc:
            raise InvalidParameter(str(exc)) from exc
        try:
            limits, schema = await topic_settings_async(topic)
            hub = await hub_registry().hub(topic, limits, schema)
            plan = await hub.plan(last=last, initial=route.initial, since_ms=since_ms)
        except TopicNotFound as exc:
            raise UnknownTopic(f"topic {topic!r} does not exist") from exc
        except KafkaUnavailable as exc:
            logger.warning("stream on %s refused: kafka unavailable (%s)", topic, exc)
            raise KafkaNotAvailable("Kafka did not answer in time", headers=[(b"retry-after", b"5")]) from exc
        except PositionError as exc:
            raise InvalidLastEventId(str(exc)) from exc
        subscriber_args = {
            "filters": filters,
            "form": route.event_id,
            "binary": route.binary,
            "schema": route.schema,
            "route": route.pattern.source,
        }
        return hub, plan, subscriber_args, principal

    @staticmethod
    async def _wait_until_over(
        receive: Receive, closed: asyncio.Future[str], end: Callable[[str], None], flow: RequestFlow | None
    ) -> bool:
        """Wait for the client to leave or the hub (or upstream) to end the stream; True if the client left.

        On daphne the request says when its client goes (no task per stream); any other
        server is asked through ``receive`` in a task of its own.
        """
        if flow is not None:
            flow.on_gone(lambda: end(CLIENT_GONE))
            return await closed == CLIENT_GONE

        async def client_gone() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass

        gone = asyncio.ensure_future(client_gone())
        try:
            waiters: list[asyncio.Future[Any]] = [gone, closed]
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
        return not closed.done()

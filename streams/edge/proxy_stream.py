"""A relayed upstream SSE stream (``sse-proxy`` routes, SPEC 3): admit, join the upstream, relay."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from functools import partial

from streams.core.asgi import Receive, Send
from streams.core.errors import StreamError, UpstreamNotAvailable, UpstreamRefused
from streams.core.routes import RouteSpec
from streams.edge.admission import stream_admit
from streams.edge.reauthorization import CHALLENGE_FRAME
from streams.edge.request import StreamRequest
from streams.edge.responses import send_error, stream_finish, stream_start
from streams.edge.runtime import process_upstreams
from streams.edge.stream import route_serve
from streams.edge.teardown import future_then, stream_teardown
from streams.fanout.sinks import Sink
from streams.proxy.upstream import ProxySubscriber, Upstream, UpstreamError

logger = logging.getLogger("sluice.streams")


class RelayedStream:
    """A :class:`~streams.edge.stream.StreamSource` over one subscriber of a shared upstream."""

    def __init__(self, route: RouteSpec, upstream: Upstream, sub: ProxySubscriber) -> None:
        self.route = route
        self.upstream = upstream
        self.sub = sub

    @property
    def closed(self) -> asyncio.Future[str]:
        return self.sub.closed

    @property
    def close_reason(self) -> str | None:
        return self.sub.close_reason

    def on_closed(self, callback: Callable[[], object]) -> None:
        future_then(self.sub.closed, callback)

    def attach(self, sink: Sink) -> None:
        self.upstream.attach(self.sub, sink)

    def end(self, reason: str) -> None:
        self.upstream.unsubscribe(self.sub)
        self.sub.end(reason)

    def challenge(self) -> None:
        if not self.sub.closed.done() and not self.sub.write(CHALLENGE_FRAME):
            self.upstream.cut(self.sub)

    def detach(self) -> None:
        self.upstream.unsubscribe(self.sub)


async def proxy_stream(route: RouteSpec, request: StreamRequest, receive: Receive, send: Send) -> None:
    """Serve one request of an ``sse-proxy`` route until either side ends."""
    try:
        request.method_check(route)
        principal = await stream_admit(route, request.scope, request.query)
        last = request.last_event_id_raw()
        if request.method == "HEAD":
            await stream_start(send)
            await stream_finish(send)
            return
        upstream, sub = await upstream_join(route, last)
    except StreamError as error:
        await send_error(send, error)
        return
    stream = RelayedStream(route, upstream, sub)
    # Deferred first, so it also runs when the token's deadline could not be registered.
    stream_teardown(request.scope).defer(partial(upstream.unsubscribe, sub))
    await route_serve(route, request, receive, send, stream, principal)


async def upstream_join(route: RouteSpec, last: str | None) -> tuple[Upstream, ProxySubscriber]:
    """Join (or open) the route's upstream from ``last``; a refusal names the upstream's answer."""
    try:
        return await process_upstreams().subscribe(
            route.upstream,
            last,
            retry_ms=route.retry_ms,
            limit=route.max_pending_bytes,
            schema=route.schema,
            heartbeat_seconds=route.heartbeat_seconds,
        )
    except UpstreamError as exc:
        logger.warning("proxy stream on %s refused: %s", route.pattern.source, exc.detail)
        if exc.refused and exc.status is not None:
            raise UpstreamRefused(exc.detail, upstream_status=exc.status) from exc
        raise UpstreamNotAvailable(exc.detail, upstream_status=exc.status, headers=[(b"retry-after", b"5")]) from exc

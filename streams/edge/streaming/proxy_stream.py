"""A relayed upstream SSE stream (``sse-proxy`` routes, SPEC 3): join the shared upstream, relay it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from streams.core.errors import UpstreamNotAvailable, UpstreamRefused
from streams.core.routes import RouteSpec
from streams.edge.authorization.reauthorization import CHALLENGE_FRAME
from streams.edge.streaming.source import future_then
from streams.fanout.sinks import Sink
from streams.proxy.upstream import ProxySubscriber, Upstream, UpstreamError, Upstreams

logger = logging.getLogger("sluice.streams")


class RelayedStream:
    """A :class:`~streams.edge.streaming.source.StreamSource` over one subscriber of a shared upstream."""

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


async def upstream_join(upstreams: Upstreams, route: RouteSpec, last: str | None) -> tuple[Upstream, ProxySubscriber]:
    """Join (or open) the route's upstream from ``last``; a refusal names the upstream's answer."""
    try:
        return await upstreams.subscribe(
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

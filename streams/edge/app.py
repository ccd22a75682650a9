"""The stream app: the ASGI entry that sends stream routes to their kind, everything else to Django.

``/streams`` serves several routes as one stream (:mod:`streams.edge.mux_stream`).
Each request of a route is one of four kinds: a CORS preflight (``OPTIONS``), a
challenge response (``POST`` on a guarded route), a relayed upstream stream
(``sse-proxy``) or a Kafka topic stream (``sse-kafka``). The route's CORS headers
go on every answer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from streams.core.asgi import Receive, Scope, Send
from streams.core.errors import StreamError
from streams.core.routes import RouteSpec
from streams.edge.challenge import challenge_answer
from streams.edge.cors import cors_headers, is_preflight, preflight_headers
from streams.edge.kafka_stream import kafka_stream
from streams.edge.limits import App, stream_limited
from streams.edge.mux_stream import MUX_PATH, mux_app
from streams.edge.proxy_stream import proxy_stream
from streams.edge.reauthorization import CHALLENGE_CONTENT_TYPE
from streams.edge.request import StreamRequest, route_methods
from streams.edge.responses import empty_answer, send_error, send_with_headers
from streams.edge.runtime import config_bus
from streams.edge.teardown import teardown_attach
from streams.selectors import route_table

SSE_PROXY = "sse-proxy"


class StreamRouter:
    """ASGI app: stream routes go to :class:`RouteApp`, everything else to ``fallback``."""

    def __init__(self, fallback: Callable[..., Awaitable[None]]) -> None:
        self.fallback = fallback

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await config_bus().start()  # from the first request on, this process hears configuration changes
            app = await stream_app(scope["path"])
            if app is not None:
                teardown = teardown_attach(scope)
                try:
                    await stream_limited(app, scope, receive, send)
                finally:
                    teardown.returned()
                return
        await self.fallback(scope, receive, send)


async def stream_app(path: str) -> App | None:
    """The app of a stream path: several routes (``/streams``) or one route; None for any other path."""
    if path == MUX_PATH:
        return mux_request_app
    found = (await route_table()).match(path)
    if found is None:
        return None
    route, params = found
    return RouteApp(route, params)


async def mux_request_app(scope: Scope, receive: Receive, send: Send) -> None:
    """Several routes in one stream (``/streams``)."""
    await mux_app(StreamRequest.of(scope), receive, send)


class RouteApp:
    """Serves one request on one route: picks its kind."""

    def __init__(self, route: RouteSpec, params: dict[str, str]) -> None:
        self.route = route
        self.params = params

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = self.route
        request = StreamRequest.of(scope)
        if request.method == "OPTIONS":
            await options_answer(route, request, send)
            return
        send = send_with_headers(send, cors_headers(scope, route.allow_origins, route.allow_credentials))
        if request.method == "POST" and route.guard is not None and request.content_type == CHALLENGE_CONTENT_TYPE:
            await challenge_answer(route, request, send)
        elif route.kind == SSE_PROXY:
            await proxy_stream(route, request, receive, send)
        else:
            await kafka_stream(route, self.params, request, receive, send)


async def options_answer(route: RouteSpec, request: StreamRequest, send: Send) -> None:
    """A CORS preflight for the stream GET or the challenge-response POST; else the allowed methods."""
    methods = route_methods(route)
    if is_preflight(request.scope):
        try:
            headers = preflight_headers(request.scope, route.allow_origins, route.allow_credentials, methods)
        except StreamError as error:
            await send_error(send, error)
            return
    else:
        headers = [(b"allow", ", ".join((*methods, "OPTIONS")).encode())]
    await empty_answer(send, 204, headers)

"""The stream app: the ASGI entry that sends stream paths to their lifecycle, everything else to Django.

A route's own path serves that route (a set of one); ``/streams`` serves the
routes its query names as one stream. Either way :func:`~streams.edge.lifecycle.stream_request`
answers it. The worker's :class:`~streams.edge.runtime.WorkerRuntime` is given
here and handed down; Django's views find it in their scope.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from streams.clusters import worker_default_cluster
from streams.core.asgi import Receive, Scope, Send
from streams.core.errors import DatabaseNotAvailable
from streams.core.routes import RouteSpec
from streams.edge.lifecycle import stream_request
from streams.edge.runtime import RUNTIME_KEY, WorkerRuntime
from streams.edge.streaming.routeset import MUX_PATH, RouteSet
from streams.models import reserved_endpoints
from streams.selectors import route_table


class StreamRouter:
    """ASGI app: stream paths go to :func:`~streams.edge.lifecycle.stream_request`, everything else to ``fallback``."""

    def __init__(self, fallback: Callable[..., Awaitable[None]], runtime: WorkerRuntime) -> None:
        self.fallback = fallback
        self.runtime = runtime
        self.reserved = reserved_endpoints()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self.runtime.config().start()  # from the first request on, this process hears configuration changes
            path = scope["path"]
            if path == MUX_PATH:
                await stream_request(self.runtime, scope, receive, send, None)
                return
            found = await self._route(path)
            if found is not None:
                await stream_request(self.runtime, scope, receive, send, RouteSet.one(*found))
                return
            # Django's views (/healthz, /readyz, /metrics) read the worker's runtime from their scope, and
            # the admin and the API see its default cluster (the embedded broker's, when it runs one).
            scope = {**scope, RUNTIME_KEY: self.runtime}
            cluster = worker_default_cluster.set(self.runtime.default_cluster)
            try:
                await self.fallback(scope, receive, send)
            finally:
                worker_default_cluster.reset(cluster)
            return
        await self.fallback(scope, receive, send)

    async def _route(self, path: str) -> tuple[RouteSpec, dict[str, str]] | None:
        """The route serving ``path``, if one does; Sluice's own endpoints never wait for the route table."""
        if self.reserved.endpoint(path) is not None:
            return None  # /healthz answers while the database is away or slow
        try:
            return (await route_table()).match(path)
        except DatabaseNotAvailable:
            return None  # no table read yet: Django's 404 answers 503 for it

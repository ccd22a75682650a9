"""Live reconfiguration: a saved change reaches every worker at once, and open streams follow it.

A configuration write (admin, API, ``applyconfig``) is broadcast on the channel
layer after its transaction commits. Every worker process listens once: it drops
its route table, builds the new one, and holds each open stream against it. A
stream whose route was disabled or deleted ends; a stream whose route's guard or
roles changed is admitted again with the credentials it opened with, and ends if
the new rules refuse it. Other changes (topic, filters) apply to new streams.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from streams.core.closing import CloseReason
from streams.core.errors import StreamError
from streams.core.routes import RouteSpec, RouteTable
from streams.edge.authorization.admission import stream_admit
from streams.edge.authorization.subscription import ChannelLayer, Subscription

logger = logging.getLogger("sluice.config")

CONFIG_GROUP = "sluice.config"
MESSAGE_TYPE = "sluice.config.changed"


@dataclass(eq=False, slots=True)
class OpenStream:
    """One open stream as reconfiguration sees it: its route, its request, and how to end it."""

    route: RouteSpec
    scope: dict[str, Any]
    query: dict[str, list[str]]
    end: Callable[[str], None]


def access_changed(old: RouteSpec, new: RouteSpec) -> bool:
    """Whether ``new`` may refuse a client ``old`` admitted (another guard, a changed guard, other roles)."""
    return old.guard_revision != new.guard_revision or old.roles != new.roles


class OpenStreams:
    """This process's open streams by route id."""

    def __init__(self) -> None:
        self._by_route: dict[int, dict[OpenStream, None]] = {}

    def add(self, stream: OpenStream) -> None:
        self._by_route.setdefault(stream.route.id, {})[stream] = None

    def remove(self, stream: OpenStream) -> None:
        streams = self._by_route.get(stream.route.id)
        if streams is not None:
            streams.pop(stream, None)
            if not streams:
                del self._by_route[stream.route.id]

    def __len__(self) -> int:
        return sum(len(streams) for streams in self._by_route.values())

    def streams(self) -> list[OpenStream]:
        """Every open stream's watch (a multiplexed stream has one per route; ending one ends it)."""
        return [stream for streams in self._by_route.values() for stream in streams]

    def end_all(self, reason: str) -> int:
        """End every open stream (the process is stopping); how many were ended."""
        ended = 0
        for streams in list(self._by_route.values()):
            for stream in list(streams):
                stream.end(reason)
                ended += 1
        return ended

    async def reconcile(self, table: RouteTable) -> int:
        """Hold every open stream against ``table``; returns how many were ended."""
        current = {route.id: route for route in table.routes}
        ended = 0
        for route_id, streams in list(self._by_route.items()):
            new = current.get(route_id)
            for stream in list(streams):
                if new is None:
                    stream.end(CloseReason.ROUTE_REMOVED)
                    ended += 1
                    continue
                if access_changed(stream.route, new):
                    try:
                        await stream_admit(new, stream.scope, stream.query)
                    except StreamError as refused:
                        logger.info("stream on %s ended: %s under the new rules", new.pattern.source, refused.code)
                        stream.end(CloseReason.UNAUTHORIZED)
                        ended += 1
                        continue
                stream.route = new
        return ended


class ConfigBus:
    """This process in the configuration group; each message reloads and reconciles.

    So does joining the group again after the channel layer forgot it (a restart, a
    failover): a change may have passed while this process was not in the group.
    """

    def __init__(
        self,
        streams: OpenStreams,
        layer: ChannelLayer | None,
        reload: Callable[[], Awaitable[RouteTable]],
        subscription: Subscription | None = None,
    ) -> None:
        self.streams = streams
        self.layer = layer
        self.reload = reload
        self._owned = subscription is None
        self.subscription = Subscription(layer) if subscription is None else subscription
        self.subscription.handle(MESSAGE_TYPE, lambda message: self._reload_request())
        self.subscription.on_rejoined(self._reload_request)
        self._started = False
        self._reloading: asyncio.Task[None] | None = None
        self._again = False

    async def start(self) -> None:
        """Join the group once; later calls return at once."""
        if self._started or self.layer is None:
            return
        self._started = True
        await self.subscription.join(CONFIG_GROUP)
        await self.subscription.start()

    async def changed(self) -> int:
        """Reload the route table and reconcile the open streams; how many were ended."""
        table = await self.reload()
        ended = await self.streams.reconcile(table)
        if ended:
            logger.info("configuration changed: %d open stream(s) ended", ended)
        return ended

    def _reload_request(self) -> None:
        """Coalesce a burst (one save of a route and its filters is several messages) into few reloads."""
        if self._reloading is None or self._reloading.done():
            self._reloading = asyncio.ensure_future(self._reload_until_quiet())
        else:
            self._again = True

    async def _reload_until_quiet(self) -> None:
        while True:
            self._again = False
            try:
                await self.changed()
            except Exception:
                logger.exception("route table reload after a configuration change failed")
            if not self._again:
                return

    def stop(self) -> None:
        if self._reloading is not None:
            self._reloading.cancel()
        if self._owned:
            self.subscription.stop()

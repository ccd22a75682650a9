"""The hubs of one worker process: created on first use, kept alive by one ticker, stopped when idle."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from streams.fanout.cache import CacheLimits
from streams.fanout.hub import TopicHub
from streams.fanout.kafka import KafkaAccess

if TYPE_CHECKING:
    from streams.core.schemas import SchemaCheck

logger = logging.getLogger("sluice.hub")


class Hubs:
    """The hubs of one worker process, created on first use, plus their shared ticker."""

    def __init__(self, access: KafkaAccess, idle_seconds: float = 300.0) -> None:
        self.access = access
        # A hub with no stream for this long is stopped: its consumer, thread and cache go.
        self.idle_seconds = idle_seconds
        self._idle_since: dict[str, float] = {}
        self._hubs: dict[str, TopicHub] = {}
        self._starting: dict[str, asyncio.Future[TopicHub]] = {}
        self._ticker: asyncio.Task[None] | None = None

    @property
    def hubs(self) -> dict[str, TopicHub]:
        return self._hubs

    async def hub(self, topic: str, limits: CacheLimits, schema: SchemaCheck | None = None) -> TopicHub:
        """The topic's hub, started (and level with Kafka) on first use.

        ``schema`` is the topic's schema as the caller read it from the configuration:
        a change applies from the next record the hub reads.
        """
        found = self._hubs.get(topic)
        if found is not None:
            self._idle_since.pop(topic, None)  # about to be used: not idle
            found.schema = schema
            return found
        starting = self._starting.get(topic)
        if starting is not None:
            started = await asyncio.shield(starting)
            started.schema = schema
            return started
        future: asyncio.Future[TopicHub] = asyncio.get_running_loop().create_future()
        self._starting[topic] = future
        try:
            hub = TopicHub(topic, self.access, limits)
            hub.schema = schema
            await hub.start()
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: waiters re-raise it themselves
            raise
        finally:
            self._starting.pop(topic, None)
        self._hubs[topic] = hub
        future.set_result(hub)
        if self._ticker is None:
            self._ticker = asyncio.get_running_loop().create_task(self._tick(), name="sluice-hub-ticker")
        return hub

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            now = time.monotonic()
            now_ms = int(time.time() * 1000)
            for hub in list(self._hubs.values()):
                try:
                    hub.heartbeat(now)
                    hub.cache.evict_expired(now_ms)
                except Exception:
                    logger.exception("hub ticker failed for %s", hub.topic)
            self.sweep_idle(now)

    def sweep_idle(self, now: float) -> list[str]:
        """Stop hubs that have had no stream for ``idle_seconds``; return their topics."""
        stopped = []
        for topic, hub in list(self._hubs.items()):
            if hub.live or hub.catching_up:
                self._idle_since.pop(topic, None)
                continue
            since = self._idle_since.setdefault(topic, now)
            if now - since >= self.idle_seconds:
                del self._hubs[topic]
                del self._idle_since[topic]
                hub.stop()
                stopped.append(topic)
                logger.info("stopped the idle hub of %s", topic)
        return stopped

    def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
        for hub in self._hubs.values():
            hub.stop()
        self._hubs.clear()
        self._idle_since.clear()

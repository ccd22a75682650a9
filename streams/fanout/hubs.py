"""The hubs of one worker process: created on first use, kept alive by one ticker, stopped when idle."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from streams.core.clusters import ClusterSpec
from streams.core.formats.record import RecordDecoder
from streams.core.formats.spec import RecordFormats
from streams.fanout.cache import CacheLimits
from streams.fanout.hub import TopicHub
from streams.fanout.kafka import KafkaAccess
from streams.fanout.readers import KafkaReaders

if TYPE_CHECKING:
    from streams.core.schemas import SchemaCheck

logger = logging.getLogger("sluice.hub")


class Hubs:
    """The hubs of one worker process, created on first use, plus their shared ticker."""

    def __init__(
        self,
        access: KafkaAccess,
        idle_seconds: float = 300.0,
        access_make: Callable[[ClusterSpec], KafkaAccess] | None = None,
        metadata_seconds: float = 30.0,
        decoder_make: Callable[[str, RecordFormats], RecordDecoder] | None = None,
    ) -> None:
        # Makes the decoder of a topic whose records are not plain text (resolving the registry's references).
        self._decoder_make = decoder_make
        # How often each hub asks whether its topic gained partitions.
        self.metadata_seconds = metadata_seconds
        self._metadata_checked = time.monotonic()
        self._metadata_check: asyncio.Task[None] | None = None
        # The default cluster's access; other clusters' are made on first use by ``access_make``.
        self.access = access
        self._access_make = access_make
        self.accesses: dict[ClusterSpec, KafkaAccess] = {}
        # A hub with no stream for this long is stopped: its consumer, thread and cache go.
        self.idle_seconds = idle_seconds
        self._idle_since: dict[str, float] = {}
        self._hubs: dict[str, TopicHub] = {}
        self._starting: dict[str, asyncio.Future[TopicHub]] = {}
        self._ticker: asyncio.Task[None] | None = None
        self._retired: list[TopicHub] = []

    @property
    def hubs(self) -> dict[str, TopicHub]:
        return self._hubs

    def cluster_access(self, cluster: ClusterSpec | None) -> KafkaAccess:
        """The access of ``cluster`` (None: the default cluster), made on first use."""
        if cluster is None:
            return self.access
        found = self.accesses.get(cluster)
        if found is None:
            if self._access_make is None:
                raise RuntimeError(f"no way to reach cluster {cluster.name}")
            found = self.accesses[cluster] = self._access_make(cluster)
        return found

    async def hub(
        self,
        topic: str,
        limits: CacheLimits,
        schema: SchemaCheck | None = None,
        cluster: ClusterSpec | None = None,
        formats: RecordFormats | None = None,
    ) -> TopicHub:
        """The topic's hub on its cluster (None: the default one), started (and level with Kafka) on first use.

        ``schema`` is the topic's schema as the caller read it from the configuration:
        a change applies from the next record the hub reads. ``formats`` says how its
        records decode (None: plain text). Hubs are named by their topic, and
        ``cluster/topic`` on clusters other than the default one.
        """
        access = self.cluster_access(cluster)
        formats = formats if formats is not None and not formats.plain else None
        name = topic if cluster is None else f"{cluster.name}/{topic}"
        found = self._hubs.get(name)
        if found is not None and (found.access is not access or found.formats != formats):
            # The cluster or the topic's formats were reconfigured: new streams read it as it is
            # now (their cache decoded anew); the old hub serves its streams until they end.
            self._retired.append(self._hubs.pop(name))
            found = None
        if found is not None:
            self._idle_since.pop(name, None)  # about to be used: not idle
            found.schema = schema
            return found
        starting = self._starting.get(name)
        if starting is not None:
            started = await asyncio.shield(starting)
            started.schema = schema
            return started
        future: asyncio.Future[TopicHub] = asyncio.get_running_loop().create_future()
        self._starting[name] = future
        try:
            hub = TopicHub(topic, access, limits, self._decoder(topic, formats), readers=KafkaReaders(access))
            hub.schema = schema
            await hub.start()
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: waiters re-raise it themselves
            raise
        finally:
            self._starting.pop(name, None)
        self._hubs[name] = hub
        future.set_result(hub)
        if self._ticker is None:
            self._ticker = asyncio.get_running_loop().create_task(self._tick(), name="sluice-hub-ticker")
        return hub

    def _decoder(self, topic: str, formats: RecordFormats | None) -> RecordDecoder | None:
        if formats is None:
            return None
        if self._decoder_make is None:
            return RecordDecoder(topic, formats, {})
        return self._decoder_make(topic, formats)

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            now = time.monotonic()
            now_ms = int(time.time() * 1000)
            for hub in [*self._hubs.values(), *self._retired]:
                try:
                    hub.heartbeat(now)
                    hub.cache.evict_expired(now_ms)
                except Exception:
                    logger.exception("hub ticker failed for %s", hub.topic)
            self.sweep_idle(now)
            if now - self._metadata_checked >= self.metadata_seconds and (
                self._metadata_check is None or self._metadata_check.done()
            ):
                self._metadata_checked = now
                self._metadata_check = asyncio.ensure_future(self.partitions_check())

    async def partitions_check(self) -> None:
        """Ask Kafka whether each topic gained partitions; hubs read new ones from their start."""
        for hub in list(self._hubs.values()):
            try:
                found = await hub.blocking(hub.access.partitions, hub.topic)
                new = sorted(set(found) - set(hub.partitions))
                if new:
                    marks = await hub.blocking(hub.access.watermarks, hub.topic, new)
                    hub.partitions_add({p: low for p, (low, _) in marks.items()})
            except Exception as exc:  # Kafka away: the next check asks again
                logger.warning("partition check of %s failed: %s", hub.topic, exc)

    def sweep_idle(self, now: float) -> list[str]:
        """Stop hubs that have had no stream for ``idle_seconds``; return their topics."""
        for retired in [hub for hub in self._retired if not hub.live and not hub.catching_up]:
            self._retired.remove(retired)
            retired.stop()
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
        for hub in [*self._hubs.values(), *self._retired]:
            hub.stop()
        self._hubs.clear()
        self._retired.clear()
        for access in self.accesses.values():
            access.close()
        self.accesses.clear()
        self._idle_since.clear()

"""One worker process's long-lived parts, held by one object the server builds and hands down.

:class:`WorkerRuntime` is made once per worker (``streams.server.application``)
and given to the stream router; what it holds starts lazily: the hubs on the
first Kafka stream, the upstreams on the first proxy stream, the buses on the
first request. Tests build their own.
"""

from __future__ import annotations

import random
from typing import Any

from channels.layers import get_channel_layer

from streams.clusters import cluster_access, default_cluster, record_decoder
from streams.conf import streams_settings
from streams.core.clusters import ClusterSpec
from streams.edge.authorization.reauthorization import Deadlines, ReauthorizationBus
from streams.edge.authorization.reconfiguration import ConfigBus, OpenStreams
from streams.edge.authorization.subscription import Subscription
from streams.edge.http.admission_rate import AdmissionRate
from streams.edge.http.limits import AddressSlots
from streams.edge.http.refused_origins import RefusedOrigins
from streams.fanout.hubs import Hubs
from streams.fanout.kafka import KafkaAccess
from streams.proxy.upstream import Upstreams
from streams.selectors import route_table_reload


class WorkerRuntime:
    """Hubs, upstreams, buses, open streams and counters of one worker process.

    ``bootstrap``: the embedded broker's bootstrap servers (``runstreams`` started it),
    or empty for the environment's default cluster.
    """

    def __init__(self, bootstrap: str = "") -> None:
        self.default_cluster: ClusterSpec = default_cluster(bootstrap)
        # Per client address: its open streams (limits.py); streams held while Kafka is away (unavailable.py).
        self.addresses = AddressSlots()
        # Requests refused for their Origin: the log lines' budget per route and origin (refused_origins.py).
        self.refused_origins = RefusedOrigins()
        self.waiting = 0
        # New streams per second: bounded (ADMISSIONS_PER_SECOND) and counted (admission_rate.py).
        self.admissions = AdmissionRate(streams_settings.ADMISSIONS_PER_SECOND)
        # SIGTERM came: /readyz answers 503, and open streams are ended in waves (streams/server/shutdown.py),
        # each first told a `retry:` of its route's plus up to ``drain_jitter_ms`` more.
        self.draining = False
        self.drain_jitter_ms = 0
        # /readyz: accesses made to probe clusters no hub reads yet (kept: one per probe would leak
        # threads), and the last answer with its time (reused for a second).
        self.probes: dict[ClusterSpec, KafkaAccess] = {}
        self.readiness_answer: tuple[float, dict[str, Any]] | None = None
        self._hubs: Hubs | None = None
        self._upstreams: Upstreams | None = None
        self._subscription: Subscription | None = None
        self._reauthorization: ReauthorizationBus | None = None
        self._config: ConfigBus | None = None

    def drain_begin(self, jitter_seconds: float) -> None:
        """SIGTERM came: not ready from now on; streams ended from now on are told a jittered ``retry:``."""
        self.draining = True
        self.drain_jitter_ms = int(jitter_seconds * 1000)

    def drain_retry_ms(self, base_ms: int) -> int:
        """The reconnection delay of a stream the drain ends: ``base_ms`` plus a random share of a wave."""
        return base_ms + random.randint(0, self.drain_jitter_ms)

    def hubs(self) -> Hubs:
        """The :class:`Hubs` (one Kafka consumer per topic lives in it), made on first use."""
        if self._hubs is None:
            if not self.default_cluster.bootstrap:
                raise RuntimeError("KAFKA_BOOTSTRAP_SERVERS is not set (runstreams starts a broker when it is empty)")
            self._hubs = Hubs(
                cluster_access(self.default_cluster),
                idle_seconds=streams_settings.HUB_IDLE_SECONDS,
                access_make=cluster_access,
                metadata_seconds=streams_settings.METADATA_REFRESH_SECONDS,
                decoder_make=record_decoder,
            )
        return self._hubs

    def hubs_if_started(self) -> Hubs | None:
        return self._hubs

    def hubs_stop(self) -> None:
        if self._hubs is not None:
            self._hubs.stop()
            self._hubs.access.close()
            self._hubs = None

    def upstreams(self) -> Upstreams:
        """The upstream SSE connections (``sse-proxy`` routes), shared between clients."""
        if self._upstreams is None:
            self._upstreams = Upstreams()
        return self._upstreams

    def upstreams_if_started(self) -> Upstreams | None:
        return self._upstreams

    def subscription(self) -> Subscription:
        """This worker's channel on the channel layer, shared by both buses, joined again after a loss."""
        if self._subscription is None:
            self._subscription = Subscription(get_channel_layer())
        return self._subscription

    def subscription_if_started(self) -> Subscription | None:
        """The subscription, once a bus started it (``/readyz`` reports whether it is live)."""
        if self._subscription is None or not self._subscription.started:
            return None
        return self._subscription

    def reauthorization(self) -> ReauthorizationBus:
        """The open guarded streams and the link to the other workers, over the channel layer (SPEC 4.3)."""
        if self._reauthorization is None:
            subscription = self.subscription()
            self._reauthorization = ReauthorizationBus(Deadlines(), subscription.layer, subscription)
        return self._reauthorization

    def config(self) -> ConfigBus:
        """The open streams and the configuration listener (started by the first request)."""
        if self._config is None:
            subscription = self.subscription()
            self._config = ConfigBus(OpenStreams(), subscription.layer, route_table_reload, subscription)
        return self._config

    def open_streams(self) -> OpenStreams:
        return self.config().streams

    def open_streams_if_started(self) -> OpenStreams | None:
        """The open streams, if any request came in."""
        return self._config.streams if self._config is not None else None

    def listeners_stop(self) -> None:
        """Stop the listeners while the loop still runs (the process is stopping)."""
        if self._reauthorization is not None:
            self._reauthorization.stop()
            self._reauthorization = None
        if self._config is not None:
            self._config.stop()
            self._config = None
        if self._subscription is not None:
            self._subscription.stop()
            self._subscription = None


# The ASGI scope key of the worker's runtime in requests the stream router passes on to Django.
RUNTIME_KEY = "sluice.runtime"


def scope_runtime(scope: dict[str, Any] | None) -> WorkerRuntime | None:
    """The worker's runtime, from a request's ASGI scope (None: not served by the stream router)."""
    if scope is None:
        return None
    runtime: WorkerRuntime | None = scope.get(RUNTIME_KEY)
    return runtime

"""The worker process's long-lived parts (hubs, upstreams, buses), built from settings on first use."""

from __future__ import annotations

from channels.layers import get_channel_layer

from streams.clusters import cluster_access, default_cluster, record_decoder
from streams.conf import streams_settings
from streams.edge.reauthorization import Deadlines, ReauthorizationBus
from streams.edge.reconfiguration import ConfigBus, OpenStreams
from streams.fanout.hubs import Hubs
from streams.proxy.upstream import Upstreams

_hubs: Hubs | None = None


def process_hubs() -> Hubs:
    """This process's :class:`Hubs` (one Kafka consumer per topic lives in it)."""
    global _hubs
    if _hubs is None:
        default = default_cluster()
        if not default.bootstrap:
            raise RuntimeError("KAFKA_BOOTSTRAP_SERVERS is not set (runstreams starts a broker when it is empty)")
        _hubs = Hubs(
            cluster_access(default),
            idle_seconds=streams_settings.HUB_IDLE_SECONDS,
            access_make=cluster_access,
            metadata_seconds=streams_settings.METADATA_REFRESH_SECONDS,
            decoder_make=record_decoder,
        )
    return _hubs


def process_hubs_if_started() -> Hubs | None:
    return _hubs


def process_hubs_stop() -> None:
    global _hubs
    if _hubs is not None:
        _hubs.stop()
        _hubs.access.close()
        _hubs = None


_bus: ReauthorizationBus | None = None


def reauthorization_bus() -> ReauthorizationBus:
    """This process's open guarded streams and its link to the others, over the channel layer (SPEC 4.3)."""
    global _bus
    if _bus is None:
        _bus = ReauthorizationBus(Deadlines(), get_channel_layer())
    return _bus


def reauthorization_bus_stop() -> None:
    global _bus
    if _bus is not None:
        _bus.stop()
        _bus = None


_config_bus: ConfigBus | None = None


def config_bus() -> ConfigBus:
    """This process's open streams and its configuration listener (started by the first request)."""
    global _config_bus
    if _config_bus is None:
        from streams.selectors import route_table_reload

        _config_bus = ConfigBus(OpenStreams(), get_channel_layer(), route_table_reload)
    return _config_bus


def open_streams_if_started() -> OpenStreams | None:
    """This process's open streams, if any request came in."""
    return _config_bus.streams if _config_bus is not None else None


def runtime_stop() -> None:
    """Stop this process's listeners while its loop still runs."""
    global _config_bus
    reauthorization_bus_stop()
    if _config_bus is not None:
        _config_bus.stop()
        _config_bus = None


_proxies: Upstreams | None = None


def process_upstreams() -> Upstreams:
    """This process's upstream SSE connections (``sse-proxy`` routes), shared between clients."""
    global _proxies
    if _proxies is None:
        _proxies = Upstreams()
    return _proxies


def process_upstreams_if_started() -> Upstreams | None:
    return _proxies

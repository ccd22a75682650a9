"""Prometheus metrics of one worker process (``GET /metrics``).

Hub figures are plain integers the hub bumps once per batch; they are read
here at scrape time by :class:`HubCollector`, so the fan-out never touches a
metrics library. Events that happen once per request (admission refusals,
challenges) are ordinary prometheus-client counters.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, disable_created_metrics, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from common.database import database_watch
from streams.edge.http.counters import stream_metrics
from streams.edge.runtime import WorkerRuntime

if TYPE_CHECKING:
    from streams.fanout.hub import TopicHub
from streams.fanout.hubs import Hubs
from streams.proxy.upstream import Upstreams
from streams.selectors import route_table_staleness

# The text format only: `*_created` samples would double every counter for no use here.
disable_created_metrics()

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# Per-topic series (label `topic`): name -> (kind, help, reader).
_TOPIC_SERIES: dict[str, tuple[str, str, Callable[[TopicHub], float]]] = {
    "sluice_subscribers": ("gauge", "Open streams.", lambda h: len(h.live) + len(h.catching_up)),
    "sluice_subscribers_catching_up": ("gauge", "Streams reading history.", lambda h: len(h.catching_up)),
    "sluice_cache_records": ("gauge", "Records in the cache.", lambda h: h.cache.records),
    "sluice_cache_bytes": ("gauge", "Bytes in the cache.", lambda h: h.cache.bytes),
    "sluice_records_total": ("counter", "Records read from Kafka.", lambda h: h.counters.records_in),
    "sluice_deliveries_total": ("counter", "Events written to clients.", lambda h: h.counters.deliveries),
    "sluice_slow_clients_cut_total": (
        "counter",
        "Clients cut for exceeding max_pending_bytes.",
        lambda h: h.counters.cut_slow,
    ),
    "sluice_slow_clients_deferred_total": (
        "counter",
        "Live clients moved to catch up from the cache because their connection was congested.",
        lambda h: h.counters.demotions,
    ),
    "sluice_catch_ups_cache_total": (
        "counter",
        "Catch-ups served from the cache.",
        lambda h: h.counters.catch_ups_cache,
    ),
    "sluice_catch_ups_kafka_total": (
        "counter",
        "Catch-ups that read Kafka (older than the cache).",
        lambda h: h.counters.catch_ups_kafka,
    ),
    "sluice_resumes_past_end_total": (
        "counter",
        "Resumes naming offsets past the end of the log (topic recreated, cluster restored): started at the end.",
        lambda h: h.counters.clamped_past_end,
    ),
    "sluice_log_restarts_total": (
        "counter",
        "Partitions whose log began anew under the hub (the topic was deleted and created again): read from its start.",
        lambda h: h.counters.log_restarts,
    ),
    "sluice_resume_gap_records_total": (
        "counter",
        "Records resumes could not have: retention removed them before the stream came back.",
        lambda h: h.counters.gap_records,
    ),
    "sluice_invalid_records_total": ("counter", "Records not sent: not UTF-8 text.", lambda h: h.counters.invalid),
    "sluice_undecodable_records_total": (
        "counter",
        "Records whose value or key did not decode by the topic's format (bad bytes, unknown schema id): skipped.",
        lambda h: h.counters.undecodable,
    ),
    "sluice_registry_waiting": (
        "gauge",
        "1 while the topic's delivery waits for its schema registry to answer (nothing is skipped meanwhile).",
        lambda h: int(h.registry_waiting),
    ),
    "sluice_fetch_wait_ms": (
        "gauge",
        "fetch.wait.max.ms of the topic's live fetch now: it follows the traffic and the broker's answers "
        "(docs/operations.md, Fetch pacing).",
        lambda h: h.fetch_wait_ms,
    ),
    "sluice_schema_rejected_total": (
        "counter",
        "Records that failed the topic's schema: delivered to no stream.",
        lambda h: h.counters.schema_invalid,
    ),
}

_DROP_REASONS = ("filter", "schema", "invalid", "slow_client", "undecodable")


class HubCollector(Collector):
    """Reads the hubs of this process at scrape time (on the event loop that runs them)."""

    def __init__(self, registry: Callable[[], Hubs | None]) -> None:
        self._registry = registry

    def collect(self) -> Iterator[Metric]:
        registry = self._registry()
        hubs = sorted(registry.hubs.items()) if registry is not None else []
        consumers = GaugeMetricFamily("sluice_kafka_consumers", "Live Kafka consumers (one per topic) in this worker.")
        consumers.add_metric([], len(hubs))
        yield consumers
        for name, (kind, help_text, read) in _TOPIC_SERIES.items():
            family: GaugeMetricFamily | CounterMetricFamily
            if kind == "gauge":
                family = GaugeMetricFamily(name, help_text, labels=["topic"])
            else:
                family = CounterMetricFamily(name, help_text, labels=["topic"])
            for topic, hub in hubs:
                family.add_metric([topic], read(hub))
            yield family
        yield from self._routes(hubs)
        yield from self._kafka(hubs)

    @staticmethod
    def _routes(hubs: list[tuple[str, TopicHub]]) -> Iterator[Metric]:
        labels = ["route", "topic"]
        open_streams = GaugeMetricFamily("sluice_streams_open", "Open streams by route and topic.", labels=labels)
        delivered = CounterMetricFamily("sluice_events_delivered", "Events written to streams.", labels=labels)
        sent_bytes = CounterMetricFamily("sluice_bytes_delivered", "Bytes of events written to streams.", labels=labels)
        dropped = CounterMetricFamily(
            "sluice_events_dropped",
            "Events kept from a stream: by its filters, a schema, an unsendable value, a write that "
            "overflowed a slow client (which resumes from its last id), or a record that did not decode.",
            labels=[*labels, "reason"],
        )
        route_schema = CounterMetricFamily(
            "sluice_route_schema_rejected",
            "Records that failed the route's schema (once per record on the live feed, once per catch-up reading it).",
            labels=labels,
        )
        lag = HistogramMetricFamily(
            "sluice_delivery_lag_seconds",
            "Now minus the record's Kafka timestamp (CreateTime unless the topic sets LogAppendTime) when it is "
            "written to the streams' sockets: once per fetched batch and route, and per write of a live stream "
            "that fell behind.",
            labels=labels,
        )
        conflated = CounterMetricFamily(
            "sluice_conflated_records",
            "Events a conflated stream (route option conflate) was not sent because a newer record of the same key "
            "replaced them before its next write (docs/filters.md, Conflation).",
            labels=labels,
        )
        for topic, hub in hubs:
            streams: dict[str, int] = {}
            for sub in [*hub.live, *hub.catching_up]:
                streams[sub.route] = streams.get(sub.route, 0) + 1
            for route, count in sorted(streams.items()):
                open_streams.add_metric([route, topic], count)
            for route, counts in sorted(hub.tally.by_route.items()):
                delivered.add_metric([route, topic], counts.delivered)
                sent_bytes.add_metric([route, topic], counts.bytes)
                conflated.add_metric([route, topic], counts.conflated)
                route_schema.add_metric([route, topic], counts.schema_records)
                if counts.lag.count:
                    lag.add_metric([route, topic], counts.lag.cumulative(), counts.lag.total)
                values = (counts.filtered, counts.schema, counts.invalid, counts.slow, counts.undecodable)
                for reason, value in zip(_DROP_REASONS, values, strict=True):
                    dropped.add_metric([route, topic, reason], value)
        yield from (open_streams, delivered, sent_bytes, conflated, dropped, route_schema, lag)

    @staticmethod
    def _kafka(hubs: list[tuple[str, TopicHub]]) -> Iterator[Metric]:
        lag = GaugeMetricFamily(
            "sluice_kafka_consumer_lag",
            "Records the topic's consumer has yet to read: high watermark minus position.",
            labels=["topic", "partition"],
        )
        ratio = GaugeMetricFamily(
            "sluice_resume_cache_hit_ratio",
            "Share of catch-ups (resumes, earliest, since) served from the cache rather than Kafka.",
            labels=["topic"],
        )
        for topic, hub in hubs:
            for partition, behind in sorted(hub.lag().items()):
                lag.add_metric([topic, str(partition)], behind)
            counters = hub.counters
            total = counters.catch_ups_cache + counters.catch_ups_kafka
            if total:
                ratio.add_metric([topic], counters.catch_ups_cache / total)
        yield lag
        yield ratio
        yield from _fetch_lag(hubs)


def hub_cluster(name: str) -> str:
    """The cluster of a hub named ``topic`` (the default cluster) or ``cluster/topic`` (streams.fanout.hubs)."""
    return name.split("/", 1)[0] if "/" in name else "default"


def _fetch_lag(hubs: list[tuple[str, TopicHub]]) -> Iterator[Metric]:
    """Per cluster: records its hubs have yet to read, and how old the newest record they read is while behind."""
    records: dict[str, int] = {}
    seconds: dict[str, float] = {}
    now = time.time()
    for name, hub in hubs:
        cluster = hub_cluster(name)
        behind = sum(hub.lag().values())
        records[cluster] = records.get(cluster, 0) + behind
        newest = hub.state.newest_ms
        age = max(0.0, now - newest / 1000) if behind and newest > 0 else 0.0
        seconds[cluster] = max(seconds.get(cluster, 0.0), age)
    in_records = GaugeMetricFamily(
        "sluice_fetch_lag_records",
        "Records the cluster's hubs have yet to read: log end (high watermark) minus the hubs' positions.",
        labels=["cluster"],
    )
    in_seconds = GaugeMetricFamily(
        "sluice_fetch_lag_seconds",
        "While a hub of the cluster is behind the log end: now minus the Kafka timestamp of the newest record "
        "it has read (the most of the cluster's hubs); 0 when all are level.",
        labels=["cluster"],
    )
    for cluster in sorted(records):
        in_records.add_metric([cluster], records[cluster])
        in_seconds.add_metric([cluster], seconds[cluster])
    yield from (in_records, in_seconds)


class WorkerMetrics(Collector):
    """This process's counters and what its runtime holds (hubs, upstreams), read at scrape time."""

    def __init__(self, runtime: WorkerRuntime | None) -> None:
        self._runtime = runtime

    def collect(self) -> Iterator[Metric]:
        runtime = self._runtime
        yield from stream_metrics.collect()
        yield from HubCollector(runtime.hubs_if_started if runtime is not None else _none).collect()
        yield from ProxyCollector(runtime.upstreams_if_started if runtime is not None else _none).collect()
        yield from _database()


def _database() -> Iterator[Metric]:
    """Whether the database answers, and the route table served meanwhile (docs/reliability.md)."""
    available = GaugeMetricFamily("sluice_database_available", "1 while the database answers, 0 while it is away.")
    available.add_metric([], 0 if database_watch.away else 1)
    staleness = route_table_staleness()
    stale = GaugeMetricFamily(
        "sluice_route_table_stale_seconds",
        "Age of the route table served while the database is away (0 while it answers).",
    )
    stale.add_metric([], staleness.seconds)
    served = CounterMetricFamily(
        "sluice_route_table_stale_served", "Requests routed by a table read before the database went away."
    )
    served.add_metric([], staleness.served)
    yield from (available, stale, served)


def _none() -> None:
    return None


def metrics_text(runtime: WorkerRuntime | None) -> bytes:
    """This process's metrics in the Prometheus text format."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(WorkerMetrics(runtime))
    return generate_latest(registry)


class ProxyCollector(Collector):
    """The upstream connections of ``sse-proxy`` routes in this process, read at scrape time."""

    def __init__(self, upstreams: Callable[[], Upstreams | None]) -> None:
        self._upstreams = upstreams

    def collect(self) -> Iterator[Metric]:
        proxies = self._upstreams()
        upstreams = GaugeMetricFamily("sluice_proxy_upstreams", "Open upstream connections of sse-proxy routes.")
        upstreams.add_metric([], len(proxies.upstreams) if proxies else 0)
        subscribers = GaugeMetricFamily("sluice_proxy_subscribers", "Open streams on sse-proxy routes.")
        subscribers.add_metric([], proxies.subscribers if proxies else 0)
        reconnects = CounterMetricFamily("sluice_proxy_reconnects", "Upstreams re-opened after a failure.")
        reconnects.add_metric([], proxies.reconnects if proxies else 0)
        cut = CounterMetricFamily("sluice_proxy_slow_clients_cut", "Proxy clients cut for exceeding max_pending_bytes.")
        cut.add_metric([], proxies.cut_slow if proxies else 0)
        rejected = CounterMetricFamily(
            "sluice_proxy_schema_rejected", "Upstream events not sent: their data does not match the route's schema."
        )
        rejected.add_metric([], proxies.schema_rejected if proxies else 0)
        yield from (upstreams, subscribers, reconnects, cut, rejected)


class ProcessCollector(Collector):
    """What a leak would grow in this worker: asyncio tasks, descriptors, threads, resident memory (Linux)."""

    def collect(self) -> Iterator[Metric]:
        try:
            tasks = len(asyncio.all_tasks())
        except RuntimeError:  # no running loop (a synchronous test client)
            tasks = 0
        gauges = {
            "sluice_asyncio_tasks": ("Asyncio tasks on this worker's loop.", tasks),
            "sluice_threads": ("Threads in this worker, librdkafka's included.", _threads()),
        }
        with contextlib.suppress(OSError):
            gauges["sluice_open_fds"] = ("Open file descriptors.", len(os.listdir("/proc/self/fd")))
        with contextlib.suppress(OSError, ValueError):
            pages = int(Path("/proc/self/statm").read_text().split()[1])
            gauges["sluice_rss_bytes"] = ("Resident set size.", pages * os.sysconf("SC_PAGE_SIZE"))
        for name, (help_text, amount) in gauges.items():
            family = GaugeMetricFamily(name, help_text)
            family.add_metric([], amount)
            yield family


def _threads() -> int:
    """The OS's count of this process's threads (librdkafka's are not Python's); Python's off Linux."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


stream_metrics.register(ProcessCollector())

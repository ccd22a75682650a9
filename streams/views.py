"""Pages and operational endpoints served by Django."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from pathlib import Path

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from .asyncapi import asyncapi_document
from .models import Route
from .runtime import hub_registry_if_started


def index(request: HttpRequest) -> HttpResponse:
    """Landing page: the enabled routes, and a live view of the first one."""
    routes = Route.objects.filter(enabled=True).select_related("guard").order_by("order", "path")
    return render(request, "streams/index.html", {"routes": routes, "dev_issuer": settings.SLUICE["DEV_ISSUER"]})


def asyncapi(request: HttpRequest) -> JsonResponse:
    """AsyncAPI 3.0 of every enabled route (SPEC 7), built in :mod:`streams.asyncapi`."""
    return JsonResponse(asyncapi_document(base_url=request.build_absolute_uri("/")))


def healthz(request: HttpRequest) -> JsonResponse:
    registry = hub_registry_if_started()
    hubs = registry.hubs if registry is not None else {}
    return JsonResponse(
        {
            "status": "ok",
            "topics": {
                name: {"partitions": len(hub.partitions), "subscribers": len(hub.live) + len(hub.catching_up)}
                for name, hub in hubs.items()
            },
        }
    )


def process_gauges() -> dict[str, tuple[str, int]]:
    """What a leak would grow in this worker process: tasks, descriptors, threads and resident memory (Linux)."""
    gauges: dict[str, tuple[str, int]] = {}
    try:
        tasks = len(asyncio.all_tasks())
    except RuntimeError:  # no running loop (a synchronous test client)
        tasks = 0
    gauges["sluice_asyncio_tasks"] = ("Asyncio tasks on this worker's loop.", tasks)
    gauges["sluice_threads"] = ("Threads in this worker.", threading.active_count())
    with contextlib.suppress(OSError):
        gauges["sluice_open_fds"] = ("Open file descriptors.", len(os.listdir("/proc/self/fd")))
    with contextlib.suppress(OSError, ValueError):
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        gauges["sluice_rss_bytes"] = ("Resident set size.", pages * os.sysconf("SC_PAGE_SIZE"))
    return gauges


async def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus text exposition of the hubs of this worker process (async: it counts the loop's tasks)."""
    registry = hub_registry_if_started()
    hubs = dict(registry.hubs) if registry is not None else {}
    lines = [
        "# HELP sluice_kafka_consumers Live Kafka consumers (one per topic) in this worker.",
        "# TYPE sluice_kafka_consumers gauge",
        f"sluice_kafka_consumers {len(hubs)}",
    ]
    for name, (help_text, amount) in process_gauges().items():
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge", f"{name} {amount}"]
    series = {
        "sluice_subscribers": ("gauge", "Open streams.", lambda h: len(h.live) + len(h.catching_up)),
        "sluice_subscribers_catching_up": ("gauge", "Streams reading history.", lambda h: len(h.catching_up)),
        "sluice_cache_records": ("gauge", "Records in the cache.", lambda h: h.cached_records),
        "sluice_cache_bytes": ("gauge", "Bytes in the cache.", lambda h: h.cached_bytes),
        "sluice_records_total": ("counter", "Records read from Kafka.", lambda h: h.records_in),
        "sluice_deliveries_total": ("counter", "Events written to clients.", lambda h: h.deliveries),
        "sluice_slow_clients_cut_total": (
            "counter",
            "Clients cut for exceeding max_pending_bytes.",
            lambda h: h.cut_slow,
        ),
        "sluice_slow_clients_deferred_total": (
            "counter",
            "Live clients moved to catch up from the cache because their connection was congested.",
            lambda h: h.demotions,
        ),
        "sluice_catch_ups_cache_total": ("counter", "Catch-ups served from the cache.", lambda h: h.catch_ups_cache),
        "sluice_catch_ups_kafka_total": (
            "counter",
            "Catch-ups that read Kafka (older than the cache).",
            lambda h: h.catch_ups_kafka,
        ),
        "sluice_invalid_records_total": ("counter", "Records not sent: not UTF-8 text.", lambda h: h.invalid),
    }
    for name, (kind, help_text, value) in series.items():
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        lines += [f'{name}{{topic="{topic}"}} {value(hub)}' for topic, hub in sorted(hubs.items())]
    return HttpResponse("\n".join(lines) + "\n", content_type="text/plain; version=0.0.4; charset=utf-8")

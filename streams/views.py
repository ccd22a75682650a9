"""Pages and operational endpoints served by Django."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from .models import Route
from .runtime import hub_registry_if_started, proxy_registry_if_started
from .selectors import route_listing


def index(request: HttpRequest) -> HttpResponse:
    """Landing page: the enabled routes (kind, path, guarded or not), and a live view of the first one."""
    routes = Route.objects.filter(enabled=True).select_related("guard").order_by("order", "path")
    return render(request, "streams/index.html", {"routes": routes})


def viewer(request: HttpRequest) -> HttpResponse:
    """Stream viewer: pick a route, fill its path parameters, watch its events, pause and resume."""
    routes = route_listing()
    chosen = request.GET.get("route", "")
    selected = next((r.id for r in routes if str(r.id) == chosen), routes[0].id if routes else None)
    return render(
        request,
        "streams/viewer.html",
        {"routes": routes, "routes_data": [r.as_dict() for r in routes], "selected": selected},
    )


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


def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus text exposition of the hubs of this worker process."""
    registry = hub_registry_if_started()
    hubs = dict(registry.hubs) if registry is not None else {}
    lines = [
        "# HELP sluice_kafka_consumers Live Kafka consumers (one per topic) in this worker.",
        "# TYPE sluice_kafka_consumers gauge",
        f"sluice_kafka_consumers {len(hubs)}",
    ]
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
    proxies = proxy_registry_if_started()
    proxy_series: dict[str, tuple[str, str, int]] = {
        "sluice_proxy_upstreams": (
            "gauge",
            "Open upstream connections of sse-proxy routes.",
            len(proxies.upstreams) if proxies else 0,
        ),
        "sluice_proxy_subscribers": (
            "gauge",
            "Open streams on sse-proxy routes.",
            proxies.subscribers if proxies else 0,
        ),
        "sluice_proxy_reconnects_total": (
            "counter",
            "Upstreams re-opened after a failure.",
            proxies.reconnects if proxies else 0,
        ),
        "sluice_proxy_slow_clients_cut_total": (
            "counter",
            "Proxy clients cut for exceeding max_pending_bytes.",
            proxies.cut_slow if proxies else 0,
        ),
    }
    for name, (kind, help_text, count) in proxy_series.items():
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", f"{name} {count}"]
    return HttpResponse("\n".join(lines) + "\n", content_type="text/plain; version=0.0.4; charset=utf-8")

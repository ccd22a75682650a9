"""Pages and operational endpoints served by Django."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from .metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from .metrics import metrics_text
from .models import Route
from .runtime import hub_registry_if_started


def index(request: HttpRequest) -> HttpResponse:
    """Landing page: the enabled routes, and a live view of the first one."""
    routes = Route.objects.filter(enabled=True).order_by("order", "path")
    return render(request, "streams/index.html", {"routes": routes})


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


async def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus text exposition of this worker process (async: read on the loop that runs the hubs)."""
    return HttpResponse(metrics_text(), content_type=METRICS_CONTENT_TYPE)

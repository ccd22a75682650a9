"""Pages and operational endpoints served by Django."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from streams.config.asyncapi import asyncapi_document
from streams.edge.runtime import hub_registry_if_started
from streams.models import Route
from streams.ops.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from streams.ops.metrics import metrics_text
from streams.selectors import route_listing


def index(request: HttpRequest) -> HttpResponse:
    """Landing page: the enabled routes, and a live view of the first one."""
    routes = Route.objects.filter(enabled=True).select_related("guard").order_by("order", "path")
    return render(request, "streams/index.html", {"routes": routes, "dev_issuer": settings.SLUICE["DEV_ISSUER"]})


def asyncapi(request: HttpRequest) -> JsonResponse:
    """AsyncAPI 3.0 of every enabled route (SPEC 7), built in :mod:`streams.config.asyncapi`."""
    return JsonResponse(asyncapi_document(base_url=request.build_absolute_uri("/")))


def viewer(request: HttpRequest) -> HttpResponse:
    """Stream viewer: pick a route, fill its path parameters, watch its events, pause and resume."""
    routes = route_listing()
    chosen = request.GET.get("route", "")
    selected = next((r.id for r in routes if str(r.id) == chosen), routes[0].id if routes else None)
    return render(
        request,
        "streams/viewer.html",
        {
            "routes": routes,
            "routes_data": [r.as_dict() for r in routes],
            "selected": selected,
            "dev_issuer": settings.SLUICE["DEV_ISSUER"],
        },
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


async def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus text exposition of this worker process (async: read on the loop that runs the hubs)."""
    return HttpResponse(metrics_text(), content_type=METRICS_CONTENT_TYPE)

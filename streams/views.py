"""Pages and operational endpoints served by Django."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.defaults import bad_request as bad_request_page
from django.views.defaults import page_not_found

from common.database import database_unavailable_response, quietly
from guards.conf import guards_settings
from streams.config.asyncapi import asyncapi_document
from streams.edge.runtime import scope_runtime
from streams.models import Route
from streams.ops.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from streams.ops.metrics import metrics_text
from streams.ops.readiness import readiness
from streams.selectors import route_listing, route_table_unknown


def index(request: HttpRequest) -> HttpResponse:
    """Landing page: the enabled routes, and a live view of the first one."""
    routes = Route.objects.filter(enabled=True).select_related("guard").order_by("order", "path")
    return render(request, "streams/index.html", {"routes": routes, "dev_issuer": guards_settings.DEV_ISSUER})


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
            "dev_issuer": guards_settings.DEV_ISSUER,
        },
    )


async def readyz(request: HttpRequest) -> JsonResponse:
    """Readiness: every Kafka cluster, the database and the channel layer answer (503 naming the one that does not)."""
    runtime = scope_runtime(getattr(request, "scope", None))
    if runtime is None:
        return JsonResponse({"status": "unavailable", "detail": "not served by the stream router"}, status=503)
    answer = await readiness(runtime)
    if answer["status"] == "ok":
        return JsonResponse(answer)
    # An answer, not an error of this request: probes ask every few seconds, the cause is logged once.
    return quietly(JsonResponse(answer, status=503))


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness: this process serves (never asks the database or anyone else: a database outage restarts nothing)."""
    runtime = scope_runtime(getattr(request, "scope", None))
    registry = runtime.hubs_if_started() if runtime is not None else None
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
    return HttpResponse(metrics_text(scope_runtime(getattr(request, "scope", None))), content_type=METRICS_CONTENT_TYPE)


# Sluice's mark: a sluice gate over a stream, in the pages' accent colour.
FAVICON_SVG = (
    b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">'
    b'<rect width="32" height="32" rx="6" fill="#2e5bff"/>'
    b'<rect x="7" y="5" width="18" height="11" rx="1" fill="#fff"/>'
    b'<path d="M4 22c4-3 8 3 12 0s8-3 12 0M4 27c4-3 8 3 12 0s8-3 12 0" fill="none" stroke="#fff" stroke-width="2"/>'
    b"</svg>"
)


def favicon(request: HttpRequest) -> HttpResponse:
    """``/favicon.ico``: browsers ask for it on every page (an SVG; browsers read it by its type)."""
    response = HttpResponse(FAVICON_SVG, content_type="image/svg+xml")
    response["Cache-Control"] = "public, max-age=86400"
    return response


# Error pages (handler400, handler404): JSON for API and stream clients, HTML for people.


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """404: a JSON body unless the client asked for a page (a browser navigating).

    While no route table could be read (started with the database away), no route is
    known to be missing: 503 with ``Retry-After`` instead.
    """
    if route_table_unknown():
        return database_unavailable_response(request)
    if "text/html" in request.headers.get("accept", ""):
        return page_not_found(request, exception or Exception())
    return JsonResponse(
        {"error": "not_found", "status": 404, "detail": f"no route or page for {request.path}"}, status=404
    )


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """400 (a refused Host header, a malformed request): a JSON body unless the client asked for a page."""
    if "text/html" in request.META.get("HTTP_ACCEPT", ""):
        return bad_request_page(request, exception or Exception())
    return JsonResponse({"error": "bad_request", "status": 400, "detail": "the request was refused"}, status=400)

"""The admin's live metrics page: a staff-only view of ``/metrics`` as JSON, and the page that charts it."""

from __future__ import annotations

import time
from typing import Any

from django.contrib import admin
from django.contrib.admin.views.decorators import staff_member_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.response import TemplateResponse

from streams.edge.runtime import WorkerRuntime, scope_runtime
from streams.ops.metrics import WorkerMetrics


def metrics_snapshot(runtime: WorkerRuntime | None) -> dict[str, Any]:
    """Every sample of this process's metrics: ``{"time": epoch seconds, "samples": [{name, labels, value}]}``."""
    samples = [
        {"name": sample.name, "labels": sample.labels, "value": sample.value}
        for family in WorkerMetrics(runtime).collect()
        for sample in family.samples
    ]
    return {"time": time.time(), "samples": samples}


async def metrics_json(request: HttpRequest) -> JsonResponse:
    """The page's data, read on the event loop that runs the hubs (async view); staff only."""
    user = await request.auser()
    if not (user.is_active and user.is_staff):
        raise PermissionDenied
    response = JsonResponse(metrics_snapshot(scope_runtime(getattr(request, "scope", None))))
    response["cache-control"] = "no-store"
    return response


@staff_member_required
def metrics_dashboard(request: HttpRequest) -> HttpResponse:
    context = {**admin.site.each_context(request), "title": "Stream metrics"}
    return TemplateResponse(request, "admin/streams/metrics.html", context)

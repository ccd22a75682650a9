"""Error pages: JSON for API and stream clients, HTML for people."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.defaults import bad_request as bad_request_page
from django.views.defaults import page_not_found


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """404: a JSON body unless the client asked for a page (a browser navigating)."""
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

"""The development token endpoint: ``POST /auth/token`` for a signed-in user (SPEC 4, demo).

A page of the gateway asks it with its CSRF token; a page on another origin that
the demo guard's routes allow asks it with a JSON POST after a preflight
(:mod:`guards.crossorigin`).
"""

from __future__ import annotations

import json
import logging
from functools import lru_cache
from pathlib import Path

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.utils.cache import patch_vary_headers
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from .conf import guards_settings
from .crossorigin import cors_headers, issuer_allows, request_cross_origin
from .issuer import (
    DEV_GUARD,
    LIFETIME_MAX_SECONDS,
    LIFETIME_MIN_SECONDS,
    IssuerKey,
    issuer_key_load,
    token_issue,
)

logger = logging.getLogger("sluice.guards")

DEFAULT_LIFETIME_SECONDS = 60
MAX_ROLES = 20


def _error(status: int, code: str, detail: str) -> JsonResponse:
    return JsonResponse({"error": code, "status": status, "detail": detail}, status=status)


@lru_cache(maxsize=4)
def _issuer_key(path: Path, mtime_ns: int) -> IssuerKey:
    return issuer_key_load(path)


def issuer_key_current() -> IssuerKey | None:
    """The development issuer's key (re-read when the file changes); None if there is none."""
    path = Path(guards_settings.DEV_ISSUER_KEY_FILE)
    try:
        return _issuer_key(path, path.stat().st_mtime_ns)
    except FileNotFoundError:
        return None


@never_cache
@csrf_exempt  # checked below: Django's check for the gateway's own pages, the origin for the others
@require_http_methods(["POST", "OPTIONS"])
def token(request: HttpRequest) -> HttpResponse:
    """A short-lived access token for the signed-in user, with the roles asked for (JSON body, all optional).

    ``{"roles": ["scores:read"], "lifetime": 60}``. Only with the development issuer on: it
    grants any role to any signed-in user, which is what a demo needs and production must not have.
    """
    if not guards_settings.DEV_ISSUER:
        return _error(404, "not_found", "the development token issuer is off (SLUICE_DEV_ISSUER)")
    origin = request_cross_origin(request)
    if origin is not None:
        return _cross_origin_answer(request, origin)
    if request.method == "OPTIONS":
        return HttpResponse(status=204, headers={"allow": "POST, OPTIONS"})
    refused = CsrfViewMiddleware(lambda _: HttpResponse()).process_view(request, _token_answer, (), {})
    if refused is not None:
        return _error(403, "csrf_failed", "send the csrftoken cookie's value in the X-CSRFToken header")
    return _token_answer(request)


def _cross_origin_answer(request: HttpRequest, origin: str) -> HttpResponse:
    """The preflight or the JSON POST of a page on another origin, if the demo guard's routes allow it."""
    if not issuer_allows(origin):
        return _error(
            403,
            "origin_not_allowed",
            f"origin {origin} may not ask the development issuer for tokens: allow it on a route of the "
            f"{DEV_GUARD} guard (or in SLUICE_CORS_ALLOW_ORIGINS, for routes without origins of their own)",
        )
    if request.method == "OPTIONS":
        response = HttpResponse(status=204)
    elif request.content_type != "application/json":
        # Only a JSON POST: a form another site's page could send without a preflight is not one.
        response = _error(415, "unsupported_media_type", "send the request as application/json")
    else:
        response = _token_answer(request)
    for name, value in cors_headers(origin, preflight=request.method == "OPTIONS").items():
        response[name] = value
    patch_vary_headers(response, ["origin"])
    return response


def _token_answer(request: HttpRequest) -> JsonResponse:
    """The token, or why not (JSON): signed in, a key, a valid body."""
    if not request.user.is_authenticated:
        return _error(401, "unauthorized", "sign in first (/admin/login/)")
    key = issuer_key_current()
    if key is None:
        return _error(503, "issuer_unavailable", "no issuer key yet: start with runstreams --demo")
    try:
        body = json.loads(request.body or b"{}")
    except ValueError:
        return _error(400, "invalid_json", "the body is not JSON")
    if not isinstance(body, dict):
        return _error(400, "invalid_request", "the body must be a JSON object")
    roles = body.get("roles", ["scores:read"])
    if (
        not isinstance(roles, list)
        or len(roles) > MAX_ROLES
        or not all(isinstance(r, str) and r and " " not in r and len(r) <= 100 for r in roles)
    ):
        return _error(400, "invalid_roles", f"roles: a list of at most {MAX_ROLES} names without spaces")
    lifetime = body.get("lifetime", DEFAULT_LIFETIME_SECONDS)
    if type(lifetime) is not int or not LIFETIME_MIN_SECONDS <= lifetime <= LIFETIME_MAX_SECONDS:
        return _error(
            400, "invalid_lifetime", f"lifetime: whole seconds from {LIFETIME_MIN_SECONDS} to {LIFETIME_MAX_SECONDS}"
        )
    issued = token_issue(key, identity=request.user.get_username(), roles=tuple(roles), lifetime=lifetime)
    logger.info("issued a %ss development token to %s (roles %s)", lifetime, issued.identity, " ".join(roles))
    return JsonResponse(issued.as_json())

"""The development token endpoint: ``POST /auth/token`` for a signed-in user (SPEC 4, demo)."""

from __future__ import annotations

import json
import logging
from functools import lru_cache
from pathlib import Path

from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from .conf import guards_settings
from .issuer import LIFETIME_MAX_SECONDS, LIFETIME_MIN_SECONDS, IssuerKey, issuer_key_load, token_issue

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
@require_POST
def token(request: HttpRequest) -> JsonResponse:
    """A short-lived access token for the signed-in user, with the roles asked for (JSON body, all optional).

    ``{"roles": ["scores:read"], "lifetime": 60}``. Only with the development issuer on: it
    grants any role to any signed-in user, which is what a demo needs and production must not have.
    """
    if not guards_settings.DEV_ISSUER:
        return _error(404, "not_found", "the development token issuer is off (SLUICE_DEV_ISSUER)")
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

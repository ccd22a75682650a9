"""Which pages on other origins the development issuer answers (``POST /auth/token`` and its preflight).

The issuer reads the signed-in user's session cookie, so a page on another
origin calls it with ``credentials: "include"``; the answer must then name that
origin (never ``*``). It answers the origins the demo guard's routes allow (a
route without origins of its own: ``SLUICE_CORS_ALLOW_ORIGINS``), so a page that
may open the demo's guarded streams may get their tokens too. A route that
allows any origin (``*``) does not open the issuer to every site.

Browsers send a cross-origin JSON POST only after a preflight, which is
answered for those origins alone, so the issuer's JSON-only cross-origin path
needs no CSRF token; a same-origin request still takes Django's CSRF check.
"""

from __future__ import annotations

from django.http import HttpRequest

from common.origins import ANY_ORIGIN, origin_allowed, origin_is_host

from .conf import guards_settings
from .issuer import DEV_GUARD
from .models import Guard

ALLOW_HEADERS = "content-type, x-csrftoken"
PREFLIGHT_MAX_AGE = "600"


def issuer_origins() -> tuple[str, ...]:
    """The named origins the demo guard's enabled routes allow (each route's own, else the project's)."""
    guard = Guard.objects.filter(name=DEV_GUARD).first()
    if guard is None:
        return ()
    default = tuple(guards_settings.CORS_ALLOW_ORIGINS)
    origins: list[str] = []
    for own in guard.routes.filter(enabled=True).values_list("allow_origins", flat=True):
        origins += [origin for origin in (own or default) if origin != ANY_ORIGIN and origin not in origins]
    return tuple(origins)


def request_cross_origin(request: HttpRequest) -> str | None:
    """The request's ``Origin`` unless it has none or it is the gateway's own."""
    origin = request.headers.get("origin")
    if origin is None or origin_is_host(origin, request.scheme or "http", request.get_host()):
        return None
    return origin


def issuer_allows(origin: str) -> bool:
    return origin_allowed(origin, issuer_origins())


def cors_headers(origin: str, *, preflight: bool = False) -> dict[str, str]:
    """The headers that let ``origin``'s script read the answer, with the session cookie (and ``Vary: origin``)."""
    headers = {
        "access-control-allow-origin": origin,
        "access-control-allow-credentials": "true",
    }
    if preflight:
        headers["access-control-allow-methods"] = "POST"
        headers["access-control-allow-headers"] = ALLOW_HEADERS
        headers["access-control-max-age"] = PREFLIGHT_MAX_AGE
    return headers

"""Cross-origin access per route: response headers, preflight answers and refusals (plain data, no Django).

A request whose ``Origin`` the route does not allow is refused with a JSON 403
naming the origin and the route (:class:`OriginRefused`) rather than streamed
to a browser that would discard every event; the refusal carries just enough
CORS headers for the page's script to read why (it holds no data). A preflight
from such an origin is refused with 403 too. A request without ``Origin`` (a
server-side client), or from the gateway's own pages, is never refused for it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from common.origins import origin_allowed, origin_is_host
from streams.core.errors import OriginNotAllowed

__all__ = ["OriginRefused", "cors_headers", "cross_origin", "origin_allowed", "preflight_headers", "refusal_headers"]

Headers = list[tuple[bytes, bytes]]

# What a cross-origin client may send: EventSource sends Last-Event-ID on reconnects,
# fetch-based clients send the token and the challenge response's content type.
ALLOW_HEADERS = b"authorization, content-type, last-event-id, cache-control"
# What a cross-origin script may read from a refusal (fetch; EventSource sees no headers).
EXPOSE_HEADERS = b"www-authenticate, retry-after, allow, content-type"
PREFLIGHT_MAX_AGE = b"600"


def request_header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return str(value.decode("latin-1"))
    return None


class OriginRefused(OriginNotAllowed):
    """A request from an origin its route does not allow: the body names both."""

    def __init__(self, origin: str, route: str) -> None:
        super().__init__(
            f"origin {origin} is not allowed on route {route}: add it to the route's allow_origins "
            "(or to SLUICE_CORS_ALLOW_ORIGINS, which routes without allow_origins inherit)"
        )
        self.origin = origin
        self.route = route

    def fields(self) -> dict[str, object]:
        return {"origin": self.origin, "route": self.route}


def cross_origin(scope: dict[str, Any]) -> str | None:
    """The request's ``Origin`` unless it has none or it is the gateway's own (``Host``, scheme)."""
    origin = request_header(scope, b"origin")
    if origin is None or origin_is_host(origin, str(scope.get("scheme", "http")), request_header(scope, b"host")):
        return None
    return origin


def refusal_headers(origin: str) -> Headers:
    """What lets the refused page's script read the refusal's JSON (``fetch``; without credentials)."""
    return [
        (b"access-control-allow-origin", origin.encode("latin-1")),
        (b"vary", b"origin"),
        (b"access-control-expose-headers", EXPOSE_HEADERS),
    ]


def cors_headers(scope: dict[str, Any], allow_origins: Iterable[str], allow_credentials: bool) -> Headers:
    """Headers for an actual response: none unless the request's ``Origin`` is allowed."""
    origin = request_header(scope, b"origin")
    allowed = tuple(allow_origins)
    if origin is None or not origin_allowed(origin, allowed):
        return []
    if "*" in allowed and not allow_credentials:
        return [(b"access-control-allow-origin", b"*"), (b"access-control-expose-headers", EXPOSE_HEADERS)]
    headers = [
        (b"access-control-allow-origin", origin.encode("latin-1")),
        (b"vary", b"origin"),
        (b"access-control-expose-headers", EXPOSE_HEADERS),
    ]
    if allow_credentials:
        headers.append((b"access-control-allow-credentials", b"true"))
    return headers


def is_preflight(scope: dict[str, Any]) -> bool:
    return (
        scope["method"] == "OPTIONS"
        and request_header(scope, b"origin") is not None
        and request_header(scope, b"access-control-request-method") is not None
    )


def preflight_headers(
    scope: dict[str, Any], allow_origins: Iterable[str], allow_credentials: bool, methods: Iterable[str]
) -> Headers:
    """The answer to a preflight, or :class:`OriginNotAllowed` for an origin or method the route refuses."""
    allowed_methods = tuple(methods)
    origin = request_header(scope, b"origin") or ""
    method = (request_header(scope, b"access-control-request-method") or "").upper()
    headers = cors_headers(scope, allow_origins, allow_credentials)
    if not headers:
        raise OriginNotAllowed(f"origin {origin!r} may not open this route")
    if method not in allowed_methods:
        raise OriginNotAllowed(f"{method} is not allowed here; allowed: {', '.join(allowed_methods)}")
    return [
        *headers,
        (b"access-control-allow-methods", ", ".join(allowed_methods).encode()),
        (b"access-control-allow-headers", ALLOW_HEADERS),
        (b"access-control-max-age", PREFLIGHT_MAX_AGE),
    ]

"""Web origins as CORS compares them: ``scheme://host[:port]``, or ``*`` for any (RFC 6454).

A browser sends the ``Origin`` header exactly in that form, so an allowed
origin written with a path (``https://app.example.com/index.html``) or a
trailing slash would never match: such a value is refused where it is
configured (admin, API, configuration files, ``SLUICE_CORS_ALLOW_ORIGINS``)
rather than accepted and silently useless.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

ANY_ORIGIN = "*"

_HOST = r"(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*|\[[0-9a-f:.]+\])"
_ORIGIN = re.compile(rf"(?P<scheme>https?)://(?P<host>{_HOST})(?::(?P<port>[0-9]{{1,5}}))?\Z", re.IGNORECASE)
_DEFAULT_PORTS = {"http": "80", "https": "443"}


def origin_problem(value: object) -> str | None:
    """Why ``value`` is not an origin (or ``*``) a route can allow; None if it is one."""
    if not isinstance(value, str):
        return f"{value!r} is not text: give an origin such as https://app.example.com"
    if value == ANY_ORIGIN:
        return None
    match = _ORIGIN.match(value)
    if match is None:
        if value.rstrip("/") != value and _ORIGIN.match(value.rstrip("/")):
            return f"{value!r} ends with '/': an origin has no path (write {value.rstrip('/')})"
        return f"{value!r} is not an origin: give scheme://host[:port] (http or https, no path), or *"
    port = match.group("port")
    if port is not None and not 0 < int(port) < 65536:
        return f"{value!r}: the port is not a number from 1 to 65535"
    return None


def origins_problem(values: object) -> str | None:
    """Why ``values`` is not a list of origins (the first bad one named); None if it is one."""
    if not isinstance(values, (list, tuple)):
        return 'give a list of origins, e.g. ["https://app.example.com"], or ["*"]'
    for value in values:
        problem = origin_problem(value)
        if problem is not None:
            return problem
    return None


def origins_parse(text: str) -> tuple[str, ...]:
    """Origins written in one string, separated by commas or whitespace (an environment variable)."""
    return tuple(part for part in re.split(r"[\s,]+", text) if part)


def origin_key(origin: str) -> str:
    """An origin as compared: lower case, without a trailing slash or its scheme's default port."""
    origin = origin.strip().rstrip("/").lower()
    scheme, _, rest = origin.partition("://")
    default = _DEFAULT_PORTS.get(scheme)
    if default is not None and rest.endswith(":" + default):
        rest = rest[: -len(default) - 1]
    return f"{scheme}://{rest}" if rest else origin


def origin_allowed(origin: str, allow_origins: Iterable[str]) -> bool:
    """Whether ``origin`` (an ``Origin`` header) is one of ``allow_origins``, or they allow any."""
    allowed = tuple(allow_origins)
    if ANY_ORIGIN in allowed:
        return True
    key = origin_key(origin)
    return any(origin_key(candidate) == key for candidate in allowed)


def origin_is_host(origin: str, scheme: str, host: str | None) -> bool:
    """Whether ``origin`` is the request's own (a page of the gateway itself: ``Host`` and scheme agree).

    A proxy that terminates TLS may hand the gateway ``http`` for an ``https``
    page, so an origin whose host and port are the ``Host`` header's counts too.
    """
    if not host:
        return False
    own = origin_key(f"{scheme}://{host}")
    key = origin_key(origin)
    if key == own:
        return True
    return key.partition("://")[2] in (host.lower(), origin_key(f"https://{host}").partition("://")[2])

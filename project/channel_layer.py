"""``REDIS_URL`` as channels-redis configuration: plain, TLS (``rediss://``) or through Sentinel.

The client's socket timeout must outlast the layer's blocking receive
(channels-redis waits :data:`BLOCKING_RECEIVE_SECONDS` on ``BZPOPMIN``), or every
idle receive ends in a ``TimeoutError``. A URL's own ``socket_timeout`` query
argument still wins.

Sentinel: ``redis+sentinel://[[user]:password@]host:port[,host:port...]/service[/db][?options]``
(``rediss+sentinel://`` for TLS to the master). ``sentinel_password`` and
``sentinel_username`` in the query authenticate to the sentinels themselves; the
other query arguments are redis-py connection options for the master.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

BLOCKING_RECEIVE_SECONDS = 5  # channels_redis.core.RedisChannelLayer.brpop_timeout
SOCKET_TIMEOUT_SECONDS = BLOCKING_RECEIVE_SECONDS + 5
CONNECT_TIMEOUT_SECONDS = 3
SENTINEL_SCHEMES = {"redis+sentinel": False, "rediss+sentinel": True}
SENTINEL_PORT = 26379
OPTION_TYPES: dict[str, Any] = {
    "db": int,
    "socket_timeout": float,
    "socket_connect_timeout": float,
    "health_check_interval": int,
    "max_connections": int,
}


def channel_layers(url: str) -> dict[str, Any]:
    """Django's ``CHANNEL_LAYERS`` for ``url`` (the in-memory layer when it is empty: one process only)."""
    if not url:
        return {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    return {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [redis_host(url)]}}}


def redis_host(url: str) -> dict[str, Any]:
    """One channels-redis ``hosts`` entry for ``url``."""
    parts = urlsplit(url)
    timeouts: dict[str, float] = {
        "socket_timeout": SOCKET_TIMEOUT_SECONDS,
        "socket_connect_timeout": CONNECT_TIMEOUT_SECONDS,
    }
    if parts.scheme in ("redis", "rediss", "unix"):
        # redis-py reads the rest (TLS, db, password, its own query options) from the URL; its options win.
        keepalive = {} if parts.scheme == "unix" else {"socket_keepalive": True}
        return {"address": url, **keepalive, **timeouts}
    if parts.scheme not in SENTINEL_SCHEMES:
        raise ImproperlyConfigured(
            f"REDIS_URL: unknown scheme {parts.scheme!r} (redis://, rediss://, unix://, redis+sentinel://, "
            "rediss+sentinel://)"
        )
    return _sentinel_host(url, tls=SENTINEL_SCHEMES[parts.scheme], timeouts=timeouts)


def _sentinel_host(url: str, *, tls: bool, timeouts: dict[str, float]) -> dict[str, Any]:
    parts = urlsplit(url)
    credentials, _, hosts = parts.netloc.rpartition("@")
    sentinels = [_host_port(entry) for entry in hosts.split(",") if entry]
    path = [unquote(segment) for segment in parts.path.split("/") if segment]
    if not sentinels or not path or len(path) > 2:
        raise ImproperlyConfigured("REDIS_URL: redis+sentinel://host:port[,host:port...]/service[/db] expected")
    options: dict[str, Any] = {}
    sentinel_options: dict[str, Any] = {**timeouts}
    for name, value in parse_qsl(parts.query):
        if name in ("sentinel_password", "sentinel_username"):
            sentinel_options[name.removeprefix("sentinel_")] = value
        else:
            options[name] = OPTION_TYPES.get(name, str)(value)
    host: dict[str, Any] = {
        "master_name": path[0],
        "sentinels": sentinels,
        "sentinel_kwargs": sentinel_options,
        "socket_keepalive": True,
        **timeouts,
        **options,
    }
    if len(path) == 2:
        host["db"] = int(path[1])
    if credentials:
        username, has_password, password = credentials.partition(":")
        if username:
            host["username"] = unquote(username)
        if has_password:
            host["password"] = unquote(password)
    if tls:
        host["ssl"] = True
    return host


def _host_port(entry: str) -> tuple[str, int]:
    if entry.startswith("["):  # [IPv6]:port
        address, _, port = entry[1:].partition("]")
        return address, int(port.lstrip(":") or SENTINEL_PORT)
    address, _, port = entry.rpartition(":") if ":" in entry else (entry, "", "")
    return address, int(port or SENTINEL_PORT)

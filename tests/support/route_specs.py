"""Compiled route specs for in-process tests, as the route table would build them."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from streams.core.patterns import pattern_compile
from streams.core.routes import RouteSpec
from streams.core.templating import template_compile


def route_spec(route_id: int = 1, path: str = "/secure", topic: str = "t", **fields: Any) -> RouteSpec:
    """A route with the model's defaults; ``fields`` set the rest (guard, roles, ...)."""
    base = RouteSpec(
        id=route_id,
        pattern=pattern_compile(path),
        topic=template_compile(topic),
        filters=(),
        event_id="etag",
        initial="live",
        allow_since=False,
        binary="skip",
        retry_ms=2000,
        heartbeat_seconds=15,
        max_pending_bytes=1 << 20,
    )
    return replace(base, **fields)

"""Reads of stream configuration, cached briefly for the hot path."""

from __future__ import annotations

import logging
import time

from channels.db import database_sync_to_async
from django.conf import settings

from guards.models import Guard
from guards.policy import GuardPolicy, PolicyError

from .cache import CacheLimits
from .models import Route, Topic
from .patterns import pattern_compile
from .routing import FilterSpec, RouteSpec, RouteTable
from .templating import template_compile

logger = logging.getLogger("sluice.guards")

_table: tuple[float, RouteTable] | None = None


def guard_policy(guard: Guard) -> GuardPolicy:
    """The guard's compiled policy; one that no longer compiles refuses every token (fail closed)."""
    try:
        return guard.policy()
    except PolicyError as exc:
        logger.error("guard %s is unusable (%s: %s); its routes refuse every token", guard.name, exc.field, exc)
        return GuardPolicy(name=guard.name, algorithms=())


def route_table_build() -> RouteTable:
    """Compile every enabled route, in match order."""
    specs = []
    for route in (
        Route.objects.filter(enabled=True).select_related("guard").prefetch_related("filters").order_by("order", "path")
    ):
        filters = tuple(
            FilterSpec(
                key=template_compile(f.key) if f.key else None,
                headers=tuple((name, template_compile(value)) for name, value in sorted(f.headers.items())),
            )
            for f in route.filters.all()
        )
        specs.append(
            RouteSpec(
                id=route.pk,
                pattern=pattern_compile(route.path),
                topic=template_compile(route.topic),
                filters=filters,
                event_id=route.event_id,
                initial=route.initial,
                allow_since=route.allow_since,
                binary=route.binary,
                retry_ms=route.retry_ms,
                heartbeat_seconds=route.heartbeat_seconds,
                max_pending_bytes=route.max_pending_bytes,
                guard=guard_policy(route.guard) if route.guard is not None else None,
                roles=tuple(route.roles or ()),
                kind=route.kind,
                upstream=route.upstream,
                allow_origins=tuple(route.allow_origins or ()),
                allow_credentials=route.allow_credentials,
                guard_revision=f"{route.guard_id}@{route.guard.updated.isoformat()}" if route.guard else "",
            )
        )
    return RouteTable(tuple(specs))


async def route_table_reload() -> RouteTable:
    """The route table, read again now (after a configuration change)."""
    route_table_invalidate()
    return await route_table()


async def route_table() -> RouteTable:
    """The route table, rebuilt at most every ``ROUTE_CACHE_SECONDS``."""
    global _table
    now = time.monotonic()
    if _table is None or now - _table[0] >= settings.SLUICE["ROUTE_CACHE_SECONDS"]:
        _table = (now, await database_sync_to_async(route_table_build)())
    return _table[1]


def route_table_invalidate() -> None:
    global _table
    _table = None


def topic_limits(name: str) -> CacheLimits:
    """Cache bounds for ``name``: its Topic row, or the defaults if it has none."""
    topic = Topic.objects.filter(name=name).first()
    if topic is None:
        return CacheLimits()
    return CacheLimits(
        max_messages=topic.cache_max_messages,
        max_bytes=topic.cache_max_bytes,
        max_age_seconds=float(topic.cache_max_age_seconds),
    )


topic_limits_async = database_sync_to_async(topic_limits)

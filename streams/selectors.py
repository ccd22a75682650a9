"""Reads of stream configuration, cached briefly for the hot path."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from channels.db import database_sync_to_async
from django.conf import settings

from guards.models import Guard
from guards.policy import GuardPolicy, PolicyError

from .cache import CacheLimits
from .models import Route, Schema, Topic
from .patterns import PatternError, pattern_compile
from .routing import FilterSpec, RouteSpec, RouteTable
from .schemas import SchemaCheck, SchemaUnavailable, registry_schemas, schema_reject_all, schema_validator_compile
from .templating import template_compile

logger = logging.getLogger("sluice.guards")

_table: tuple[float, RouteTable] | None = None
# Unusable schemas already reported, so a route table rebuilt every second does not repeat the error.
_schema_errors_logged: set[str] = set()


def guard_policy(guard: Guard) -> GuardPolicy:
    """The guard's compiled policy; one that no longer compiles refuses every token (fail closed)."""
    try:
        return guard.policy()
    except PolicyError as exc:
        logger.error("guard %s is unusable (%s: %s); its routes refuse every token", guard.name, exc.field, exc)
        return GuardPolicy(name=guard.name, algorithms=())


def schema_check(schema: Schema) -> SchemaCheck:
    """The schema's compiled check (compiled once per version); one that cannot be had admits nothing (fail closed)."""
    try:
        if schema.json_schema is not None:
            return schema_validator_compile(schema.name, schema.json_schema)
        return registry_schemas.check(schema.name, schema.registry_url, schema.subject, schema.version)
    except SchemaUnavailable as exc:
        if str(exc) not in _schema_errors_logged:
            _schema_errors_logged.add(str(exc))
            logging.getLogger("sluice.schemas").error(
                "schema %s is unusable (%s); every value checked against it is skipped", schema.name, exc
            )
        return schema_reject_all(schema.name, str(exc))


def route_table_build() -> RouteTable:
    """Compile every enabled route, in match order."""
    specs = []
    for route in (
        Route.objects.filter(enabled=True)
        .select_related("guard", "schema")
        .prefetch_related("filters")
        .order_by("order", "path")
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
                schema=schema_check(route.schema) if route.schema is not None else None,
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
    return topic_settings(name)[0]


def topic_settings(name: str) -> tuple[CacheLimits, SchemaCheck | None]:
    """Cache bounds and compiled schema for ``name``: its Topic row, or the defaults (no schema) if it has none."""
    topic = Topic.objects.filter(name=name).select_related("schema").first()
    if topic is None:
        return CacheLimits(), None
    limits = CacheLimits(
        max_messages=topic.cache_max_messages,
        max_bytes=topic.cache_max_bytes,
        max_age_seconds=float(topic.cache_max_age_seconds),
    )
    return limits, schema_check(topic.schema) if topic.schema is not None else None


topic_limits_async = database_sync_to_async(topic_limits)
topic_settings_async = database_sync_to_async(topic_settings)


@dataclass(frozen=True, slots=True)
class RouteListing:
    """What the pages show of a route a visitor may open."""

    id: int
    path: str
    kind: str
    guarded: bool
    description: str
    params: tuple[str, ...]
    wildcard: bool

    def as_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "path": self.path,
            "kind": self.kind,
            "guarded": self.guarded,
            "description": self.description,
            "params": list(self.params),
            "wildcard": self.wildcard,
        }


def route_listing() -> list[RouteListing]:
    """Enabled routes in match order, with their path parameters (for the landing page and the viewer)."""
    listing = []
    for route in Route.objects.filter(enabled=True).order_by("order", "path"):
        try:
            params = pattern_compile(route.path).params
        except PatternError:
            continue  # not servable either
        listing.append(
            RouteListing(
                id=route.pk,
                path=route.path,
                kind=route.kind,
                guarded=route.guard_id is not None,
                description=route.description or route.topic or route.upstream,
                params=params,
                wildcard="*" in route.path,
            )
        )
    return listing

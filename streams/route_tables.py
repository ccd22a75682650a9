"""The route table: compiled from the configuration, and kept while the configuration's revision stands.

A worker renews its table once every ``SLUICE_ROUTE_CACHE_SECONDS`` (``streams.selectors`` caches it
and serves it while the database is away): :class:`RouteTableSource` asks the database for the
configuration's revision (``streams.models.revision``) and rebuilds the table only when it moved.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from guards.models import Guard
from guards.policy import GuardPolicy, PolicyError
from streams.core.patterns import pattern_compile
from streams.core.routes import FilterSpec, RouteSpec, RouteTable
from streams.core.schemas import (
    SchemaCheck,
    SchemaUnavailable,
    registry_schemas,
    schema_reject_all,
    schema_validator_compile,
)
from streams.core.templating import template_compile
from streams.core.where import where_template
from streams.models import ConfigRevision, Route, RouteFilter, Schema, reserved_endpoints

logger = logging.getLogger("sluice.guards")


# Unusable schemas already reported, so a route table renewed every second does not repeat the error.
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


def route_filters_read(route_ids: list[int]) -> dict[int, list[tuple[str, dict[str, str]]]]:
    """The filters of the routes ``route_ids`` as (key, headers), by route id, in their order.

    Read as plain values, not with ``prefetch_related``: a prefetched route and the queryset of its
    filters refer to each other, so every route of every table built would stay in memory until the
    cycle collector's next full collection (every few minutes): with the table rebuilt every second,
    or on every request, that was most of a gateway's growth under churn (docs/reliability.md).
    """
    filters: dict[int, list[tuple[str, dict[str, str]]]] = {}
    rows = RouteFilter.objects.filter(route_id__in=route_ids).order_by("id").values_list("route_id", "key", "headers")
    for route_id, key, headers in rows:
        filters.setdefault(route_id, []).append((key, headers))
    return filters


def config_revision() -> str | None:
    """The configuration's revision token (None where the database keeps none: every renewal rebuilds)."""
    return ConfigRevision.objects.filter(pk=ConfigRevision.ROW).values_list("token", flat=True).first()


def route_table_build() -> RouteTable:
    """Compile every enabled route, in match order."""
    return _route_table_compile().table


@dataclass(frozen=True, slots=True)
class BuiltTable:
    """A compiled route table, the revision it was read at, and its routes' registry schemas by position.

    A registry schema's check follows the registry ("latest" is looked up again now and then, an
    unreachable registry is asked again): it is not fixed by the configuration's revision.
    """

    table: RouteTable
    revision: str | None = None
    registry_schemas: tuple[tuple[int, Schema], ...] = ()


def _route_table_compile() -> BuiltTable:
    specs: list[RouteSpec] = []
    registry: list[tuple[int, Schema]] = []
    # The routes first, then their filters, as prefetching did: a route created between the two reads
    # is not in the table yet, rather than in it without its filters.
    routes = list(Route.objects.filter(enabled=True).select_related("guard", "schema").order_by("order", "path"))
    filters_by_route = route_filters_read([route.pk for route in routes])
    for route in routes:
        filters = tuple(
            FilterSpec(
                key=template_compile(key) if key else None,
                headers=tuple((name, template_compile(value)) for name, value in sorted(headers.items())),
            )
            for key, headers in filters_by_route.get(route.pk, ())
        )
        if route.schema is not None and route.schema.json_schema is None:
            registry.append((len(specs), route.schema))
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
                where=where_template(route.where) if route.where.strip() else None,
                client_filter=route.client_filter,
                compression=route.compression,
                compression_min_bytes=route.compression_min_bytes,
                conflate=route.conflate_max_rate if route.conflate else None,
            )
        )
    return BuiltTable(RouteTable(tuple(specs), reserved_endpoints()), registry_schemas=tuple(registry))


class RouteTableSource:
    """The route table, rebuilt only when the configuration's revision moved since it was built.

    Renewing an unchanged table costs one query of one row, where a rebuild of 400 routes costs tens
    of milliseconds of a core (docs/benchmarks.md). The revision is read before the routes: a change
    committed during the build moves it again, so the next renewal rebuilds.
    """

    def __init__(self) -> None:
        self._built: BuiltTable | None = None

    def read(self) -> RouteTable:
        revision = config_revision()
        built = self._built
        if built is None or revision is None or built.revision != revision:
            built = replace(_route_table_compile(), revision=revision)
        elif built.registry_schemas:
            built = _registry_schemas_renewed(built)
        self._built = built if revision is not None else None
        return built.table

    def forget(self) -> None:
        """Rebuild on the next read, whatever the revision says (a change heard of in this process)."""
        self._built = None


def _registry_schemas_renewed(built: BuiltTable) -> BuiltTable:
    """``built`` with its registry schemas' checks as the registry has them now (itself if none moved)."""
    routes = built.table.routes
    checks = {position: schema_check(schema) for position, schema in built.registry_schemas}
    if all(check is routes[position].schema for position, check in checks.items()):
        return built
    specs = tuple(
        replace(spec, schema=checks[position]) if position in checks else spec for position, spec in enumerate(routes)
    )
    return replace(built, table=RouteTable(specs, built.table.reserved))

"""The route table as plain data: what the stream app needs, with no ORM in sight."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from guards.policy import GuardPolicy
from streams.core.filters import FilterSet, MessageFilter
from streams.core.patterns import PathPattern
from streams.core.reserved import RESERVED, ReservedEndpoints
from streams.core.schemas import SchemaCheck
from streams.core.templating import ExpansionContext, Template
from streams.core.where import WhereTemplate, where_resolve
from streams.core.where.syntax import Node


class RouteKind(StrEnum):
    """What serves a route: a Kafka topic, or a relayed upstream SSE stream (SPEC 3)."""

    SSE_KAFKA = "sse-kafka"
    SSE_PROXY = "sse-proxy"


@dataclass(frozen=True, slots=True)
class FilterSpec:
    key: Template | None
    headers: tuple[tuple[str, Template], ...]


@dataclass(frozen=True, slots=True)
class RouteSpec:
    """One enabled route, compiled."""

    id: int
    pattern: PathPattern
    topic: Template
    filters: tuple[FilterSpec, ...]
    event_id: str
    initial: str
    allow_since: bool
    binary: str
    retry_ms: int
    heartbeat_seconds: int
    max_pending_bytes: int
    guard: GuardPolicy | None = None
    roles: tuple[str, ...] = ()
    kind: str = RouteKind.SSE_KAFKA
    upstream: str = ""
    allow_origins: tuple[str, ...] = ()
    allow_credentials: bool = False
    # Changes whenever the route's guard (or which guard it is) changes: open streams are then re-admitted.
    guard_revision: str = ""
    schema: SchemaCheck | None = None
    where: WhereTemplate | None = None  # the route's own filter over what records say
    client_filter: bool = False  # takes ``?where=``, ANDed with its own filters
    # Compress its streams for clients that accept it, unless its events average under min_bytes.
    compression: bool = False
    compression_min_bytes: int = 0
    # Conflation by key (docs/filters.md): None is lossless; else the most writes a second per stream (0: no cap).
    conflate: int | None = None

    def resolve(self, context: ExpansionContext, client_where: Node | None = None) -> tuple[str, FilterSet]:
        """The topic and filters for one request, a client's ``where`` ANDed in (raises ``TemplateError``)."""
        topic = self.topic.expand(context)
        filters = tuple(
            MessageFilter(
                key=f.key.expand(context).encode("utf-8") if f.key is not None else None,
                headers=tuple((name, value.expand(context).encode("utf-8")) for name, value in f.headers),
            )
            for f in self.filters
        )
        return topic, FilterSet(filters, where_resolve(self.where, context, client_where))


@dataclass(frozen=True, slots=True)
class RouteTable:
    routes: tuple[RouteSpec, ...]
    reserved: ReservedEndpoints = RESERVED

    def match(self, path: str) -> tuple[RouteSpec, dict[str, str]] | None:
        """The first route (by order, then path) whose pattern matches ``path``.

        Sluice's own endpoints win: their paths never reach a route, however general.
        """
        if self.reserved.endpoint(path) is not None:
            return None
        for route in self.routes:
            params = route.pattern.match(path)
            if params is not None:
                return route, params
        return None

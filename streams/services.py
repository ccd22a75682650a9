"""Writes to stream configuration: the one path the admin, commands and API share.

An upsert takes the row's natural key and the columns to set, each a typed
keyword (the ``...Fields`` dicts below); a column left out keeps its value (or
its default on a new row), so the API's partial update and a file's item both fit.
"""

from __future__ import annotations

from typing import Any, TypedDict

from django.db import transaction
from typing_extensions import Unpack

from common.upsert import model_upsert
from guards.models import Guard
from streams.models import Cluster, Route, RouteFilter, Schema, Topic


class SchemaFields(TypedDict, total=False):
    description: str
    json_schema: dict[str, Any] | bool | None
    registry_url: str
    subject: str
    version: int | None


class ClusterFields(TypedDict, total=False):
    description: str
    bootstrap_servers: str
    properties: dict[str, Any]
    registry: str


class TopicFields(TypedDict, total=False):
    description: str
    schema: Schema | None
    cluster: Cluster | str | None  # by name: Cluster.DoesNotExist if there is none
    value_format: str
    key_format: str
    value_avro_schema: dict[str, Any] | list[Any] | str | None
    key_avro_schema: dict[str, Any] | list[Any] | str | None
    registry: str
    partitions: int | None
    replication_factor: int | None
    configs: dict[str, str | int | float]
    cache_max_messages: int
    cache_max_bytes: int
    cache_max_age_seconds: int


class RouteFields(TypedDict, total=False):
    kind: str
    order: int
    topic: str
    upstream: str
    schema: Schema | None
    event_id: str
    initial: str
    allow_since: bool
    binary: str
    retry_ms: int
    heartbeat_seconds: int
    max_pending_bytes: int
    guard: Guard | str | None  # by name: Guard.DoesNotExist if there is none
    roles: list[str]
    allow_origins: list[str]
    allow_credentials: bool
    where: str
    client_filter: bool
    compression: bool
    compression_min_bytes: int
    conflate: str
    conflate_max_rate: int
    enabled: bool
    description: str


class RouteFilterSpec(TypedDict, total=False):
    key: str
    headers: dict[str, str]


@transaction.atomic
def schema_upsert(*, name: str, **fields: Unpack[SchemaFields]) -> Schema:
    """Create or update the schema called ``name`` (validated like the admin form)."""
    return model_upsert(Schema, {"name": name}, fields)


@transaction.atomic
def cluster_upsert(*, name: str, **fields: Unpack[ClusterFields]) -> Cluster:
    """Create or update the cluster called ``name`` (validated like the admin form: secrets only by reference)."""
    return model_upsert(Cluster, {"name": name}, fields)


@transaction.atomic
def topic_upsert(*, name: str, **fields: Unpack[TopicFields]) -> Topic:
    """Create or update the topic called ``name`` (validated like the admin form).

    ``cluster`` may be a :class:`Cluster`, its name (``Cluster.DoesNotExist`` if there is none) or None.
    """
    cluster = fields.get("cluster")
    if isinstance(cluster, str):
        fields["cluster"] = Cluster.objects.get(name=cluster)
    return model_upsert(Topic, {"name": name}, fields)


@transaction.atomic
def route_upsert(*, path: str, filters: list[RouteFilterSpec] | None = None, **fields: Unpack[RouteFields]) -> Route:
    """Create or update the route for ``path``; ``filters`` (if given) replaces its filters.

    ``guard`` may be a :class:`Guard`, its name (``Guard.DoesNotExist`` if there is none) or None.
    """
    guard = fields.get("guard")
    if isinstance(guard, str):
        fields["guard"] = Guard.objects.get(name=guard)
    route = model_upsert(Route, {"path": path}, fields)
    if filters is not None:
        route.filters.all().delete()
        for spec in filters:
            route_filter = RouteFilter(route=route, key=spec.get("key") or "", headers=spec.get("headers") or {})
            route_filter.full_clean()
            route_filter.save()
    return route


@transaction.atomic
def schema_delete(*, schema: Schema) -> None:
    """Delete ``schema`` (``ProtectedError`` while a topic or route names it)."""
    schema.delete()


@transaction.atomic
def cluster_delete(*, cluster: Cluster) -> None:
    """Delete ``cluster`` (``ProtectedError`` while a topic names it)."""
    cluster.delete()


@transaction.atomic
def topic_delete(*, topic: Topic) -> None:
    topic.delete()


@transaction.atomic
def route_delete(*, route: Route) -> None:
    route.delete()

"""Writes to stream configuration: the one path the admin, commands and API share."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from common.upsert import model_upsert
from guards.models import Guard
from streams.models import Cluster, Route, RouteFilter, Schema, Topic


@transaction.atomic
def schema_upsert(*, name: str, **fields: Any) -> Schema:
    """Create or update the schema called ``name`` (validated like the admin form)."""
    return model_upsert(Schema, {"name": name}, fields)


@transaction.atomic
def cluster_upsert(*, name: str, **fields: Any) -> Cluster:
    """Create or update the cluster called ``name`` (validated like the admin form: secrets only by reference)."""
    return model_upsert(Cluster, {"name": name}, fields)


@transaction.atomic
def topic_upsert(*, name: str, **fields: Any) -> Topic:
    """Create or update the topic called ``name`` (validated like the admin form).

    ``cluster`` may be a :class:`Cluster`, its name (``Cluster.DoesNotExist`` if there is none) or None.
    """
    if isinstance(fields.get("cluster"), str):
        fields["cluster"] = Cluster.objects.get(name=fields["cluster"])
    return model_upsert(Topic, {"name": name}, fields)


@transaction.atomic
def route_upsert(*, path: str, filters: list[dict[str, Any]] | None = None, **fields: Any) -> Route:
    """Create or update the route for ``path``; ``filters`` (if given) replaces its filters.

    ``guard`` may be a :class:`Guard`, its name (``Guard.DoesNotExist`` if there is none) or None.
    """
    if isinstance(fields.get("guard"), str):
        fields["guard"] = Guard.objects.get(name=fields["guard"])
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

"""Writes to stream configuration: the one path the admin, commands and API share."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from guards.models import Guard

from .models import Route, RouteFilter, Topic


@transaction.atomic
def topic_upsert(*, name: str, **fields: Any) -> Topic:
    """Create or update the topic called ``name`` (validated like the admin form)."""
    topic = Topic.objects.filter(name=name).first() or Topic(name=name)
    for field, value in fields.items():
        setattr(topic, field, value)
    topic.full_clean()
    topic.save()
    return topic


@transaction.atomic
def route_upsert(*, path: str, filters: list[dict[str, Any]] | None = None, **fields: Any) -> Route:
    """Create or update the route for ``path``; ``filters`` (if given) replaces its filters.

    ``guard`` may be a :class:`Guard`, its name (``Guard.DoesNotExist`` if there is none) or None.
    """
    route = Route.objects.filter(path=path).first() or Route(path=path)
    if isinstance(fields.get("guard"), str):
        fields["guard"] = Guard.objects.get(name=fields["guard"])
    for field, value in fields.items():
        setattr(route, field, value)
    route.full_clean()
    route.save()
    if filters is not None:
        route.filters.all().delete()
        for spec in filters:
            route_filter = RouteFilter(route=route, key=spec.get("key") or "", headers=spec.get("headers") or {})
            route_filter.full_clean()
            route_filter.save()
    return route

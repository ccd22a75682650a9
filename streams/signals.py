"""Configuration changes drop this process's cached route table."""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from .models import Route, RouteFilter, Schema
from .selectors import route_table_invalidate


@receiver([post_save, post_delete], sender=Route)
@receiver([post_save, post_delete], sender=RouteFilter)
@receiver([post_save, post_delete], sender=Schema)
def route_changed(**kwargs: Any) -> None:
    route_table_invalidate()

"""A guard change drops this process's cached route table (routes embed the compiled policy)."""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from streams.selectors import route_table_invalidate

from .models import Guard


@receiver([post_save, post_delete], sender=Guard)
def guard_changed(**kwargs: Any) -> None:
    route_table_invalidate()

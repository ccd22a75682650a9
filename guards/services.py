"""Writes to guard configuration: the one path the admin, commands and API share."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from .models import Guard


@transaction.atomic
def guard_upsert(*, name: str, **fields: Any) -> Guard:
    """Create or update the guard called ``name`` (validated like the admin form)."""
    guard = Guard.objects.filter(name=name).first() or Guard(name=name)
    for field, value in fields.items():
        setattr(guard, field, value)
    guard.full_clean()
    guard.save()
    return guard

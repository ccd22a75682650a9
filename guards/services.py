"""Writes to guard configuration: the one path the admin, commands and API share."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from project.records import model_upsert

from .models import Guard


@transaction.atomic
def guard_upsert(*, name: str, **fields: Any) -> Guard:
    """Create or update the guard called ``name`` (validated like the admin form)."""
    return model_upsert(Guard, {"name": name}, fields)


@transaction.atomic
def guard_delete(*, guard: Guard) -> None:
    """Delete ``guard`` (``ProtectedError`` while a route uses it: its routes must never open up)."""
    guard.delete()

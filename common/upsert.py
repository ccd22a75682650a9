"""Validated writes of configuration rows, shared by every app's services."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from django.db import models

M = TypeVar("M", bound=models.Model)


def model_upsert(model: type[M], lookup: Mapping[str, Any], fields: Mapping[str, object]) -> M:
    """Find the row matching ``lookup`` (or start a new one), set ``fields``, validate like the admin form, save."""
    instance = model._default_manager.filter(**lookup).first() or model(**lookup)
    for field, value in fields.items():
        setattr(instance, field, value)
    instance.full_clean()
    instance.save()
    return instance

"""Abstract bases of the configuration models, and the lists of their columns the API and files derive.

A configuration row is edited in the admin, through the REST API and in
configuration files; the serializers and the file sections list its columns
with :func:`fields_editable` and :func:`fields_read_only`, so a new column is
declared once, on the model (and excluded where it must not appear).
"""

from __future__ import annotations

from collections.abc import Iterable

from django.core.validators import RegexValidator
from django.db import models

# The characters of a row's name: it appears in URLs, files and other rows' references.
NAME_CHARACTERS = RegexValidator(r"^[A-Za-z0-9._-]+$")


class Timestamped(models.Model):
    """When the row was made and last changed (read-only everywhere)."""

    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


class Named(Timestamped):
    """A row other rows, files and URLs refer to by its unique ``name``, listed by name.

    A model whose names follow other rules (a Kafka topic's, a guard's) declares its own ``name``.
    """

    name = models.CharField(max_length=100, unique=True, validators=[NAME_CHARACTERS])
    description = models.CharField(max_length=200, blank=True)

    class Meta:
        abstract = True
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


def fields_editable(
    model: type[models.Model], *, first: str | None = None, exclude: Iterable[str] = ()
) -> tuple[str, ...]:
    """The columns a write may set, in the model's order (``first``, the natural key, leading)."""
    left_out = {*exclude, first}
    names = [
        field.name
        for field in model._meta.concrete_fields
        if field.editable and not field.primary_key and field.name not in left_out
    ]
    return (first, *names) if first is not None else tuple(names)


def fields_read_only(model: type[models.Model]) -> tuple[str, ...]:
    """The columns only Django sets (the timestamps), in the model's order."""
    return tuple(field.name for field in model._meta.concrete_fields if not field.editable and not field.primary_key)


def fields_shown(model: type[models.Model], *, exclude: Iterable[str] = ()) -> tuple[str, ...]:
    """Every column but the primary key and ``exclude``, in the model's order (a read-only view of a row)."""
    left_out = set(exclude)
    return tuple(
        field.name for field in model._meta.concrete_fields if not field.primary_key and field.name not in left_out
    )

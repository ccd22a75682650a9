"""Admin forms that read well: labels in words, choices that say what they mean, numbers wide enough.

A model's field names (``max_pending_bytes``) make poor labels, and the admin's integer
input is 5em wide, too narrow for a byte count. The model keeps its names (no migration
for a label); each admin says how its form calls and sizes them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar, cast

from django import forms
from django.contrib import admin
from django.contrib.admin import widgets
from django.db import models
from django.http import HttpRequest


class BlankWhenNullJSONField(forms.JSONField):
    """A JSON box that is empty, not ``null``, when there is no value (and empty saves as none)."""

    def prepare_value(self, value: Any) -> Any:
        return "" if value is None else super().prepare_value(value)


class ReadableFormAdmin(admin.ModelAdmin):
    """A ModelAdmin whose form fields take their labels, choice labels and widths from the class."""

    # Field name -> the label the form shows.
    field_labels: ClassVar[dict[str, str]] = {}
    # Field name -> the help text the form shows instead of the model's.
    field_help: ClassVar[dict[str, str]] = {}
    # Field name -> {stored value -> what the choice is called on the form}.
    choice_labels: ClassVar[dict[str, dict[str, str]]] = {}
    # Integer fields given the wide input (10em, as the admin gives big integers): byte counts.
    wide_numbers: ClassVar[frozenset[str]] = frozenset()

    def formfield_for_dbfield(self, db_field: models.Field[Any, Any], request: HttpRequest, **kwargs: Any) -> Any:
        if isinstance(db_field, models.JSONField) and db_field.null:
            kwargs.setdefault("form_class", BlankWhenNullJSONField)
        if db_field.name in self.wide_numbers:
            kwargs["widget"] = widgets.AdminBigIntegerFieldWidget
        field = super().formfield_for_dbfield(db_field, request, **kwargs)
        if field is None:
            return None
        if db_field.name in self.field_labels:
            field.label = self.field_labels[db_field.name]
        if db_field.name in self.field_help:
            field.help_text = self.field_help[db_field.name]
        renamed = self.choice_labels.get(db_field.name)
        if renamed and isinstance(field, forms.ChoiceField):
            current = cast("Iterable[tuple[Any, Any]]", field.choices)  # a model field's: flat pairs
            field.choices = [(value, renamed.get(str(value), label)) for value, label in current]
        return field

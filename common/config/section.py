"""Sections of configuration files: the base class every app's section builds on, and the registry.

A file is a mapping of sections (``guards``, ``schemas``, ``topics``,
``routes``; other apps register more, e.g. ``pipelines``), each a list of
items. An item is normalized to a flat ``{dotted key: value}`` form with every
default filled in; a row read back from the database has the same form, so
"unchanged" is plain equality and applying a file twice writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import NoneType
from typing import Any, ClassVar

from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db import models

from common.config.document import ConfigError, ConfigProblem, DocPath, Document
from common.models import fields_editable


class FieldProblem(Exception):
    """A value that cannot be used, found while writing; ``key`` is its dotted YAML key."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key
        self.message = message


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One YAML key of an item (dotted when nested: ``cache.max_bytes``) and the model field it sets."""

    key: str
    model: str
    types: tuple[type, ...]
    ref: type[models.Model] | None = None  # a row of this model, named by its ``name``


def _type_names(types: tuple[type, ...]) -> str:
    names = {
        str: "a string",
        int: "an integer",
        bool: "true or false",
        list: "a list",
        dict: "a mapping",
        NoneType: "null",
    }
    return " or ".join(names.get(t, t.__name__) for t in types)


def _type_ok(value: Any, types: tuple[type, ...]) -> bool:
    if isinstance(value, bool):
        return bool in types  # YAML true is not an integer here
    return isinstance(value, types)


def field_types(field: models.Field[Any, Any], json_types: Mapping[str, tuple[type, ...]]) -> tuple[type, ...]:
    """The YAML types a column takes: its Python type (a reference by name for a foreign key), null if nullable.

    A JSON column takes what ``json_types`` names for it, else the type of its default.
    """
    if field.name in json_types:
        return json_types[field.name]
    if isinstance(field, models.ForeignKey):
        types: tuple[type, ...] = (str,)
    elif isinstance(field, models.BooleanField):
        types = (bool,)
    elif isinstance(field, models.IntegerField):
        types = (int,)
    elif isinstance(field, (models.CharField, models.TextField)):
        types = (str,)
    elif isinstance(field, models.JSONField) and field.get_default() is not None:
        types = (type(field.get_default()),)
    else:
        raise TypeError(f"{field}: name the YAML types of this column in json_types")
    return (*types, NoneType) if field.null else types


def section_fields(section: type[ModelSection]) -> tuple[FieldSpec, ...]:
    """The items' keys: the model's editable columns (the naming key first), renamed and placed as declared."""
    specs: list[FieldSpec] = []
    for name in fields_editable(section.model, first=section.key, exclude=section.exclude):
        field = section.model._meta.get_field(name)
        assert isinstance(field, models.Field)
        ref = field.related_model if isinstance(field, models.ForeignKey) else None
        assert ref is None or isinstance(ref, type)
        specs.append(FieldSpec(section.renames.get(name, name), name, field_types(field, section.json_types), ref))
        specs += [spec for after, spec in section.extra if after == name]
    return tuple(specs)


class ModelSection:
    """A section of the file whose items are rows of ``model``, written through a service.

    Subclasses give the model, how its columns appear in files (``renames``,
    ``json_types``, ``exclude``, ``extra``) and ``upsert``; the table of
    ``fields`` follows from the model's columns. Apps with their own models
    (the pipeline app) subclass this and call :func:`section_register`.
    """

    name: ClassVar[str]  # the section key in the file, e.g. "routes"
    label: ClassVar[str]  # one item, e.g. "route"
    key: ClassVar[str]  # the field that names an item: "name" or "path"
    order: ClassVar[int]  # applied in this order, pruned in reverse
    model: ClassVar[type[models.Model]]
    # A column's key in the file when it is not its name (dotted when nested: "cache.max_bytes").
    renames: ClassVar[Mapping[str, str]] = {}
    # What a JSON column takes in the file (the model's clean checks the shape); other columns follow their type.
    json_types: ClassVar[Mapping[str, tuple[type, ...]]] = {}
    # Columns not written in files (derived from others when the item is written).
    exclude: ClassVar[tuple[str, ...]] = ()
    # Keys that are not columns, each placed after the column it names.
    extra: ClassVar[tuple[tuple[str, FieldSpec], ...]] = ()
    # Derived from the model when the subclass is made, unless the subclass lists them itself.
    fields: ClassVar[tuple[FieldSpec, ...]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "model" in cls.__dict__ and "fields" not in cls.__dict__:
            cls.fields = section_fields(cls)

    def upsert(self, key: str, values: dict[str, Any]) -> None:
        raise NotImplementedError

    # -- reading a file

    def normalize(self, item: Any, path: DocPath, document: Document) -> dict[str, Any]:
        """The item in flat form with every default filled; :class:`ConfigError` naming each bad key."""
        if not isinstance(item, dict):
            raise ConfigError([document.problem(path, f"each item of {self.name} is a mapping")])
        specs = {spec.key: spec for spec in self.fields}
        groups = {spec.key.partition(".")[0] for spec in self.fields if "." in spec.key}
        problems: list[ConfigProblem] = []
        flat: dict[str, Any] = {}
        for key, value in item.items():
            if key in groups:
                if not isinstance(value, dict):
                    problems.append(document.problem((*path, key), f"must be a mapping, not {value!r}"))
                    continue
                for sub, sub_value in value.items():
                    flat[f"{key}.{sub}"] = sub_value
            elif "." in str(key):
                problems.append(document.problem((*path, str(key)), "unknown field (nest it: cache: {max_bytes: ...})"))
            else:
                flat[str(key)] = value
        for dotted, value in flat.items():
            at = (*path, *dotted.split("."))
            spec = specs.get(dotted)
            if spec is None:
                known = ", ".join(sorted({s.key.partition(".")[0] for s in self.fields}))
                if "." in dotted:
                    group = dotted.partition(".")[0]
                    known = ", ".join(s.key.partition(".")[2] for s in self.fields if s.key.startswith(group + "."))
                problems.append(document.problem(at, f"unknown field (known: {known})"))
            elif not _type_ok(value, spec.types):
                problems.append(document.problem(at, f"must be {_type_names(spec.types)}, not {value!r}"))
        if not problems and not flat.get(self.key):
            problems.append(document.problem(path, f"each {self.label} needs a {self.key}"))
        if problems:
            raise ConfigError(problems)
        return self.complete(flat)

    def complete(self, flat: dict[str, Any]) -> dict[str, Any]:
        """Fill defaults and bring values to the form rows are read back in."""
        return {spec.key: flat[spec.key] if spec.key in flat else self.default(spec) for spec in self.fields}

    def default(self, spec: FieldSpec) -> Any:
        if spec.ref is not None:
            return None
        model_field = self.model._meta.get_field(spec.model)
        assert isinstance(model_field, models.Field)
        return model_field.get_default()

    # -- the database

    def rows(self) -> dict[str, dict[str, Any]]:
        """Every row, in flat form, by the value that names it."""
        return {getattr(row, self.key): self.read(row) for row in self.model._default_manager.all()}

    def read(self, row: Any) -> dict[str, Any]:
        form: dict[str, Any] = {}
        for spec in self.fields:
            value = getattr(row, spec.model)
            form[spec.key] = getattr(value, "name", None) if spec.ref is not None else value
        return form

    def write(self, form: dict[str, Any]) -> None:
        """Create or update the row (through the service); raises ValidationError or FieldProblem."""
        values: dict[str, Any] = {}
        for spec in self.fields:
            value = form[spec.key]
            if spec.ref is not None and value is not None:
                row = spec.ref._default_manager.filter(name=value).first()
                if row is None:
                    raise FieldProblem(
                        spec.key, f"no {spec.ref._meta.verbose_name} named {value!r} (in this file or the database)"
                    )
                value = row
            values[spec.model] = value
        key = values.pop(self.key)
        self.upsert(key, values)

    def delete(self, key: str) -> None:
        self.model._default_manager.filter(**{self.key: key}).delete()

    def problems(
        self, exc: ValidationError, form: dict[str, Any], path: DocPath, document: Document
    ) -> list[ConfigProblem]:
        """The model's validation errors, each at the line of the YAML key it is about."""
        by_model = {spec.model: spec.key for spec in self.fields}
        errors = exc.message_dict if hasattr(exc, "error_dict") else {NON_FIELD_ERRORS: exc.messages}
        out: list[ConfigProblem] = []
        for model_field, messages in errors.items():
            dotted = by_model.get(model_field)
            at = (*path, *dotted.split(".")) if dotted else path
            out += [document.problem(at, message) for message in messages]
        return out

    # -- writing a file

    def export(self, form: dict[str, Any]) -> dict[str, Any]:
        """The item as written in a file: nested groups, defaults left out (the naming key always in)."""
        item: dict[str, Any] = {}
        for spec in self.fields:
            value = form[spec.key]
            if spec.key != self.key and value == self.default(spec):
                continue
            group, _, sub = spec.key.partition(".")
            if sub:
                item.setdefault(group, {})[sub] = value
            else:
                item[group] = value
        return item


SECTIONS: dict[str, ModelSection] = {}
# Sections other apps provide; a file naming one whose app is not installed gets this message.
SECTIONS_ELSEWHERE = {
    "guards": "guards need the guards app (add it to INSTALLED_APPS)",
    "pipelines": "pipelines need the pipeline app (add it to INSTALLED_APPS)",
}


def section_register(section: ModelSection) -> None:
    """Make ``section.name`` a section of configuration files (called from an app's ``ready``)."""
    SECTIONS[section.name] = section


def sections_ordered() -> list[ModelSection]:
    return sorted(SECTIONS.values(), key=lambda section: section.order)

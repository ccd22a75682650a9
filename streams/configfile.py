"""Configuration as code (SPEC 6): a YAML file in, validated rows out through the services, and back.

A file is a mapping of sections (``guards``, ``schemas``, ``topics``,
``routes``; other apps register more, e.g. ``pipelines``), each a list of
items. An item is normalized to a flat ``{dotted key: value}`` form with every
default filled in; a row read back from the database has the same form, so
"unchanged" is plain equality and applying a file twice writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import NoneType
from typing import Any, ClassVar

import yaml
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db import models, transaction
from django.db.models import ProtectedError

from guards.models import Guard
from guards.services import guard_upsert

from .configdoc import ConfigError, ConfigProblem, DocPath, Document, document_read
from .models import Route, RouteFilter, Schema, Topic
from .services import route_upsert, schema_upsert, topic_upsert


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


class ModelSection:
    """A section of the file whose items are rows of ``model``, written through a service.

    Subclasses give the table of fields and ``upsert``; apps with their own
    models (the pipeline app) subclass this and call :func:`section_register`.
    """

    name: ClassVar[str]  # the section key in the file, e.g. "routes"
    label: ClassVar[str]  # one item, e.g. "route"
    key: ClassVar[str]  # the field that names an item: "name" or "path"
    order: ClassVar[int]  # applied in this order, pruned in reverse
    model: ClassVar[type[models.Model]]
    fields: ClassVar[tuple[FieldSpec, ...]]

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


class GuardSection(ModelSection):
    name = "guards"
    label = "guard"
    key = "name"
    order = 10
    model = Guard
    fields = (
        FieldSpec("name", "name", (str,)),
        FieldSpec("description", "description", (str,)),
        FieldSpec("issuer", "issuer", (str,)),
        FieldSpec("audience", "audience", (str,)),
        FieldSpec("algorithms", "algorithms", (list,)),
        FieldSpec("keys", "keys", (list, dict)),
        FieldSpec("jwks_url", "jwks_url", (str,)),
        FieldSpec("secret", "secret", (str,)),
        FieldSpec("roles_claim", "roles_claim", (str,)),
        FieldSpec("identity_claim", "identity_claim", (str,)),
        FieldSpec("attributes", "attributes", (dict,)),
        FieldSpec("challenge", "challenge", (int,)),
        FieldSpec("leeway", "leeway", (int,)),
        FieldSpec("credentials.header", "header_template", (str,)),
        FieldSpec("credentials.header_name", "header_name", (str,)),
        FieldSpec("credentials.query", "query_param", (str,)),
        FieldSpec("credentials.cookie", "cookie_name", (str,)),
    )
    _credentials = ("credentials.header", "credentials.query", "credentials.cookie")

    def upsert(self, key: str, values: dict[str, Any]) -> None:
        if not values["header_template"]:
            values["header_name"], values["header_template"] = "", "Bearer {credentials}"
        guard_upsert(name=key, **values)

    def complete(self, flat: dict[str, Any]) -> dict[str, Any]:
        if any(key.startswith("credentials.") for key in flat):
            # A credentials block lists the places to read a token: the ones it leaves out are off.
            flat = {**dict.fromkeys(self._credentials, ""), **flat}
        keys = flat.get("keys")
        if isinstance(keys, dict) and isinstance(keys.get("keys"), list):
            keys = keys["keys"]  # a pasted JWKS document
        if isinstance(keys, list):
            flat["keys"] = [jwk_canonical(jwk) for jwk in keys]
        if "algorithms" not in flat:
            algs = [jwk.get("alg") for jwk in flat.get("keys") or [] if isinstance(jwk, dict)]
            named = list(dict.fromkeys(alg for alg in algs if isinstance(alg, str)))
            if named:
                flat["algorithms"] = named
            elif flat.get("secret"):
                flat["algorithms"] = ["HS256"]
        form = super().complete(flat)
        if not form["credentials.header"] or not form["credentials.header_name"]:
            form["credentials.header"], form["credentials.header_name"] = "", "authorization"
        return form

    def read(self, row: Any) -> dict[str, Any]:
        form = super().read(row)
        if not row.header_name:
            form["credentials.header"], form["credentials.header_name"] = "", "authorization"
        return form

    def export(self, form: dict[str, Any]) -> dict[str, Any]:
        item = super().export(form)
        item["algorithms"] = form["algorithms"]
        if "credentials" in item:
            # A block turns off the places it leaves out (see complete): name every place in use.
            item["credentials"] = {key.partition(".")[2]: form[key] for key in self._credentials if form[key]}
            if form["credentials.header"] and form["credentials.header_name"] != "authorization":
                item["credentials"]["header_name"] = form["credentials.header_name"]
        order = dict.fromkeys(spec.key.partition(".")[0] for spec in self.fields)
        return {key: item[key] for key in order if key in item}


def jwk_canonical(jwk: Any) -> Any:
    """A JWK with its big numbers in base64url, as RFC 7518 wants (Zilla also takes standard base64)."""
    if not isinstance(jwk, dict):
        return jwk
    out = dict(jwk)
    for member in ("n", "e", "x", "y"):
        value = out.get(member)
        if isinstance(value, str):
            out[member] = value.replace("+", "-").replace("/", "_").rstrip("=")
    return out


class SchemaSection(ModelSection):
    name = "schemas"
    label = "schema"
    key = "name"
    order = 20
    model = Schema
    fields = (
        FieldSpec("name", "name", (str,)),
        FieldSpec("description", "description", (str,)),
        FieldSpec("json_schema", "json_schema", (dict, bool, NoneType)),
        FieldSpec("registry_url", "registry_url", (str,)),
        FieldSpec("subject", "subject", (str,)),
        FieldSpec("version", "version", (int, NoneType)),
    )

    def upsert(self, key: str, values: dict[str, Any]) -> None:
        schema_upsert(name=key, **values)


class TopicSection(ModelSection):
    name = "topics"
    label = "topic"
    key = "name"
    order = 30
    model = Topic
    fields = (
        FieldSpec("name", "name", (str,)),
        FieldSpec("description", "description", (str,)),
        FieldSpec("schema", "schema", (str, NoneType), ref=Schema),
        FieldSpec("cache.max_messages", "cache_max_messages", (int,)),
        FieldSpec("cache.max_bytes", "cache_max_bytes", (int,)),
        FieldSpec("cache.max_age_seconds", "cache_max_age_seconds", (int,)),
    )

    def upsert(self, key: str, values: dict[str, Any]) -> None:
        topic_upsert(name=key, **values)


class RouteSection(ModelSection):
    name = "routes"
    label = "route"
    key = "path"
    order = 40
    model = Route
    fields = (
        FieldSpec("path", "path", (str,)),
        FieldSpec("kind", "kind", (str,)),
        FieldSpec("order", "order", (int,)),
        FieldSpec("topic", "topic", (str,)),
        FieldSpec("upstream", "upstream", (str,)),
        FieldSpec("schema", "schema", (str, NoneType), ref=Schema),
        FieldSpec("filters", "filters", (list,)),
        FieldSpec("event_id", "event_id", (str,)),
        FieldSpec("initial", "initial", (str,)),
        FieldSpec("allow_since", "allow_since", (bool,)),
        FieldSpec("binary", "binary", (str,)),
        FieldSpec("retry_ms", "retry_ms", (int,)),
        FieldSpec("heartbeat_seconds", "heartbeat_seconds", (int,)),
        FieldSpec("max_pending_bytes", "max_pending_bytes", (int,)),
        FieldSpec("guard", "guard", (str, NoneType), ref=Guard),
        FieldSpec("roles", "roles", (list,)),
        FieldSpec("cors.allow_origins", "allow_origins", (list,)),
        FieldSpec("cors.allow_credentials", "allow_credentials", (bool,)),
        FieldSpec("enabled", "enabled", (bool,)),
        FieldSpec("description", "description", (str,)),
    )
    _filter_keys = ("key", "headers")

    def upsert(self, key: str, values: dict[str, Any]) -> None:
        route_upsert(path=key, **values)

    def normalize(self, item: Any, path: DocPath, document: Document) -> dict[str, Any]:
        form = super().normalize(item, path, document)
        problems: list[ConfigProblem] = []
        filters: list[dict[str, Any]] = []
        for index, spec in enumerate(form["filters"]):
            at = (*path, "filters", index)
            if not isinstance(spec, dict):
                problems.append(document.problem(at, "a filter is a mapping with key and/or headers"))
                continue
            for name in spec:
                if name not in self._filter_keys:
                    problems.append(document.problem((*at, name), "unknown field (known: key, headers)"))
            key, headers = spec.get("key") or "", spec.get("headers") or {}
            if not isinstance(key, str):
                problems.append(document.problem((*at, "key"), f"must be a string, not {key!r}"))
            if not isinstance(headers, dict):
                problems.append(document.problem((*at, "headers"), f"must be a mapping, not {headers!r}"))
            filters.append({"key": key, "headers": headers})
        if problems:
            raise ConfigError(problems)
        form["filters"] = filters
        return form

    def default(self, spec: FieldSpec) -> Any:
        return [] if spec.key == "filters" else super().default(spec)

    def read(self, row: Any) -> dict[str, Any]:
        form = {spec.key: getattr(row, spec.model) for spec in self.fields if spec.key != "filters"}
        form["guard"] = row.guard.name if row.guard is not None else None
        form["schema"] = row.schema.name if row.schema is not None else None
        form["filters"] = [{"key": f.key, "headers": f.headers} for f in row.filters.all()]
        return {spec.key: form[spec.key] for spec in self.fields}

    def problems(
        self, exc: ValidationError, form: dict[str, Any], path: DocPath, document: Document
    ) -> list[ConfigProblem]:
        errors = exc.message_dict if hasattr(exc, "error_dict") else {}
        if not set(errors) & set(self._filter_keys):
            return super().problems(exc, form, path, document)
        # A filter's error: find which filter, checking each against the route as the file gives it.
        route = Route(path=form["path"], guard_id=0 if form["guard"] else None)
        for index, spec in enumerate(form["filters"]):
            try:
                RouteFilter(route=route, key=spec["key"], headers=spec["headers"]).full_clean(exclude=["route"])
            except ValidationError as filter_exc:
                return [
                    document.problem((*path, "filters", index, name), message)
                    for name, messages in filter_exc.message_dict.items()
                    for message in messages
                ]
        return [document.problem((*path, "filters"), message) for message in exc.messages]

    def export(self, form: dict[str, Any]) -> dict[str, Any]:
        item = super().export(form)
        if "filters" in item:
            item["filters"] = [{name: value for name, value in spec.items() if value} for spec in form["filters"]]
        return item


SECTIONS: dict[str, ModelSection] = {}
# Sections other apps provide; a file naming one whose app is not installed gets this message.
SECTIONS_ELSEWHERE = {"pipelines": "pipelines need the pipeline app (add it to INSTALLED_APPS)"}


def section_register(section: ModelSection) -> None:
    """Make ``section.name`` a section of configuration files (called from an app's ``ready``)."""
    SECTIONS[section.name] = section


for _section in (GuardSection(), SchemaSection(), TopicSection(), RouteSection()):
    section_register(_section)


def sections_ordered() -> list[ModelSection]:
    return sorted(SECTIONS.values(), key=lambda section: section.order)


@dataclass(frozen=True, slots=True)
class PlanItem:
    section: ModelSection
    key: str
    form: dict[str, Any]
    path: DocPath


def config_plan(document: Document) -> list[PlanItem]:
    """Every item of the file, normalized, in the order to apply; :class:`ConfigError` with every problem."""
    data = document.data
    if data is None:
        return []
    if not isinstance(data, dict):
        raise ConfigError([document.problem((), "a configuration file is a mapping of sections")])
    problems: list[ConfigProblem] = []
    plan: list[PlanItem] = []
    for name, items in data.items():
        section = SECTIONS.get(name)
        if section is None:
            message = SECTIONS_ELSEWHERE.get(name) or f"unknown section (known: {', '.join(sorted(SECTIONS))})"
            problems.append(document.problem((str(name),), message))
            continue
        if items is None:
            continue
        if not isinstance(items, list):
            problems.append(document.problem((name,), f"must be a list of {name}"))
            continue
        first: dict[str, DocPath] = {}
        for index, item in enumerate(items):
            path: DocPath = (name, index)
            try:
                form = section.normalize(item, path, document)
            except ConfigError as exc:
                problems += exc.problems
                continue
            key = form[section.key]
            if key in first:
                earlier = document.mark(first[key])
                line = f" (first at line {earlier.line})" if earlier else ""
                problems.append(document.problem((*path, section.key), f"{section.label} {key} is given twice{line}"))
                continue
            first[key] = path
            plan.append(PlanItem(section, key, form, path))
    if problems:
        raise ConfigError(problems)
    return sorted(plan, key=lambda item: item.section.order)


@dataclass
class ConfigReport:
    """What applying a file did (or, with ``check``, would do)."""

    filename: str
    kind: str = "sluice"
    check: bool = False
    actions: list[tuple[str, str, str]] = field(default_factory=list)  # (action, label, key)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (YAML path, reason)

    def count(self, action: str) -> int:
        return sum(1 for done, _, _ in self.actions if done == action)

    @property
    def changed(self) -> bool:
        return any(action != "unchanged" for action, _, _ in self.actions)

    def lines(self) -> list[str]:
        verb = {"created": "would create", "updated": "would update", "deleted": "would delete"}
        out = [
            f"{verb.get(action, action) if self.check else action} {label} {key}" for action, label, key in self.actions
        ]
        out += [f"skipped {where}: {reason}" for where, reason in self.skipped]
        summary = ", ".join(f"{self.count(a)} {a}" for a in ("created", "updated", "unchanged", "deleted"))
        source = "" if self.kind == "sluice" else f" ({self.kind} import)"
        tail = "checked, nothing changed" if self.check else "applied"
        out.append(f"{self.filename}{source}: {summary}; {tail}")
        return out


def config_apply(
    document: Document, *, prune: bool = False, check: bool = False, report: ConfigReport | None = None
) -> ConfigReport:
    """Apply ``document`` all or nothing: every problem is collected, and any problem changes nothing.

    ``check`` runs the very same writes in a transaction that is rolled back, so
    it refuses exactly what a real apply would.
    """
    report = report or ConfigReport(document.filename)
    report.check = check
    plan = config_plan(document)
    problems: list[ConfigProblem] = []
    with transaction.atomic():
        for section in sections_ordered():
            current = section.rows()
            for item in (item for item in plan if item.section is section):
                before = current.get(item.key)
                if before == item.form:
                    report.actions.append(("unchanged", section.label, item.key))
                    continue
                try:
                    section.write(item.form)
                except ValidationError as exc:
                    problems += section.problems(exc, item.form, item.path, document)
                except FieldProblem as exc:
                    problems.append(document.problem((*item.path, *exc.key.split(".")), exc.message))
                else:
                    report.actions.append(("created" if before is None else "updated", section.label, item.key))
        if prune:
            named = {(item.section.name, item.key) for item in plan}
            for section in reversed(sections_ordered()):
                for key in section.rows():
                    if (section.name, key) in named:
                        continue
                    try:
                        with transaction.atomic():
                            section.delete(key)
                    except ProtectedError as exc:
                        users = ", ".join(sorted(str(row) for row in exc.protected_objects))
                        problems.append(
                            ConfigProblem(
                                document.filename,
                                f"cannot delete {section.label} {key}: still used by {users}",
                                where=section.name,
                            )
                        )
                    else:
                        report.actions.append(("deleted", section.label, key))
        if problems:
            raise ConfigError(problems)
        if check:
            transaction.set_rollback(True)
    return report


def config_export() -> dict[str, list[dict[str, Any]]]:
    """Every configured row, as a file :func:`config_apply` takes back unchanged."""
    out: dict[str, list[dict[str, Any]]] = {}
    for section in sections_ordered():
        items = [section.export(form) for form in section.rows().values()]
        if items:
            out[section.name] = items
    return out


def config_dump(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False, width=120)


@dataclass
class LoadedConfig:
    """A file read and, if it was a Zilla or AsyncAPI document, translated to Sluice's sections."""

    document: Document
    kind: str
    skipped: list[tuple[str, str]] = field(default_factory=list)


def document_kind(data: Any) -> str:
    """``asyncapi``, ``zilla`` or ``sluice``, from the top-level keys."""
    if not isinstance(data, dict):
        return "sluice"
    if "asyncapi" in data:
        return "asyncapi"
    if "bindings" in data or "name" in data or isinstance(data.get("guards"), dict):
        return "zilla"
    return "sluice"


def config_load(path: str) -> LoadedConfig:
    """Read ``path`` and bring it to Sluice's own format (:class:`ConfigError` if it cannot be)."""
    # Imported here: both translators read this module's sections.
    from .asyncapi import asyncapi_translate
    from .zilla import zilla_translate

    document = document_read(path)
    kind = document_kind(document.data)
    if kind == "sluice":
        return LoadedConfig(document, kind)
    translation = zilla_translate(document) if kind == "zilla" else asyncapi_translate(document)
    return LoadedConfig(translation.document, kind, translation.skipped)


def config_apply_file(path: str, *, prune: bool = False, check: bool = False) -> ConfigReport:
    """Load, translate if needed, and apply the file at ``path``."""
    loaded = config_load(path)
    report = ConfigReport(loaded.document.filename, kind=loaded.kind, skipped=loaded.skipped)
    return config_apply(loaded.document, prune=prune, check=check, report=report)

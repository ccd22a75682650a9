"""The ``schemas``, ``topics`` and ``routes`` sections of configuration files (SPEC 6)."""

from __future__ import annotations

from types import NoneType
from typing import Any

from django.core.exceptions import ValidationError

from common.config.document import ConfigError, ConfigProblem, DocPath, Document
from common.config.section import FieldSpec, ModelSection, section_register
from guards.models import Guard
from streams.models import Cluster, Route, RouteFilter, Schema, Topic
from streams.services import cluster_upsert, route_upsert, schema_upsert, topic_upsert


class ClusterSection(ModelSection):
    """Kafka clusters; secret properties are ``${env.NAME}`` references, exported as written."""

    name = "clusters"
    label = "cluster"
    key = "name"
    order = 15
    model = Cluster
    fields = (
        FieldSpec("name", "name", (str,)),
        FieldSpec("description", "description", (str,)),
        FieldSpec("bootstrap_servers", "bootstrap_servers", (str,)),
        FieldSpec("properties", "properties", (dict,)),
        FieldSpec("registry", "registry", (str,)),
    )

    def upsert(self, key: str, values: dict[str, Any]) -> None:
        cluster_upsert(name=key, **values)


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
        FieldSpec("cluster", "cluster", (str, NoneType), ref=Cluster),
        FieldSpec("value.format", "value_format", (str,)),
        FieldSpec("value.avro_schema", "value_avro_schema", (dict, list, str, NoneType)),
        FieldSpec("key.format", "key_format", (str,)),
        FieldSpec("key.avro_schema", "key_avro_schema", (dict, list, str, NoneType)),
        FieldSpec("registry", "registry", (str,)),
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


def sections_register() -> None:
    """Make this app's sections part of configuration files (called from the app's ``ready``)."""
    for section in (ClusterSection(), SchemaSection(), TopicSection(), RouteSection()):
        section_register(section)

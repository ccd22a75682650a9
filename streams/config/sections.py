"""The ``schemas``, ``topics`` and ``routes`` sections of configuration files (SPEC 6)."""

from __future__ import annotations

from types import NoneType
from typing import Any

from django.core.exceptions import ValidationError

from common.config.document import ConfigError, ConfigProblem, DocPath, Document
from common.config.section import FieldSpec, ModelSection, section_register
from common.origins import origin_problem
from streams.models import Cluster, Route, RouteFilter, Schema, Topic
from streams.services import cluster_upsert, route_upsert, schema_upsert, topic_upsert


class ClusterSection(ModelSection):
    """Kafka clusters; secret properties are ``${env.NAME}`` references, exported as written."""

    name = "clusters"
    label = "cluster"
    key = "name"
    order = 15
    model = Cluster

    def upsert(self, key: str, values: dict[str, Any]) -> None:
        cluster_upsert(name=key, **values)


class SchemaSection(ModelSection):
    name = "schemas"
    label = "schema"
    key = "name"
    order = 20
    model = Schema
    json_types = {"json_schema": (dict, bool, NoneType)}

    def upsert(self, key: str, values: dict[str, Any]) -> None:
        schema_upsert(name=key, **values)


class TopicSection(ModelSection):
    name = "topics"
    label = "topic"
    key = "name"
    order = 30
    model = Topic
    renames = {
        "value_format": "value.format",
        "value_avro_schema": "value.avro_schema",
        "key_format": "key.format",
        "key_avro_schema": "key.avro_schema",
        "partitions": "kafka.partitions",
        "replication_factor": "kafka.replication_factor",
        "configs": "kafka.configs",
        "cache_max_messages": "cache.max_messages",
        "cache_max_bytes": "cache.max_bytes",
        "cache_max_age_seconds": "cache.max_age_seconds",
    }
    json_types = {name: (dict, list, str, NoneType) for name in ("value_avro_schema", "key_avro_schema")}

    def upsert(self, key: str, values: dict[str, Any]) -> None:
        topic_upsert(name=key, **values)


class RouteSection(ModelSection):
    name = "routes"
    label = "route"
    key = "path"
    order = 40
    model = Route
    renames = {
        "allow_origins": "cors.allow_origins",
        "allow_credentials": "cors.allow_credentials",
        "compression": "compression.enabled",
        "compression_min_bytes": "compression.min_bytes",
        "conflate": "conflate.by",
        "conflate_max_rate": "conflate.max_rate",
    }
    extra = (("schema", FieldSpec("filters", "filters", (list,))),)
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
        problems += self.origins_problems(form.get("cors.allow_origins"), path, document)
        if problems:
            raise ConfigError(problems)
        form["filters"] = filters
        return form

    @staticmethod
    def origins_problems(origins: Any, path: DocPath, document: Document) -> list[ConfigProblem]:
        """Each entry of ``cors.allow_origins`` that is not an origin, at its own line."""
        if not isinstance(origins, list):
            return []  # not a list: the model's check says so, at the field
        at = (*path, "cors", "allow_origins")
        found = ((index, origin_problem(origin)) for index, origin in enumerate(origins))
        return [document.problem((*at, index), problem) for index, problem in found if problem is not None]

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

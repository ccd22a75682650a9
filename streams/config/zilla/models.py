"""Zilla's ``model`` options on kafka topics, with their ``catalogs``, as Sluice topic formats.

A topic of a ``kafka`` binding may say how its value and key are encoded::

    options:
      topics:
        - name: matches
          value: {model: avro, catalog: {registry: [{strategy: topic, version: latest}]}}

With a schema registry catalog (``schema-registry``, ``karapace-schema-registry``,
``confluent-schema-registry``, ``apicurio-registry``: Confluent's wire format) the
models ``avro``, ``protobuf`` and ``json`` become the formats ``avro``, ``protobuf``
and ``jsonschema`` and the catalog's ``url`` the topic's registry. An ``inline``
catalog's Avro subject becomes ``avro-inline`` with that writer schema. Anything
else is reported as skipped, with its path.
"""

from __future__ import annotations

import json
from typing import Any

from common.config.document import DocPath, Translation
from streams.config.zilla.kafka import zilla_env

REGISTRY_CATALOGS = frozenset(
    {"schema-registry", "karapace-schema-registry", "confluent-schema-registry", "apicurio-registry"}
)
REGISTRY_MODELS = {"avro": "avro", "protobuf": "protobuf", "json": "jsonschema"}
PLAIN_MODELS = {"string": "text", "json": "json"}


def topic_formats(
    translation: Translation, catalogs: dict[str, Any], name: str, binding: dict[str, Any]
) -> dict[str, dict[str, Any]]:
    """Per topic name, the format fields the binding's ``options.topics`` give (``value.format``, ``registry``, ...)."""
    out: dict[str, dict[str, Any]] = {}
    for index, topic in enumerate((binding.get("options") or {}).get("topics") or []):
        if not isinstance(topic, dict) or not topic.get("name"):
            continue
        at: DocPath = ("bindings", name, "options", "topics", index)
        fields: dict[str, Any] = {}
        for part in ("value", "key"):
            model = topic.get(part)
            if isinstance(model, dict):
                fields.update(_part_format(translation, catalogs, str(topic["name"]), part, model, (*at, part)))
        if fields:
            out[str(topic["name"])] = fields
    return out


def _part_format(
    translation: Translation, catalogs: dict[str, Any], topic: str, part: str, model: dict[str, Any], at: DocPath
) -> dict[str, Any]:
    kind = str(model.get("model", ""))
    catalog_refs = model.get("catalog") or {}
    if not catalog_refs:
        if kind in PLAIN_MODELS:
            return {f"{part}.format": PLAIN_MODELS[kind]}
        translation.skip((*at, "model"), f"model {kind!r} without a catalog has no Sluice format")
        return {}
    catalog_name = next(iter(catalog_refs))
    catalog = catalogs.get(catalog_name) or {}
    catalog_type = str(catalog.get("type", ""))
    options = catalog.get("options") or {}
    if catalog_type in REGISTRY_CATALOGS and kind in REGISTRY_MODELS:
        fields: dict[str, Any] = {f"{part}.format": REGISTRY_MODELS[kind]}
        if options.get("url"):
            fields["registry"] = zilla_env(str(options["url"]))
        return fields
    if catalog_type == "inline" and kind == "avro":
        entries = catalog_refs[catalog_name] or [{}]
        subject = str((entries[0] or {}).get("subject") or f"{topic}-{part}")
        schema = ((options.get("subjects") or {}).get(subject) or {}).get("schema")
        if schema is not None:
            parsed = json.loads(schema) if isinstance(schema, str) else schema
            return {f"{part}.format": "avro-inline", f"{part}.avro_schema": parsed}
        translation.skip((*at, "catalog"), f"the inline catalog {catalog_name} has no subject {subject}")
        return {}
    translation.skip(
        (*at, "catalog"),
        f"model {kind} from a {catalog_type or 'missing'} catalog has no Sluice format "
        "(registry catalogs give avro, protobuf and json; inline catalogs give avro)",
    )
    return {}


def catalogs_named(bindings: dict[str, Any]) -> set[str]:
    """The catalogs some kafka topic's value or key model names."""
    named: set[str] = set()
    for binding in bindings.values():
        if not isinstance(binding, dict) or binding.get("type") != "kafka":
            continue
        for topic in (binding.get("options") or {}).get("topics") or []:
            for part in ("value", "key"):
                model = topic.get(part) if isinstance(topic, dict) else None
                if isinstance(model, dict) and isinstance(model.get("catalog"), dict):
                    named.update(str(name) for name in model["catalog"])
    return named

"""Topic record formats as plain data, and the checks that keep a wrong one out of the configuration."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from streams.core.clusters import ENV_REFERENCE, env_expand

TEXT = "text"
JSON = "json"
AVRO = "avro"
PROTOBUF = "protobuf"
JSONSCHEMA = "jsonschema"
AVRO_INLINE = "avro-inline"

FORMATS: dict[str, str] = {
    TEXT: "Text, sent as it is (the default)",
    JSON: "JSON, checked to be JSON",
    AVRO: "Avro, Confluent wire format (schema from the registry)",
    PROTOBUF: "Protobuf, Confluent wire format (schema from the registry)",
    JSONSCHEMA: "JSON Schema, Confluent wire format (schema from the registry)",
    AVRO_INLINE: "Avro without a header, writer schema given on the topic",
}
# Formats whose records name their schema by id in a schema registry.
REGISTRY_FORMATS = frozenset({AVRO, PROTOBUF, JSONSCHEMA})
_USERINFO = re.compile(r"//[^/]*@")
# scheme://[user[:password]@]host[:port][/path]
_REGISTRY_URL = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?:(?P<user>[^/@]*)@)?(?P<rest>[^@]+)")


class FormatError(ValueError):
    """A format setting that cannot work; ``field`` names the setting."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def avro_schema_parse(text: str, *, field: str) -> Any:
    """A parsed Avro schema (fastavro); :class:`FormatError` on ``field`` if it is not one."""
    import fastavro

    try:
        return fastavro.parse_schema(json.loads(text))
    except (ValueError, TypeError, KeyError, fastavro.schema.SchemaParseException) as exc:
        raise FormatError(field, f"not an Avro schema: {exc}") from exc


def registry_problem(url: str) -> str | None:
    """Why ``url`` cannot be a schema registry address, or None.

    Basic-auth credentials go in the URL's user part, the password (if any) only as
    an ``${env.NAME}`` reference: ``https://${env.SR_USER}:${env.SR_PASSWORD}@sr.example.com``.
    """
    if not url:
        return None
    found = _REGISTRY_URL.fullmatch(url)
    host = ENV_REFERENCE.sub("x", found["rest"]) if found else ""
    if found is None or found["scheme"] not in ("http", "https") or not urlsplit(f"http://{host}").hostname:
        return "give the registry as an http:// or https:// URL"
    _, colon, password = (found["user"] or "").partition(":")
    if colon and not ENV_REFERENCE.fullmatch(password):
        return "the registry password is a secret: write it as ${env.NAME} and set NAME in Sluice's environment"
    return None


def registry_redacted(url: str) -> str:
    """``url`` as it may be logged or shown: without its user part."""
    return _USERINFO.sub("//", url)


@dataclass(frozen=True, slots=True)
class FieldFormat:
    """How one part of a record (value or key) is encoded; ``inline_schema`` is the avro-inline writer schema."""

    name: str = TEXT
    inline_schema: str = ""

    @property
    def plain(self) -> bool:
        return self.name == TEXT


@dataclass(frozen=True, slots=True)
class RecordFormats:
    """A topic's value and key formats, and the registry they read schemas from (as written)."""

    value: FieldFormat = FieldFormat()
    key: FieldFormat = FieldFormat()
    registry: str = ""

    @classmethod
    def of(
        cls,
        value_format: str = TEXT,
        key_format: str = TEXT,
        *,
        value_schema: Any = None,
        key_schema: Any = None,
        registry: str = "",
    ) -> RecordFormats:
        """Checked formats; :class:`FormatError` naming the field that is wrong."""
        formats = cls(
            FieldFormat(value_format, _schema_text(value_schema) if value_format == AVRO_INLINE else ""),
            FieldFormat(key_format, _schema_text(key_schema) if key_format == AVRO_INLINE else ""),
            registry,
        )
        formats.check()
        return formats

    @property
    def plain(self) -> bool:
        """Text values and keys: records go out as they are, nothing to decode."""
        return self.value.plain and self.key.plain

    @property
    def uses_registry(self) -> bool:
        return self.value.name in REGISTRY_FORMATS or self.key.name in REGISTRY_FORMATS

    def check(self) -> None:
        for part, field_format in (("value", self.value), ("key", self.key)):
            if field_format.name not in FORMATS:
                raise FormatError(
                    f"{part}_format", f"unknown format {field_format.name!r}: one of {', '.join(FORMATS)}"
                )
            if field_format.name == AVRO_INLINE:
                if not field_format.inline_schema:
                    raise FormatError(f"{part}_avro_schema", f"{part} format avro-inline needs the writer schema")
                avro_schema_parse(field_format.inline_schema, field=f"{part}_avro_schema")
        problem = registry_problem(self.registry)
        if problem is not None:
            raise FormatError("registry", problem)

    def registry_url(self, environ: Mapping[str, str]) -> str:
        """The registry's URL with its references resolved (read now, when Sluice connects)."""
        return env_expand(self.registry, environ, what="the schema registry URL")


def _schema_text(schema: Any) -> str:
    if schema in (None, "", {}):
        return ""
    if isinstance(schema, str):
        return schema
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))

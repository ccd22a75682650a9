"""JSON Schema validation as Spark expressions, and the Spark type a valid record is read as.

Values are parsed once with ``try_parse_json`` into a VARIANT, which keeps JSON's own types
(a string "5" is not the number 5), and every keyword below becomes a built-in expression:
``schema_of_variant`` for ``type``, ``try_variant_get`` for ``required`` and ``properties``,
``to_json(...) IN (...)`` for ``enum``/``const``, comparisons for ``minimum``/``maximum``,
``char_length`` for string lengths, ``rlike`` for ``pattern`` (Java regular expressions) and
``exists`` over ``items``. Keywords outside that list fall back to the ``jsonschema`` library
in a vectorised pandas UDF (:func:`schema_residual_check`).

Each failing check is named ``<keyword>:<JSON pointer>``, e.g. ``required:/match``; the
first failing one is the record's rule (``json:/`` when the value is not JSON at all).

No Django import here: Spark's Python workers load this module on their own.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
)

RULE_COLUMN = "_rule"
PARSED_COLUMN = "_json"

# Keywords the built-in expressions enforce; annotations that never fail a record.
BUILTIN_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "enum",
        "const",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "pattern",
        "items",
        "minItems",
        "maxItems",
    }
)
ANNOTATIONS = frozenset(
    {"$schema", "$id", "$comment", "title", "description", "default", "examples", "deprecated", "readOnly"}
)

# Names schema_of_variant gives each JSON type.
_TYPE_PATTERNS = {
    "string": r"^STRING$",
    "integer": r"^(BIGINT|INT|SMALLINT|TINYINT|DECIMAL\(\d+,0\))$",
    "number": r"^(BIGINT|INT|SMALLINT|TINYINT|DECIMAL\(\d+,\d+\)|DOUBLE|FLOAT)$",
    "boolean": r"^BOOLEAN$",
    "null": r"^VOID$",
    "array": r"^ARRAY<",
    "object": r"^OBJECT<",
}


class SchemaError(ValueError):
    """The JSON Schema cannot drive a pipeline (not an object with properties, unknown type...)."""


@dataclass(frozen=True)
class Check:
    """One rule of a schema as a Spark expression that is true when the record breaks it."""

    rule: str
    failed: Column


def _pointer(path: str, name: str) -> str:
    return f"{path.rstrip('/')}/{name.replace('~', '~0').replace('/', '~1')}"


def _segment(name: str) -> str:
    """A member name as a step of a VARIANT path: ``['name']``."""
    escaped = name.replace("\\", "\\\\").replace("'", "\\'")
    return f"['{escaped}']"


def _member(node: Column, name: str) -> Column:
    return F.try_variant_get(node, f"${_segment(name)}", "variant")


def _json_literal(value: Any) -> str:
    """The text ``to_json`` gives a VARIANT holding ``value`` (integral floats lose their ``.0``)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _is(kind: Column, *types: str) -> Column:
    """Whether the ``schema_of_variant`` name ``kind`` is one of the JSON Schema ``types``."""
    return kind.rlike("|".join(f"({_TYPE_PATTERNS[t]})" for t in types))


def _types(schema: dict[str, Any]) -> list[str]:
    declared = schema.get("type")
    names = [declared] if isinstance(declared, str) else list(declared or [])
    unknown = [t for t in names if t not in _TYPE_PATTERNS]
    if unknown:
        raise SchemaError(f"unknown JSON Schema type {unknown[0]!r}")
    return names


def schema_spark_checks(
    schema: Any, node: Column, path: str = "/", staged: Mapping[str, tuple[Column, Column]] | None = None
) -> list[Check]:
    """The built-in checks of ``schema`` on the VARIANT ``node`` (present: not SQL NULL).

    ``staged`` maps JSON pointers to columns already holding that member and its
    ``schema_of_variant`` (see :func:`schema_members`), so each is computed once per record.
    """
    if not isinstance(schema, dict):
        return [] if schema is not False else [Check(f"false:{path}", node.isNotNull())]
    staged = staged or {}
    if path in staged:
        node, kind = staged[path]
    else:
        kind = F.schema_of_variant(node)
    present = node.isNotNull()
    checks: list[Check] = []

    def add(keyword: str, failed: Column, where: str = path) -> None:
        checks.append(Check(f"{keyword}:{where}", present & F.coalesce(failed, F.lit(False))))

    types = _types(schema)
    if types:
        add("type", ~_is(kind, *types))
    if "enum" in schema:
        add("enum", ~F.to_json(node).isin([_json_literal(v) for v in schema["enum"]]))
    if "const" in schema:
        add("const", F.to_json(node) != F.lit(_json_literal(schema["const"])))
    number = F.try_variant_get(node, "$", "double")
    numeric = _is(kind, "number")
    for keyword, broken in (
        ("minimum", lambda limit: number < limit),
        ("maximum", lambda limit: number > limit),
        ("exclusiveMinimum", lambda limit: number <= limit),
        ("exclusiveMaximum", lambda limit: number >= limit),
    ):
        if keyword in schema:
            add(keyword, numeric & broken(F.lit(float(schema[keyword]))))
    text = F.try_variant_get(node, "$", "string")
    string = _is(kind, "string")
    if "minLength" in schema:
        add("minLength", string & (F.char_length(text) < int(schema["minLength"])))
    if "maxLength" in schema:
        add("maxLength", string & (F.char_length(text) > int(schema["maxLength"])))
    if "pattern" in schema:
        add("pattern", string & ~text.rlike(str(schema["pattern"])))
    is_object = _is(kind, "object")

    def member(name: str) -> Column:
        where = _pointer(path, name)
        return staged[where][0] if where in staged else _member(node, name)

    for name in schema.get("required", []):
        add("required", is_object & member(name).isNull(), _pointer(path, name))
    for name, subschema in (schema.get("properties") or {}).items():
        checks += [
            Check(c.rule, present & c.failed)
            for c in schema_spark_checks(subschema, member(name), _pointer(path, name), staged)
        ]
    elements = F.try_variant_get(node, "$", "array<variant>")
    if "minItems" in schema:
        add("minItems", F.size(elements) < int(schema["minItems"]))
    if "maxItems" in schema:
        add("maxItems", F.size(elements) > int(schema["maxItems"]))
    items = schema.get("items")
    if isinstance(items, dict | bool):
        where = _pointer(path, "*")
        for index, check in enumerate(schema_spark_checks(items, F.lit(None).cast("variant"), where)):
            element_failed: Callable[[Column], Column] = functools.partial(_element_failed, items, where, index)
            checks.append(Check(check.rule, present & F.coalesce(F.exists(elements, element_failed), F.lit(False))))
    return checks


def schema_members(schema: Any, path: str = "/", json_path: str = "$") -> list[tuple[str, str]]:
    """(JSON pointer, JSON path) of every property the schema names, nested objects included."""
    found: list[tuple[str, str]] = []
    if not isinstance(schema, dict):
        return found
    for name, subschema in (schema.get("properties") or {}).items():
        where, member_path = _pointer(path, name), f"{json_path}{_segment(name)}"
        found += [(where, member_path), *schema_members(subschema, where, member_path)]
    return found


def _element_failed(items: Any, where: str, index: int, element: Column) -> Column:
    return schema_spark_checks(items, element, where)[index].failed


def schema_residual(schema: Any) -> list[str]:
    """Keywords (with their JSON pointer) that built-in expressions do not enforce."""
    if not isinstance(schema, dict):
        return []
    found = [k for k in schema if k not in BUILTIN_KEYWORDS and k not in ANNOTATIONS]
    for name, subschema in (schema.get("properties") or {}).items():
        found += [f"{name}.{k}" for k in schema_residual(subschema)]
    if isinstance(schema.get("items"), dict):
        found += [f"*.{k}" for k in schema_residual(schema["items"])]
    return found


@functools.lru_cache(maxsize=8)
def _validator(schema_text: str) -> Any:
    import jsonschema

    schema = json.loads(schema_text)
    return jsonschema.validators.validator_for(schema)(schema)


def json_schema_rule(schema_text: str, value: str | None) -> str | None:
    """The first rule ``value`` breaks according to the ``jsonschema`` library, or None."""
    if value is None:
        return "json:/"
    try:
        document = json.loads(value)
    except ValueError:
        return "json:/"
    error = next(iter(_validator(schema_text).iter_errors(document)), None)
    if error is None:
        return None
    pointer = "/" + "/".join(str(p).replace("~", "~0").replace("/", "~1") for p in error.absolute_path)
    return f"{error.validator}:{pointer}"


def schema_residual_check(schema: Any) -> Callable[[Column], Column]:
    """A pandas UDF running the full schema through ``jsonschema``, for keywords built-ins cannot express."""
    schema_text = json.dumps(schema, sort_keys=True)

    def residual_rule(values: pd.Series) -> pd.Series:
        return pd.Series([json_schema_rule(schema_text, v) for v in values], dtype="object")

    udf: Callable[[Column], Column] = F.pandas_udf(residual_rule, StringType())  # type: ignore[call-overload]
    return udf


@dataclass(frozen=True)
class RecordsValidation:
    """A JSON Schema's checks as Spark columns, built once and applied to any number of DataFrames.

    Building the columns is the costly part on the driver (each is a JVM object made over py4j:
    some 900 round trips, about 0.1 s, for a schema of three properties), so a stream builds them
    once and applies them to every micro-batch.
    """

    stages: tuple[dict[str, Column], ...]
    rule: Column
    helpers: tuple[str, ...]

    def apply(self, df: DataFrame) -> DataFrame:
        """``df`` with ``_rule``: the first rule the record's value breaks, NULL for a valid record."""
        for stage in self.stages:
            df = df.withColumns(stage)
        return df.withColumn(RULE_COLUMN, self.rule).drop(*self.helpers)


def schema_validation(schema: Any, value: str = "value") -> RecordsValidation:
    """The checks of ``schema`` on the JSON text in column ``value``."""
    text = F.col(value).cast("string")
    # Parse once, then pull each member and its type name out once, into columns of their own:
    # the checks read those columns instead of repeating the extraction in every expression.
    members = [("/", "$"), *schema_members(schema)]
    names = {where: f"_m{i}" for i, (where, _) in enumerate(members)}
    parsed = F.col(PARSED_COLUMN)
    stages = (
        {PARSED_COLUMN: F.try_parse_json(text)},
        {names[where]: F.try_variant_get(parsed, path, "variant") for where, path in members},
        {f"{names[w]}_kind": F.schema_of_variant(F.col(names[w])) for w, _ in members},
    )
    staged = {where: (F.col(names[where]), F.col(f"{names[where]}_kind")) for where, _ in members}
    checks = [Check("json:/", parsed.isNull()), *schema_spark_checks(schema, parsed, "/", staged)]
    rules = [F.when(c.failed, F.lit(c.rule)) for c in checks]
    if schema_residual(schema):
        rules.append(schema_residual_check(schema)(text))
    helpers = (PARSED_COLUMN, *names.values(), *(f"{n}_kind" for n in names.values()))
    return RecordsValidation(stages, F.coalesce(*rules), helpers)


def records_validate(df: DataFrame, schema: Any, value: str = "value") -> DataFrame:
    """``df`` with ``_rule``: the first rule the record's value breaks, NULL for a valid record."""
    return schema_validation(schema, value).apply(df)


def schema_spark_type(schema: Any) -> DataType:
    """The Spark type a valid value is read as with ``from_json``; JSON it cannot type stays a JSON string."""
    if not isinstance(schema, dict):
        return StringType()
    types = [t for t in _types(schema) if t != "null"]
    kind = types[0] if len(types) == 1 else ("object" if "properties" in schema and not types else None)
    if kind == "object" and schema.get("properties"):
        return StructType(
            [StructField(name, schema_spark_type(sub), nullable=True) for name, sub in schema["properties"].items()]
        )
    if kind == "array" and isinstance(schema.get("items"), dict):
        return ArrayType(schema_spark_type(schema["items"]), containsNull=True)
    return {"integer": LongType(), "number": DoubleType(), "boolean": BooleanType()}.get(kind or "", StringType())


def schema_record_type(schema: Any) -> StructType:
    """The columns of the ``input`` view: the schema must describe an object with properties."""
    record = schema_spark_type(schema)
    if not isinstance(record, StructType):
        raise SchemaError("a pipeline's JSON Schema must describe an object with properties")
    return record

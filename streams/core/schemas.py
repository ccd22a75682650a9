"""Message schemas (SPEC 5), compiled once per schema version and shared by every stream.

A :class:`SchemaCheck` holds one compiled JSON Schema validator. The hub asks it
about a record at most once (the verdict is kept on the record), so a schema
costs one validation per record, not one per record per client. Registry
schemas are fetched through the registry client of :mod:`streams.core.formats.registry` and kept
per (registry, subject, version); a "latest" lookup is refreshed every
``LATEST_SECONDS``.

No Django here: this runs on the hub's hot path.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import jsonschema
from jsonschema.exceptions import SchemaError

from streams.core.formats.registry import registry_client
from streams.core.records import Record

logger = logging.getLogger("sluice.schemas")

# Confluent's wire format: magic byte 0, then a 4-byte big-endian schema id, then the payload.
_CONFLUENT_MAGIC = 0
_CONFLUENT_HEADER = 5
# A "latest version" answer is reused this long before the registry is asked again.
LATEST_SECONDS = 60.0
# At most one "skipped invalid record" log line per schema per this many seconds.
LOG_INTERVAL_SECONDS = 10.0
# After a failed registry request, the same lookup fails at once for this long: the route
# table is rebuilt every second or so, and must not wait on a registry that is down.
FAILURE_SECONDS = 10.0
# The registry client repeats a failed request once itself before the failure is remembered.
REGISTRY_CLIENT_RETRIES = 1


class SchemaUnavailable(Exception):
    """A schema that cannot be compiled or fetched (bad JSON Schema, registry down or missing subject)."""


class SchemaCheck:
    """A compiled JSON Schema: ``admits(record)`` says whether the record's value may be delivered.

    ``key`` names the schema version (equal keys mean the same compiled
    validator); records keep one verdict per key.
    """

    __slots__ = ("_is_valid", "_last_log", "_unlogged", "framed", "key", "name")

    def __init__(self, name: str, key: str, json_schema: Any, *, framed: bool = False) -> None:
        self.name = name
        self.key = key
        # Registry-produced values may carry Confluent's 5-byte header in front of the JSON.
        self.framed = framed
        try:
            cls = jsonschema.validators.validator_for(json_schema)
            cls.check_schema(json_schema)
        except SchemaError as exc:
            raise SchemaUnavailable(f"schema {name}: {exc.message}") from exc
        self._is_valid: Callable[[Any], bool] = cls(json_schema).is_valid
        self._last_log = 0.0
        self._unlogged = 0

    def value_valid(self, value: bytes | None) -> bool:
        """Whether ``value`` is JSON satisfying the schema; a tombstone (no value) always passes."""
        if value is None:
            return True
        if self.framed and len(value) >= _CONFLUENT_HEADER and value[0] == _CONFLUENT_MAGIC:
            value = value[_CONFLUENT_HEADER:]
        try:
            document = json.loads(value)
        except ValueError:  # also UnicodeDecodeError
            return False
        return bool(self._is_valid(document))

    def admits(self, record: Record) -> bool:
        """The record's verdict under this schema, computed once per record and kept on it."""
        verdicts = record.verdicts
        if verdicts is None:
            verdicts = record.verdicts = {}
        else:
            found = verdicts.get(self.key)
            if found is not None:
                return found
        verdict = verdicts[self.key] = self.value_valid(record.value)
        return verdict

    def rejected_log(self, topic: str, record: Record, scope: str) -> None:
        """Log a skipped record with topic, partition and offset, at most once per interval per schema."""
        self.rejection_log(f"{scope}: topic={topic} partition={record.partition} offset={record.offset}")

    def rejection_log(self, where: str) -> None:
        """Log one skipped value (``where`` says which), at most once per interval per schema."""
        now = time.monotonic()
        if now - self._last_log < LOG_INTERVAL_SECONDS:
            self._unlogged += 1
            return
        more = f" (and {self._unlogged} more since the last report)" if self._unlogged else ""
        logger.warning("skipped a value that does not match schema %s (%s)%s", self.name, where, more)
        self._last_log = now
        self._unlogged = 0

    def __repr__(self) -> str:
        return f"SchemaCheck({self.key!r})"


# Compiled checks by key: the same schema version compiles once per process.
_compiled: dict[str, SchemaCheck] = {}
_lock = threading.Lock()


def _inline_key(name: str, json_schema: Any) -> str:
    digest = hashlib.sha256(json.dumps(json_schema, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return f"{name}#{digest[:16]}"


def schema_validator_compile(
    name: str, json_schema: Any, *, key: str | None = None, framed: bool = False
) -> SchemaCheck:
    """The compiled check for an inline schema; compiled on first use of this (name, content)."""
    key = key or _inline_key(name, json_schema)
    with _lock:
        found = _compiled.get(key)
    if found is not None:
        return found
    check = SchemaCheck(name, key, json_schema, framed=framed)
    with _lock:
        return _compiled.setdefault(key, check)


class RegistrySchemas:
    """Schemas from Confluent-compatible registries: one client per URL, one fetch per subject version."""

    def __init__(self, client_factory: Callable[[str], Any] | None = None) -> None:
        self._client_factory = client_factory or functools.partial(registry_client, retries=REGISTRY_CLIENT_RETRIES)
        self._clients: dict[str, Any] = {}
        self._latest: dict[tuple[str, str], tuple[float, int]] = {}
        self._failed: dict[str, tuple[float, SchemaUnavailable]] = {}
        self._lock = threading.Lock()

    def _remembered_failure(self, lookup: str) -> None:
        failed = self._failed.get(lookup)
        if failed is not None and time.monotonic() - failed[0] < FAILURE_SECONDS:
            raise failed[1]

    def _failure(self, lookup: str, error: SchemaUnavailable) -> SchemaUnavailable:
        self._failed[lookup] = (time.monotonic(), error)
        return error

    def _client(self, url: str) -> Any:
        with self._lock:
            client = self._clients.get(url)
            if client is None:
                client = self._clients[url] = self._client_factory(url)
            return client

    def check(self, name: str, url: str, subject: str, version: int | None) -> SchemaCheck:
        """The compiled check for ``subject`` at ``version`` (None: the latest, looked up every LATEST_SECONDS)."""
        client = self._client(url)
        if version is None:
            version = self._latest_version(client, url, subject)
        key = f"{url}|{subject}|{version}"
        with _lock:
            found = _compiled.get(key)
        if found is not None:
            return found
        self._remembered_failure(key)
        try:
            registered = client.get_version(subject, version)
            schema = registered.schema
            if (schema.schema_type or "AVRO").upper() != "JSON":
                raise SchemaUnavailable(f"{subject} v{version} is {schema.schema_type}, not a JSON Schema")
            document = json.loads(schema.schema_str)
            return schema_validator_compile(name, document, key=key, framed=True)
        except SchemaUnavailable as exc:
            raise self._failure(key, exc) from exc.__cause__
        except Exception as exc:  # the registry client raises its own errors and httpx's
            error = SchemaUnavailable(f"schema {name}: {subject} v{version} from {url}: {exc}")
            raise self._failure(key, error) from exc

    def _latest_version(self, client: Any, url: str, subject: str) -> int:
        now = time.monotonic()
        cached = self._latest.get((url, subject))
        if cached is not None and now - cached[0] < LATEST_SECONDS:
            return cached[1]
        lookup = f"{url}|{subject}|latest"
        try:
            self._remembered_failure(lookup)
            version = int(client.get_latest_version(subject).version)
        except Exception as exc:
            if cached is not None:
                # Keep serving the version we know; ask again after LATEST_SECONDS.
                logger.warning("registry %s: latest of %s unknown (%s); keeping v%d", url, subject, exc, cached[1])
                self._latest[(url, subject)] = (now, cached[1])
                return cached[1]
            if isinstance(exc, SchemaUnavailable):
                raise
            error = SchemaUnavailable(f"latest version of {subject} from {url}: {exc}")
            raise self._failure(lookup, error) from exc
        self._latest[(url, subject)] = (now, version)
        return version


registry_schemas = RegistrySchemas()


def schema_reject_all(name: str, reason: str) -> SchemaCheck:
    """A check that admits nothing: what a schema that cannot be had becomes (fail closed)."""
    return schema_validator_compile(name, False, key=f"{name}!unavailable:{reason}")

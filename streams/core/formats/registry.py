"""The schema registry client, one per registry, and what a failed lookup means for a record.

A registry that answers "not found" (or another 4xx) for a record's schema id
makes that record undecodable: it is skipped. A registry that does not answer
(refused, timed out, 5xx) is an outage: the record waits, and so does the
topic's delivery, until the registry answers again.
"""

from __future__ import annotations

import threading
from typing import Any

from streams.core.formats.spec import registry_redacted

# Seconds one registry request may take (the client's own default is longer).
REQUEST_TIMEOUT_SECONDS = 5


class Undecodable(Exception):
    """This record's bytes (or its schema id) cannot be decoded: skip it."""


class RegistryUnavailable(Exception):
    """The schema registry does not answer: try the record again later."""


_clients: dict[tuple[str, int], Any] = {}
_lock = threading.Lock()


def registry_client(url: str, *, retries: int = 0) -> Any:
    """The process's ``SchemaRegistryClient`` for ``url`` (resolved; credentials in its user part).

    ``retries`` is how many times the client itself repeats a failed request: none
    for the record decoders (their callers retry with backoff), one for the message
    schema checks (a failure there is remembered for a while).
    """
    with _lock:
        client = _clients.get((url, retries))
        if client is None:
            from confluent_kafka.schema_registry import SchemaRegistryClient

            client = _clients[(url, retries)] = SchemaRegistryClient(
                {"url": url, "timeout": REQUEST_TIMEOUT_SECONDS, "max.retries": retries}
            )
        return client


def _from_registry(exc: Exception) -> bool:
    """Whether ``exc`` came from asking the registry (its answer, or no answer), not from the record's bytes."""
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    module = type(exc).__module__
    return isinstance(exc, (SchemaRegistryError, OSError)) or module.startswith(("httpx", "httpcore"))


def registry_failure(exc: Exception, url: str, what: str = "") -> Undecodable | RegistryUnavailable:
    """What a failed decode or registry lookup means: :class:`Undecodable` or :class:`RegistryUnavailable`.

    An error that did not come from the registry is about the record: undecodable,
    its message prefixed by ``what``.
    """
    if not _from_registry(exc):
        return Undecodable(f"{what}{type(exc).__name__}: {exc}")
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    where = registry_redacted(url)
    if isinstance(exc, SchemaRegistryError):
        status = exc.http_status_code
        if 400 <= status < 500 and status not in (408, 429):
            return Undecodable(f"{what}registry {where}: {exc.error_message} (HTTP {status})")
        return RegistryUnavailable(f"registry {where}: HTTP {status} {exc.error_message}")
    return RegistryUnavailable(f"registry {where}: {type(exc).__name__}: {exc}")

"""Schema registry clients, one per registry, and what a failed lookup means for a record.

A registry that answers "not found" (or another 4xx) for a record's schema id
makes that record undecodable: it is skipped. A registry that does not answer
(refused, timed out, 5xx) is an outage: the record waits, and so does the
topic's delivery, until the registry answers again.
"""

from __future__ import annotations

import threading
from typing import Any

from streams.core.formats.spec import registry_redacted

# Seconds one registry request may take; the caller retries with backoff, so the client does not.
REQUEST_TIMEOUT_SECONDS = 5


class Undecodable(Exception):
    """This record's bytes (or its schema id) cannot be decoded: skip it."""


class RegistryUnavailable(Exception):
    """The schema registry does not answer: try the record again later."""


_clients: dict[str, Any] = {}
_lock = threading.Lock()


def registry_client(url: str) -> Any:
    """The process's ``SchemaRegistryClient`` for ``url`` (resolved; credentials in its user part)."""
    with _lock:
        client = _clients.get(url)
        if client is None:
            from confluent_kafka.schema_registry import SchemaRegistryClient

            client = _clients[url] = SchemaRegistryClient(
                {"url": url, "timeout": REQUEST_TIMEOUT_SECONDS, "max.retries": 0}
            )
        return client


def registry_failure(exc: Exception, url: str) -> Exception:
    """What a registry lookup's exception means: :class:`Undecodable` or :class:`RegistryUnavailable`."""
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    where = registry_redacted(url)
    if isinstance(exc, SchemaRegistryError):
        status = exc.http_status_code
        if 400 <= status < 500 and status not in (408, 429):
            return Undecodable(f"registry {where}: {exc.error_message} (HTTP {status})")
        return RegistryUnavailable(f"registry {where}: HTTP {status} {exc.error_message}")
    return RegistryUnavailable(f"registry {where}: {type(exc).__name__}: {exc}")

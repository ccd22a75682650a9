"""Reading a JSON Schema from a Confluent-compatible schema registry."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from typing import Any


class RegistryError(RuntimeError):
    """The registry did not answer with a JSON Schema for the subject."""


def registry_schema_fetch(url: str, subject: str, version: int | None = None, timeout: float = 10.0) -> Any:
    """The schema of ``subject`` at ``version`` (latest when None) from the registry at ``url``."""
    path = f"/subjects/{urllib.parse.quote(subject, safe='')}/versions/{version or 'latest'}"
    try:
        with urllib.request.urlopen(url.rstrip("/") + path, timeout=timeout) as response:
            body = json.load(response)
        schema_type = body.get("schemaType", "AVRO")
        if schema_type != "JSON":
            raise RegistryError(f"{subject} is a {schema_type} schema, not a JSON Schema")
        return json.loads(body["schema"])
    except (OSError, ValueError, KeyError) as exc:
        raise RegistryError(f"could not read {subject} from {url}: {exc}") from exc

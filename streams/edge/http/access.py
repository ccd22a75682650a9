"""The access log: one JSON line on ``sluice.access`` per stream opened, closed or refused."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from streams.core.asgi import Scope
from streams.core.errors import StreamError
from streams.core.routes import RouteSpec

access_logger = logging.getLogger("sluice.access")


def client_address(scope: Scope) -> str:
    """The client as the socket sees it (``host:port``), for the logs."""
    client = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else "-"


def access_log(
    event: str,
    route: RouteSpec,
    scope: Scope,
    status: int,
    started: float,
    *,
    events: int = 0,
    sent_bytes: int = 0,
    reason: str | None = None,
) -> None:
    """One JSON line (the path without its query string: credentials may ride there)."""
    entry: dict[str, Any] = {
        "event": event,
        "route": route.pattern.source,
        "path": scope.get("path", ""),
        "method": scope.get("method", ""),
        "status": status,
        "duration": round(time.monotonic() - started, 3),
        "events": events,
        "bytes": sent_bytes,
        "client": client_address(scope),
    }
    if reason is not None:
        entry["reason"] = reason
    access_logger.info(json.dumps(entry, separators=(",", ":")))


def refusal_reason(error: StreamError) -> str:
    return error.reason or error.code

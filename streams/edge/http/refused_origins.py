"""Requests refused for their ``Origin``: counted always, logged once a minute per route and origin.

A page on an origin its route does not allow retries, so the same refusal
comes again and again: one access line per (route, origin) and minute says it
(with how many were held back since), across all of them at most
:data:`LINES_PER_MINUTE`. The line names the origin, the route, the path
without its query string (tokens may ride there) and the client; never a
header's value.

On ``/metrics`` (``sluice_origin_refusals``) the ``origin`` label is the origin
only if the configuration names it somewhere (a route's ``allow_origins`` or
``SLUICE_CORS_ALLOW_ORIGINS``: a page of your own on the wrong route), ``null``
for an opaque origin (a sandboxed frame, a ``file:`` page), else ``other``: an
origin anyone can make up must not make a series of its own.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Collection

from common.origins import origin_key
from streams.core.asgi import Scope
from streams.edge.http.access import client_address
from streams.edge.http.budget import LineBudget
from streams.edge.http.counters import origin_refusals

access_logger = logging.getLogger("sluice.access")

LINES_PER_MINUTE = 60
# Longer Origin headers are cut in the log: an origin is short, a made-up header need not be.
ORIGIN_LOGGED_CHARS = 200


class RefusedOrigins:
    """One worker's refusals by origin (``WorkerRuntime.refused_origins``): the counter, a line budget per pair."""

    def __init__(self, *, per_minute: float = 1.0, pairs: int = 4096) -> None:
        self.budget = LineBudget(burst=1, per_minute=per_minute, clients=pairs, total_per_minute=LINES_PER_MINUTE)

    def refused(self, scope: Scope, route: str, origin: str, *, preflight: bool, known: Collection[str]) -> None:
        """Count the refusal of ``origin`` on ``route``; log it unless this pair was logged within the minute."""
        origin_refusals.labels(route, origin_label(origin, known), "true" if preflight else "false").inc()
        origin = origin[:ORIGIN_LOGGED_CHARS]
        held_back = self.budget.take(f"{route}\n{origin}", time.monotonic())
        if held_back is None:
            return
        entry = {
            "event": "origin_refused",
            "route": route,
            "origin": origin,
            "path": scope.get("path", ""),
            "method": scope.get("method", ""),
            "preflight": preflight,
            "status": 403,
            "client": client_address(scope),
            "held_back": held_back,
        }
        access_logger.info(json.dumps(entry, separators=(",", ":")))


def origin_label(origin: str, known: Collection[str]) -> str:
    """``origin`` as a metrics label: itself if ``known`` (origin keys) holds it, ``null``, or ``other``."""
    if origin == "null":
        return "null"
    key = origin_key(origin)
    return key if key in known else "other"

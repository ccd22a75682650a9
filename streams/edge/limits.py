"""Per-address stream limits: one client address cannot hold every connection of a worker.

A stream request from an address that already holds ``MAX_STREAMS_PER_ADDRESS``
open streams in this worker process is refused with ``429``, ``retry-after``
and a JSON body. The count is per worker process (``--workers N`` multiplies
it) and per address as the socket sees it (behind a proxy, the proxy's).
Loopback is not exempt.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from django.conf import settings

from streams.core.errors import TooManyStreams

Scope = dict[str, Any]
App = Callable[
    [Scope, Callable[[], Awaitable[dict[str, Any]]], Callable[[dict[str, Any]], Awaitable[None]]], Awaitable[None]
]

_open: Counter[str] = Counter()


def streams_open_by(address: str) -> int:
    return _open[address]


async def stream_limited(app: App, scope: Scope, receive: Any, send: Any) -> None:
    """Run ``app`` for a stream request unless its address is at its limit (then answer 429)."""
    limit: int = settings.SLUICE["MAX_STREAMS_PER_ADDRESS"]
    client = scope.get("client")
    if not limit or scope.get("method") != "GET" or not client:
        await app(scope, receive, send)
        return
    address = str(client[0])
    if _open[address] >= limit:
        error = TooManyStreams(
            f"this address already holds {limit} open streams; close one or retry later",
            headers=[(b"retry-after", b"5")],
        )
        body = error.body()
        await send(
            {
                "type": "http.response.start",
                "status": error.status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"cache-control", b"no-store"),
                    *error.headers,
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
        return
    _open[address] += 1
    try:
        await app(scope, receive, send)
    finally:
        _open[address] -= 1
        if not _open[address]:
            del _open[address]

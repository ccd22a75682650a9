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
from functools import partial

from streams.conf import streams_settings
from streams.core.asgi import Receive, Scope, Send
from streams.core.errors import TooManyStreams
from streams.edge.responses import send_error
from streams.edge.teardown import stream_teardown

App = Callable[[Scope, Receive, Send], Awaitable[None]]

_open: Counter[str] = Counter()


async def stream_limited(app: App, scope: Scope, receive: Receive, send: Send) -> None:
    """Run ``app`` for a stream request unless its address is at its limit (then answer 429)."""
    limit = streams_settings.MAX_STREAMS_PER_ADDRESS
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
        await send_error(send, error)
        return
    _open[address] += 1
    # Given back when the stream ends, which may be after the app returned (streams.edge.teardown).
    stream_teardown(scope).defer(partial(_release, address))
    await app(scope, receive, send)


def _release(address: str) -> None:
    _open[address] -= 1
    if not _open[address]:
        del _open[address]

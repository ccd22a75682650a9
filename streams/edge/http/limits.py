"""Per-address stream limits: one client address cannot hold every connection of a worker.

A stream request from an address that already holds ``MAX_STREAMS_PER_ADDRESS``
open streams in this worker process is refused with ``429``, ``retry-after``
and a JSON body. The count is per worker process (``--workers N`` multiplies
it) and per address as the socket sees it (behind a proxy, the proxy's).
Loopback is not exempt.
"""

from __future__ import annotations

from collections import Counter

from streams.conf import streams_settings
from streams.core.asgi import Scope
from streams.core.errors import TooManyStreams


class AddressSlots:
    """The open streams of each client address in this worker (held by its runtime)."""

    __slots__ = ("_open",)

    def __init__(self) -> None:
        self._open: Counter[str] = Counter()

    def take(self, scope: Scope) -> str | None:
        """The address whose slot this stream request holds until it ends; None if it counts against none.

        Raises :class:`TooManyStreams` if the address is at its limit.
        """
        limit = streams_settings.MAX_STREAMS_PER_ADDRESS
        client = scope.get("client")
        if not limit or scope.get("method") != "GET" or not client:
            return None
        address = str(client[0])
        if self._open[address] >= limit:
            raise TooManyStreams(
                f"this address already holds {limit} open streams; close one or retry later",
                headers=[(b"retry-after", b"5")],
            )
        self._open[address] += 1
        return address

    def give_back(self, address: str) -> None:
        self._open[address] -= 1
        if not self._open[address]:
            del self._open[address]

    def __len__(self) -> int:
        return sum(self._open.values())

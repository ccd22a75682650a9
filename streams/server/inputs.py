"""A request's ASGI input queue, made only if the application reads it.

daphne gives every request an ``asyncio.Queue`` for ``receive`` (the body, then
``http.disconnect``). A Sluice stream on daphne never reads it: the request's
:class:`~streams.server.flow.RequestFlow` says when the client goes. An
``asyncio.Queue`` holds three deques and an event (about 3 KiB), so an idle
stream would carry 3 KiB for nothing; :class:`InputQueue` keeps what daphne puts
in a list, and becomes a queue on the first ``get`` that has to wait.
"""

from __future__ import annotations

import asyncio
from typing import Any


class InputQueue:
    """The subset of ``asyncio.Queue`` daphne uses: ``put_nowait`` and ``get``."""

    __slots__ = ("_items", "_queue")

    def __init__(self) -> None:
        self._items: list[dict[str, Any]] = []
        self._queue: asyncio.Queue[dict[str, Any]] | None = None

    def put_nowait(self, message: dict[str, Any]) -> None:
        if self._queue is not None:
            self._queue.put_nowait(message)
        else:
            self._items.append(message)

    async def get(self) -> dict[str, Any]:
        if self._items:
            return self._items.pop(0)
        if self._queue is None:
            self._queue = asyncio.Queue()
        return await self._queue.get()

"""What a stream request leaves to do when it ends, for the layers its app has returned through.

On daphne with Sluice's server an open stream needs no coroutine: the hub writes to
the socket, the request says when its client goes, and the heartbeat wheel and the
token's timers do the rest. So once a stream is live (:func:`~streams.edge.stream.stream_serve`)
its app returns instead of waiting: the chain of coroutines from daphne's task down
to the stream, with their frames, was about 3 KiB of every idle stream
(``bench/connection_memory.py``). What the layers would have done in ``finally``
(unregister the token's deadlines, leave the upstream, give back the address's
slot) each layer :meth:`~Teardown.defer`\\ s instead; the :class:`Teardown` runs it,
last in first out, once: when the app returns, or, for a stream handed off, when
it ends.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from streams.core.asgi import Scope

logger = logging.getLogger("sluice.streams")

# The ASGI scope key of the request's Teardown (set by the stream router, read by the layers below it).
TEARDOWN_KEY = "sluice.teardown"


class Teardown:
    """The deferred clean-up of one stream request."""

    __slots__ = ("_callbacks", "_handed_off")

    def __init__(self) -> None:
        self._callbacks: list[Callable[[], object]] = []
        self._handed_off = False

    def defer(self, callback: Callable[[], object]) -> None:
        """Run ``callback`` when the request ends (after everything deferred later)."""
        self._callbacks.append(callback)

    def hand_off(self, on_end: Callable[[Callable[[], object]], None]) -> None:
        """The stream outlives its app: run the clean-up when it ends, not when the app returns.

        ``on_end(callback)`` calls ``callback`` once the stream has ended (a source's ``on_closed``).
        """
        self._handed_off = True
        on_end(self.run)

    def returned(self) -> None:
        """The app returned (or raised): clean up now, unless the stream was handed off."""
        if not self._handed_off:
            self.run()

    def run(self) -> None:
        callbacks, self._callbacks = self._callbacks, []
        for callback in reversed(callbacks):
            try:
                callback()
            except Exception:
                logger.exception("cleaning up a stream failed")


def future_then(future: asyncio.Future[Any], callback: Callable[[], object]) -> None:
    """Call ``callback`` (no arguments) once ``future`` is done."""
    future.add_done_callback(lambda _done: callback())


def teardown_attach(scope: Scope) -> Teardown:
    """Give a stream request its :class:`Teardown`; the caller calls :meth:`Teardown.returned` when the app returns."""
    teardown = scope[TEARDOWN_KEY] = Teardown()
    return teardown


def stream_teardown(scope: Scope) -> Teardown:
    """The request's :class:`Teardown` (the stream router attached it)."""
    teardown: Teardown = scope[TEARDOWN_KEY]
    return teardown

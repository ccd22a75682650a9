"""What one kind of stream (a hub subscription, an upstream, several routes at once) does in a response."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from streams.fanout.sinks import Sink


class StreamSource(Protocol):
    """What one kind of stream does inside the shared response."""

    @property
    def closed(self) -> asyncio.Future[str]:
        """Resolves with the reason once the stream is over (set by :meth:`end` or the source itself)."""

    @property
    def close_reason(self) -> str | None: ...

    def on_closed(self, callback: Callable[[], object]) -> None:
        """Call ``callback`` soon, on the event loop, once the stream is over (as :attr:`closed` resolves)."""

    def attach(self, sink: Sink) -> None:
        """Start delivering to ``sink`` (the response head is out)."""

    def end(self, reason: str) -> None:
        """Stop delivering and end the stream (a configuration change, an expired token, a client gone)."""

    def challenge(self) -> None:
        """Send the ``challenge`` event (the token expires soon)."""

    def detach(self) -> None:
        """Stop delivering, whatever ended the stream (called once, when it ends)."""


def future_then(future: asyncio.Future[Any], callback: Callable[[], object]) -> None:
    """Call ``callback`` (no arguments) once ``future`` is done."""
    future.add_done_callback(lambda _done: callback())

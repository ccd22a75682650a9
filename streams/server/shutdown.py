"""Graceful SIGTERM: stop accepting, end every open stream cleanly, then stop the reactor.

Twisted's own SIGTERM handler stops the reactor at once; daphne then cancels
every application and the reactor drops every connection with whatever was
still buffered, so a stream's response never gets its last chunk and the
client sees a broken transfer. Here SIGTERM first stops listening and ends
each open stream the way a reconfiguration does (the consumer finishes the
response: the chunked terminator follows the last whole frame). Once no stream
is left, the connections that carried requests are closed after their
buffered bytes are written, and the reactor stops when they are gone or after
``timeout`` seconds, whichever comes first. A second signal stops at once.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import Callable, Sized
from typing import Any, Protocol

from streams.core.closing import CloseReason

logger = logging.getLogger("sluice.shutdown")

SHUTDOWN_REASON = CloseReason.SHUTDOWN
_POLL_SECONDS = 0.05


class StreamsEnder(Sized, Protocol):
    def end_all(self, reason: str) -> int: ...


class GracefulShutdown:
    """Installed on the reactor's asyncio loop by ``runstreams``; :meth:`begin` runs on SIGTERM."""

    def __init__(
        self,
        *,
        streams: Callable[[], StreamsEnder | None],
        listeners: Callable[[], list[Any]],
        transports: Callable[[], list[Any]],
        stop: Callable[[], None],
        timeout: float,
        stopping: Callable[[], None] = lambda: None,
    ) -> None:
        self._streams = streams
        self._listeners = listeners
        self._transports = transports
        self._stop = stop
        self._timeout = timeout
        self._stopping = stopping  # told at the first signal: what runs beside the server starts to stop
        self._started: float | None = None
        self._closing: list[Any] | None = None

    def install(self) -> None:
        loop = asyncio.get_event_loop()
        loop.add_signal_handler(signal.SIGTERM, self.begin)
        loop.add_signal_handler(signal.SIGINT, self.begin)

    def begin(self) -> None:
        if self._started is not None:
            logger.info("second stop signal: stopping now")
            self._stop()
            return
        self._started = time.monotonic()
        self._stopping()
        for listener in self._listeners():
            # daphne keeps the Deferred of each endpoint's listen(); an adopted socket is a port.
            if hasattr(listener, "addCallback"):
                listener.addCallback(lambda port: port.stopListening())
            else:
                listener.stopListening()
        # Taken now: daphne forgets a request soon after its response ends.
        self._closing = self._transports()
        streams = self._streams()
        ended = streams.end_all(SHUTDOWN_REASON) if streams is not None else 0
        logger.info("stopping: ended %d open streams, waiting up to %.0fs for them to finish", ended, self._timeout)
        asyncio.get_event_loop().call_soon(self._poll_streams)

    def _expired(self) -> bool:
        assert self._started is not None
        return time.monotonic() - self._started > self._timeout

    def _poll_streams(self) -> None:
        streams = self._streams()
        remaining = len(streams) if streams is not None else 0
        if remaining and not self._expired():
            asyncio.get_event_loop().call_later(_POLL_SECONDS, self._poll_streams)
            return
        if remaining:
            logger.warning("%d streams still open after %.0fs", remaining, self._timeout)
        # One more turn of the loop lets the consumers that just left their
        # stream hand the response's end to Twisted.
        asyncio.get_event_loop().call_later(_POLL_SECONDS, self._close_connections)

    def _close_connections(self) -> None:
        # loseConnection writes what is buffered first; the reactor's own
        # shutdown would drop it.
        for transport in self._closing or []:
            if not getattr(transport, "disconnected", True):
                transport.loseConnection()
        self._poll_connections()

    def _poll_connections(self) -> None:
        open_ = [t for t in self._closing or [] if not getattr(t, "disconnected", True)]
        if open_ and not self._expired():
            asyncio.get_event_loop().call_later(_POLL_SECONDS, self._poll_connections)
            return
        if open_:
            logger.warning("%d connections still open after %.0fs", len(open_), self._timeout)
        self._stop()

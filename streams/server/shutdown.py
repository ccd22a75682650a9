"""Graceful SIGTERM: stop accepting, drain the open streams in waves, then stop the reactor.

Twisted's own SIGTERM handler stops the reactor at once; daphne then cancels
every application and the reactor drops every connection with whatever was
still buffered, so a stream's response never gets its last chunk and the
client sees a broken transfer. Here SIGTERM first stops listening, turns
``/readyz`` to 503 (``draining``), and ends the open streams in waves over the
drain window (``DRAIN_SECONDS``, within ``timeout``), each the way a
reconfiguration does (the consumer finishes the response: a ``retry:`` line and
the chunked terminator follow the last whole frame). Each wave ends an equal
share of the streams still open, chosen at random; each stream's ``retry:`` is
its route's plus a random part of one wave's length, so plain ``EventSource``
clients come back spread evenly over the window, not all at once. Streams that
a kept-alive connection opens meanwhile are served and drained with the rest.
Once no stream is left, the connections that carried requests are closed after their
buffered bytes are written, and the reactor stops when they are gone or after
``timeout`` seconds, whichever comes first. A second signal stops at once.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import signal
import time
from collections.abc import Callable, Sized
from typing import Any, Protocol

from streams.core.closing import CloseReason

logger = logging.getLogger("sluice.shutdown")

SHUTDOWN_REASON = CloseReason.SHUTDOWN
_POLL_SECONDS = 0.05
# The drain ends a share of the streams this often (and each stream's retry: spreads over one wave).
WAVE_SECONDS = 0.25
# What the drain leaves of ``timeout`` for the last streams and connections to end.
_AFTER_DRAIN_SECONDS = 1.0


class OpenStreamLike(Protocol):
    def end(self, reason: str) -> None: ...


class StreamsEnder(Sized, Protocol):
    def streams(self) -> list[Any]: ...


def drain_plan(drain_seconds: float, timeout: float) -> tuple[int, float]:
    """How many waves, and how far apart: the window taken within ``timeout``, one wave for none."""
    window = max(0.0, min(drain_seconds, timeout - _AFTER_DRAIN_SECONDS))
    waves = max(1, round(window / WAVE_SECONDS))
    return waves, (window / waves if waves > 1 else 0.0)


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
        drain_seconds: float = 0.0,
        draining: Callable[[float], None] = lambda jitter: None,
    ) -> None:
        self._streams = streams
        self._listeners = listeners
        self._transports = transports
        self._stop = stop
        self._timeout = timeout
        self._stopping = stopping  # told at the first signal: what runs beside the server starts to stop
        self._started: float | None = None
        self._closing: list[Any] | None = None
        # Told at the first signal with one wave's length: not ready from now on, and the retry: jitter.
        self._draining = draining
        self._waves, self._wave_seconds = drain_plan(drain_seconds, timeout)
        self._ended: set[Any] = set()

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
        self._draining(self._wave_seconds)
        streams = self._streams()
        logger.info(
            "stopping: draining %d open streams over %.1fs, waiting up to %.0fs in all",
            len(streams) if streams is not None else 0,
            self._wave_seconds * self._waves,
            self._timeout,
        )
        self._wave(0)

    def _pending(self) -> list[OpenStreamLike]:
        streams = self._streams()
        return [s for s in (streams.streams() if streams is not None else []) if s not in self._ended]

    def _end(self, streams: list[OpenStreamLike]) -> None:
        for stream in streams:
            self._ended.add(stream)
            stream.end(SHUTDOWN_REASON)

    def _wave(self, index: int) -> None:
        """End an equal share of the streams still open; the last wave ends the rest."""
        assert self._started is not None
        pending = self._pending()
        left = self._waves - index
        count = len(pending) if left <= 1 else math.ceil(len(pending) / left)
        self._end(random.sample(pending, count))
        if left <= 1 or not pending:
            # None left (or the window is over): the rest end now, and their connections close.
            asyncio.get_event_loop().call_soon(self._poll_streams)
            return
        due = self._started + (index + 1) * self._wave_seconds
        asyncio.get_event_loop().call_later(max(0.0, due - time.monotonic()), self._wave, index + 1)

    def _expired(self) -> bool:
        assert self._started is not None
        return time.monotonic() - self._started > self._timeout

    def _poll_streams(self) -> None:
        self._end(self._pending())  # opened on a kept-alive connection since the last wave
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

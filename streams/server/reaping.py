"""daphne's connection bookkeeping, done when something happens instead of by walking every connection.

daphne walks all its connections every second (``application_checker``: reap the
application instances that finished, cancel those whose client left more than
``application_close_timeout`` ago) and every two seconds (``timeout_checker``:
HTTP timeouts and WebSocket pings). With thousands of idle streams those walks
were a fifth of an idle gateway's CPU (docs/benchmarks.md). :class:`EventReaping`
looks at a connection only once its application finishes or its client leaves,
and the timeout pass visits only the connections that have a timeout to keep:
WebSockets, and HTTP requests when ``http_timeout`` is set.
"""

from __future__ import annotations

import asyncio
import logging
import time
from functools import partial
from typing import Any, cast

from twisted.internet import reactor  # daphne installed the asyncio reactor already
from twisted.web.http import Request

logger = logging.getLogger("daphne.server")


class EventReaping:
    """A mixin over ``daphne.server.Server``: its two periodic checks over due connections only."""

    connections: dict[Any, dict[str, Any]]
    application_close_timeout: float
    http_timeout: float | None

    def run(self) -> None:
        # Connections to look at on the next check: their application ended or their client left.
        self._due: dict[Any, None] = {}
        # Connections with a timeout to keep (daphne's timeout_checker calls their check_timeouts).
        self._timed: dict[Any, None] = {}
        super().run()  # type: ignore[misc]

    def protocol_connected(self, protocol: Any) -> None:
        super().protocol_connected(protocol)  # type: ignore[misc]
        if self.http_timeout or not isinstance(protocol, Request):
            self._timed[protocol] = None

    def protocol_disconnected(self, protocol: Any) -> None:
        super().protocol_disconnected(protocol)  # type: ignore[misc]
        self._due[protocol] = None

    def application_watch(self, protocol: Any) -> None:
        """Have the connection looked at once its application instance finishes."""
        details = self.connections.get(protocol)
        instance = details.get("application_instance") if details is not None else None
        if instance is not None:
            instance.add_done_callback(partial(_application_done, self._due, protocol))

    def application_checker(self) -> None:
        """daphne's, over the connections that had something happen since the last pass."""
        now = time.time()
        for protocol in list(self._due):
            details = self.connections.get(protocol)
            if details is None:
                self._forget(protocol)
                continue
            disconnected = details.get("disconnected")
            instance = details.get("application_instance")
            overdue = disconnected and now - disconnected > self.application_close_timeout
            if overdue and instance is not None and not instance.done():
                logger.warning(
                    "Application instance %r for connection %s took too long to shut down and was killed.",
                    instance,
                    repr(protocol),
                )
                instance.cancel()
            if instance is not None and instance.done():
                self._application_reap(protocol, instance, disconnected)
                del details["application_instance"]
                instance = None
            if instance is None and disconnected:
                del self.connections[protocol]
                self._forget(protocol)
            elif instance is None or not disconnected:
                # Reaped, client still there (its leaving makes it due again); or, a future that is not done yet.
                self._due.pop(protocol, None)
        cast(Any, reactor).callLater(1, self.application_checker)

    def _application_reap(self, protocol: Any, instance: asyncio.Future[Any], disconnected: float | None) -> None:
        """What daphne does with an application instance that finished: log its exception, or stop on Ctrl-C."""
        try:
            exception = instance.exception()
        except asyncio.CancelledError:
            return
        if exception is None:
            return
        if isinstance(exception, KeyboardInterrupt):
            self.stop()  # type: ignore[attr-defined]  # the protocol asks the server to exit (tests)
            return
        logger.error("Exception inside application: %s", exception, exc_info=exception)
        if not disconnected:
            protocol.handle_exception(exception)

    def timeout_checker(self) -> None:
        """daphne's, over the connections that have a timeout to keep."""
        for protocol in list(self._timed):
            if protocol in self.connections:
                protocol.check_timeouts()
            else:
                self._timed.pop(protocol, None)
        cast(Any, reactor).callLater(2, self.timeout_checker)

    def _forget(self, protocol: Any) -> None:
        self._due.pop(protocol, None)
        self._timed.pop(protocol, None)


def _application_done(due: dict[Any, None], protocol: Any, instance: asyncio.Future[Any]) -> None:
    """A done-callback (a module function: no closure per connection)."""
    due[protocol] = None

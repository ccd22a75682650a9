"""Serving Sluice: daphne with flow control in this process, or a supervisor over worker processes.

``runstreams`` parses its options into :class:`ServeOptions` and calls
:func:`gateway_serve` (one process: hubs, streams, admin and pages) or
:func:`gateway_supervise` (``--workers N``: N such processes on one listening
socket, each started with ``--listen-fd``).
"""

from __future__ import annotations

import shutil
import socket
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from streams.conf import streams_settings
from streams.edge.runtime import WorkerRuntime
from streams.server.application import worker_application
from streams.server.collector import collector_settle
from streams.server.flow import FlowServer, reactor, request_transports
from streams.server.reactor import event_loop_name
from streams.server.shutdown import GracefulShutdown
from streams.server.tls import self_signed_write, tls_options
from streams.server.workers import LISTEN_BACKLOG, Supervisor, listening_socket


class ServeError(Exception):
    """Options the gateway cannot serve with (a certificate it cannot use, a port it cannot take)."""


class ListenError(ServeError):
    """The address to serve on cannot be taken (in use, or not this host's)."""


def listen_check(host: str, port: int) -> None:
    """Raise :class:`ListenError` if ``host:port`` cannot be bound now, before anything else is started.

    Bound with SO_REUSEADDR as Twisted's listening port is, so a port left in TIME_WAIT passes.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
    except OSError as exc:
        raise ListenError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc


@dataclass(frozen=True)
class TLSFiles:
    """The certificate and key to serve HTTPS with, and a directory to remove when serving ends."""

    cert: str
    key: str
    cleanup: str = ""

    @classmethod
    def self_signed(cls) -> TLSFiles:
        """A certificate for localhost made now (demos and tests)."""
        directory = tempfile.mkdtemp(prefix="sluice-tls-")  # removed when the server stops
        cert, key = self_signed_write(directory)
        return cls(str(cert), str(key), cleanup=directory)

    def options(self) -> Any:
        """Twisted TLS options offering ``h2`` and ``http/1.1`` (ALPN)."""
        try:
            return tls_options(self.cert, self.key)
        except (OSError, ValueError) as exc:
            raise ServeError(f"cannot use {self.cert} / {self.key}: {exc}") from exc


@dataclass(frozen=True)
class ServeOptions:
    host: str
    port: int
    workers: int = 1
    tls: TLSFiles | None = None
    listen_fd: int | None = None  # a worker of a supervisor: serve this inherited socket
    verbosity: int = 1
    kafka_bootstrap: str = ""  # an embedded broker (ours or a supervisor's): the default cluster of the runtime

    @property
    def scheme(self) -> str:
        return "https" if self.tls is not None else "http"


def gateway_serve(
    options: ServeOptions, announce: Callable[[str], None], stopping: Callable[[], None] = lambda: None
) -> None:
    """Serve in this process until SIGTERM/SIGINT (graceful: open streams end cleanly first).

    ``stopping`` is called at the first signal, so what runs beside the server stops meanwhile.
    """
    runtime = WorkerRuntime(options.kafka_bootstrap)
    tls = options.tls.options() if options.tls is not None else None
    scheme = options.scheme
    listen_failures: list[str] = []

    class AnnouncingServer(FlowServer):
        def listen_error(self, failure: Any) -> None:
            listen_failures.append(failure.getErrorMessage())
            super().listen_error(failure)  # stops the server

        def listen_success(self, listening: Any) -> Any:
            super().listen_success(listening)
            address = listening.getHost()
            shown = f"[{address.host}]" if ":" in address.host else address.host
            announce(f"Sluice listening on {scheme}://{shown}:{address.port}/ (event loop: {event_loop_name()})")
            # The result of the listen's Deferred: the port, which SIGTERM stops (streams/server/shutdown.py).
            return listening

    interface = options.host.replace(":", r"\:")
    server = AnnouncingServer(
        application=worker_application(runtime),
        endpoints=[f"tcp:port={options.port}:interface={interface}:backlog={LISTEN_BACKLOG}"],
        signal_handlers=True,
        action_logger=None,
        verbosity=options.verbosity,
        application_close_timeout=5,
    )
    if options.listen_fd is not None:
        server.adopt_socket(options.listen_fd)
    elif tls is not None:
        server.serve_tls(options.host, options.port, tls)
    twisted = cast(Any, reactor)
    # While the loop still runs: the re-authorization and configuration listeners are tasks on it.
    twisted.addSystemEventTrigger("before", "shutdown", runtime.listeners_stop)
    shutdown = GracefulShutdown(
        streams=runtime.open_streams_if_started,
        listeners=lambda: list(server.listeners),
        transports=lambda: request_transports(server.connections),
        stop=twisted.stop,
        timeout=streams_settings.SHUTDOWN_SECONDS,
        stopping=stopping,
        drain_seconds=streams_settings.DRAIN_SECONDS,
        draining=runtime.drain_begin,
    )
    # After Twisted put in its own handlers, which would stop the reactor at once.
    twisted.callWhenRunning(shutdown.install)
    collector_settle(twisted.callLater)
    try:
        server.run()
    finally:
        runtime.hubs_stop()
        if options.tls is not None and options.tls.cleanup:
            shutil.rmtree(options.tls.cleanup, ignore_errors=True)
    if listen_failures:
        raise ListenError(f"cannot listen on {options.host}:{options.port}: {listen_failures[0]}")


def gateway_supervise(
    options: ServeOptions, announce: Callable[[str], None], stopping: Callable[[], None] = lambda: None
) -> None:
    """Run ``options.workers`` worker processes on one listening socket; a worker that dies is replaced."""
    try:
        sock = listening_socket(options.host, options.port)
    except OSError as exc:
        raise ListenError(f"cannot listen on {options.host}:{options.port}: {exc.strerror or exc}") from exc
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host

    def command(fd: int) -> list[str]:
        child = [sys.executable, sys.argv[0], "runstreams", "--listen-fd", str(fd)]
        child += ["--verbosity-daphne", str(options.verbosity)]
        if options.kafka_bootstrap:
            child += ["--kafka-bootstrap", options.kafka_bootstrap]
        return child

    announce(f"Sluice listening on http://{shown}:{port}/ ({options.workers} workers)")
    Supervisor(command, sock, options.workers, stopping).run()

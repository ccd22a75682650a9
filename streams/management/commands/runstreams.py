"""``manage.py runstreams``: serve streams, admin and pages with daphne (SPEC 7).

Parse the options, start the embedded broker when no Kafka is set, and hand
over to :mod:`streams.server.gateway`. Apps that need something running while
Sluice serves (the demo) subclass this command and override :meth:`before_serving`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol, runtime_checkable

from django.core.management.base import BaseCommand, CommandError, CommandParser

from common.database import database_reachable
from streams.conf import streams_settings
from streams.server.collector import arenas_cap
from streams.server.descriptors import open_files_raise
from streams.server.workers import channel_layer_shared, workers_default

# Added to the error when the address to listen on is taken: the option that picks another.
PORT_TAKEN_HINT = "(choose another port with --port)"


@runtime_checkable
class StopsInBackground(Protocol):
    """A part run beside the server that can start stopping at the signal; its ``stop()`` then waits."""

    def stop_begin(self) -> None: ...


def parts_stop_begin(running: list[Any]) -> None:
    """At the first stop signal: let the parts that stop slowly (a Spark job) begin while streams end."""
    for part in running:
        if isinstance(part, StopsInBackground):
            part.stop_begin()


class Command(BaseCommand):
    help = "Serve Sluice (streams, admin, pages) with daphne; start an embedded broker if no Kafka is set."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="Interface to listen on.")
        parser.add_argument("--port", type=int, default=8000, help="Port to listen on (0: any free port).")
        parser.add_argument("--tls-cert", help="PEM certificate: serve HTTPS (HTTP/2 where the client offers it).")
        parser.add_argument("--tls-key", help="PEM private key for --tls-cert.")
        parser.add_argument(
            "--self-signed",
            action="store_true",
            help="Serve HTTPS (and HTTP/2) with a certificate generated now for localhost (demos and tests).",
        )
        parser.add_argument(
            "--workers",
            type=int,
            default=None,
            help="Worker processes sharing the port, each with its own hubs "
            "(default: one per core with REDIS_URL set; else, and with TLS, 1).",
        )
        # A supervisor's workers: the socket to serve, and the embedded broker it started.
        parser.add_argument("--listen-fd", type=int, help=argparse.SUPPRESS)
        parser.add_argument("--kafka-bootstrap", default="", help=argparse.SUPPRESS)
        parser.add_argument("--verbosity-daphne", type=int, default=1, help=argparse.SUPPRESS)

    def handle(self, *args: Any, **options: Any) -> None:
        from streams.server.gateway import (
            ListenError,
            ServeError,
            ServeOptions,
            TLSFiles,
            gateway_serve,
            gateway_supervise,
        )

        tls_asked = bool(options["tls_cert"] or options["self_signed"])
        if bool(options["tls_cert"]) != bool(options["tls_key"]):
            raise CommandError("--tls-cert and --tls-key go together")
        if options["self_signed"] and options["tls_cert"]:
            raise CommandError("--self-signed makes its own certificate: give it or --tls-cert/--tls-key, not both")
        workers = options["workers"]
        if workers is None:
            workers = workers_default(
                tls=tls_asked, child=options["listen_fd"] is not None, shared_layer=channel_layer_shared()
            )
        if workers < 1:
            raise CommandError("--workers must be at least 1")
        if workers > 1 and tls_asked:
            raise CommandError("--workers above 1 serves plain HTTP only; terminate TLS in front, or use one worker")
        arenas_cap()  # before any thread allocates: the workers inherit it
        if options["listen_fd"] is None:
            self.listen_ensure(options["host"], options["port"])  # before the broker and the demo start
            # Every stream is a socket: the workers inherit the raised limit.
            self.stdout.write(open_files_raise().describe(workers))
        if workers == 1:
            database_reachable()  # away: one line says so; requests and probes retry it (docs/reliability.md)
        with self.kafka(options["kafka_bootstrap"]) as bootstrap:
            running = self.before_serving(bootstrap, options)
            try:
                tls = None
                if options["self_signed"]:
                    tls = TLSFiles.self_signed()
                    self.stdout.write(
                        f"Self-signed certificate for localhost: {tls.cert} (trust it with curl --cacert {tls.cert})"
                    )
                elif options["tls_cert"]:
                    tls = TLSFiles(options["tls_cert"], options["tls_key"])
                serve = ServeOptions(
                    host=options["host"],
                    port=options["port"],
                    workers=workers,
                    tls=tls,
                    listen_fd=options["listen_fd"],
                    verbosity=options["verbosity_daphne"],
                    kafka_bootstrap=bootstrap if bootstrap != streams_settings.KAFKA_BOOTSTRAP_SERVERS else "",
                )
                serving = gateway_supervise if workers > 1 else gateway_serve
                serving(serve, self.announce, lambda: parts_stop_begin(running))
            except ListenError as exc:
                raise CommandError(f"{exc} {PORT_TAKEN_HINT}") from exc  # taken since the check
            except ServeError as exc:
                raise CommandError(str(exc)) from exc
            finally:
                for part in reversed(running):
                    part.stop()

    def listen_ensure(self, host: str, port: int) -> None:
        """Exit with a :class:`CommandError` naming ``--port`` if ``host:port`` is taken."""
        from streams.server.gateway import ListenError, listen_check

        try:
            listen_check(host, port)
        except ListenError as exc:
            raise CommandError(f"{exc} {PORT_TAKEN_HINT}") from exc

    def before_serving(self, bootstrap: str, options: dict[str, Any]) -> list[Any]:
        """Start what runs beside the server (each with ``stop()``); nothing here, the demo adds its feeds."""
        return []

    def announce(self, line: str) -> None:
        self.stdout.write(line)
        sys.stdout.flush()

    @contextmanager
    def kafka(self, given: str) -> Iterator[str]:
        """The Kafka to serve from: the configured one, a supervisor's embedded broker, or a new embedded one."""
        if given or streams_settings.KAFKA_BOOTSTRAP_SERVERS:
            yield given or streams_settings.KAFKA_BOOTSTRAP_SERVERS
            return
        from streams.server.broker import EmbeddedBroker

        try:
            broker = EmbeddedBroker().start()
        except RuntimeError as exc:
            raise CommandError(f"could not start the embedded broker: {exc}") from exc
        self.stdout.write(
            f"No KAFKA_BOOTSTRAP_SERVERS: started the embedded broker (tansu, memory) on {broker.bootstrap}"
        )
        try:
            yield broker.bootstrap
        finally:
            broker.stop()
            self.stdout.write("Embedded broker stopped.")

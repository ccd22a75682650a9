"""``manage.py runstreams``: serve streams, admin and pages with daphne (SPEC 7)."""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, cast

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

logger = logging.getLogger("sluice.runstreams")


class Command(BaseCommand):
    _self_signed_dir: str | None = None
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
            "--demo", action="store_true", help="Migrate, create a demo admin, topic, route and live data."
        )
        parser.add_argument(
            "--workers",
            type=int,
            default=None,
            help="Worker processes sharing the port, each with its own hubs "
            "(default: one per core with REDIS_URL set; else, and with TLS, 1).",
        )
        parser.add_argument("--listen-fd", type=int, help=argparse_hidden())
        parser.add_argument("--verbosity-daphne", type=int, default=1, help=argparse_hidden())

    def handle(self, *args: Any, **options: Any) -> None:
        from streams.server.broker import EmbeddedBroker

        if bool(options["tls_cert"]) != bool(options["tls_key"]):
            raise CommandError("--tls-cert and --tls-key go together")
        if options["workers"] is None:
            options["workers"] = workers_default(
                tls=bool(options["tls_cert"] or options["self_signed"]),
                child=options["listen_fd"] is not None,
                shared_layer=channel_layer_shared(),
            )
        if options["workers"] < 1:
            raise CommandError("--workers must be at least 1")
        if options["self_signed"] and options["tls_cert"]:
            raise CommandError("--self-signed makes its own certificate: give it or --tls-cert/--tls-key, not both")
        if options["workers"] > 1 and (options["tls_cert"] or options["self_signed"]):
            raise CommandError("--workers above 1 serves plain HTTP only; terminate TLS in front, or use one worker")
        if options["tls_cert"]:
            self._tls_on()
        broker: EmbeddedBroker | None = None
        running: list[Any] = []  # demo feeds and jobs, each with stop()
        if not settings.SLUICE["KAFKA_BOOTSTRAP_SERVERS"]:
            try:
                broker = EmbeddedBroker().start()
            except RuntimeError as exc:
                raise CommandError(f"could not start the embedded broker: {exc}") from exc
            settings.SLUICE["KAFKA_BOOTSTRAP_SERVERS"] = broker.bootstrap
            os.environ["KAFKA_BOOTSTRAP_SERVERS"] = broker.bootstrap
            self.stdout.write(
                f"No KAFKA_BOOTSTRAP_SERVERS: started the embedded broker (tansu, memory) on {broker.bootstrap}"
            )
        try:
            if options["demo"]:
                running = self._demo_setup()
            if options["workers"] > 1:
                self._supervise(options)
            else:
                self._serve(options)
        finally:
            from streams.edge.runtime import hub_registry_stop

            hub_registry_stop()
            for part in reversed(running):
                part.stop()
            if broker is not None:
                broker.stop()
                self.stdout.write("Embedded broker stopped.")

    @staticmethod
    def _tls_on() -> None:
        """HSTS and HTTPS-only cookies, before the application (and its middleware) is built."""
        from project.security import tls_settings

        os.environ["SLUICE_TLS"] = "1"
        hsts = int(os.environ.get("SLUICE_HSTS_SECONDS", "0")) or None
        for name, value in (tls_settings(hsts_seconds=hsts) if hsts else tls_settings()).items():
            setattr(settings, name, value)

    def _demo_setup(self) -> Any:
        from django.contrib.auth import get_user_model

        from guards.issuer import DEV_GUARD, issuer_key_ensure
        from guards.services import dev_guard_ensure
        from streams.demo import DEMO_PARTITIONS, DEMO_TOPIC, DemoProducer
        from streams.server.broker import topic_ensure
        from streams.services import route_upsert, topic_upsert

        call_command("migrate", interactive=False, verbosity=0)
        bootstrap = settings.SLUICE["KAFKA_BOOTSTRAP_SERVERS"]
        topic_ensure(bootstrap, DEMO_TOPIC, partitions=DEMO_PARTITIONS)
        topic_upsert(name=DEMO_TOPIC, description="Demo: live football scores")
        route_upsert(
            path="/demo/scores",
            topic=DEMO_TOPIC,
            initial="snapshot",
            allow_since=True,
            description="Every match: current scores first, then live updates",
            order=10,
        )
        route_upsert(
            path="/demo/leagues/{league}",
            topic=DEMO_TOPIC,
            allow_since=True,
            filters=[{"headers": {"league": "${params.league}"}}],
            description="One league's matches (premier or liga), live",
            order=20,
        )
        key = issuer_key_ensure(Path(settings.SLUICE["DEV_ISSUER_KEY_FILE"]))
        dev_guard_ensure(key=key, challenge=10)
        route_upsert(
            path="/demo/secure/leagues/{league}",
            topic=DEMO_TOPIC,
            filters=[{"headers": {"league": "${params.league}"}}],
            guard=DEV_GUARD,
            roles=["scores:read"],
            description="One league, for holders of a scores:read token (challenged 10 s before exp)",
            order=30,
        )
        if not settings.SLUICE["DEV_ISSUER"]:
            self.stdout.write("The development token issuer is off (SLUICE_DEV_ISSUER=1 turns it on).")
        user_model = get_user_model()
        if not user_model.objects.filter(username="admin").exists():
            password = secrets.token_urlsafe(12)
            user_model.objects.create_superuser("admin", "admin@localhost", password)
            self.stdout.write(f"Demo admin: user 'admin', password '{password}' (shown once)")
        running: list[Any] = [DemoProducer(bootstrap).start()]
        if os.environ.get("SLUICE_DEMO_PIPELINE", "1") == "0":
            return running
        if shutil.which("java") is None:
            self.stdout.write("No java on PATH: the Spark pipeline part of the demo is left out.")
            return running
        return running + self._demo_pipeline(bootstrap)

    def _demo_pipeline(self, bootstrap: str) -> list[Any]:
        """Raw match reports -> the Spark pipeline ``demo-scores`` -> a topic with its own route."""
        from pipeline.demo import DEMO_PIPELINE_ROUTE, DEMO_PIPELINE_TOPIC, DemoPipelineJob, demo_pipeline_setup
        from streams.services import route_upsert, topic_upsert

        # A fresh checkpoint each run: the embedded broker starts empty, old offsets would point past its end.
        checkpoint = tempfile.mkdtemp(prefix="sluice-demo-pipeline-")
        pipeline, raw = demo_pipeline_setup(bootstrap, sink_topic=DEMO_PIPELINE_TOPIC, checkpoint_location=checkpoint)
        topic_upsert(name=DEMO_PIPELINE_TOPIC, description="Demo: scores shaped by the Spark pipeline")
        route_upsert(
            path=DEMO_PIPELINE_ROUTE,
            topic=DEMO_PIPELINE_TOPIC,
            allow_since=True,
            filters=[{"headers": {"league": "${params.league}"}}],
            description="Raw match reports validated and shaped by Spark (pipeline demo-scores), one league",
            order=40,
        )
        log = Path(settings.BASE_DIR) / "var" / "demo-pipeline.log"
        job = DemoPipelineJob(pipeline.name, bootstrap, log, cleanup=checkpoint).start()
        self.stdout.write(
            f"Spark pipeline {pipeline.name} starting (log: {log}); "
            f"its output streams on {DEMO_PIPELINE_ROUTE} once Spark is up (about a minute)"
        )
        return [raw, job]

    def _supervise(self, options: dict[str, Any]) -> None:
        from streams.server.workers import Supervisor, listening_socket

        try:
            sock = listening_socket(options["host"], options["port"])
        except OSError as exc:
            raise CommandError(f"cannot listen on {options['host']}:{options['port']}: {exc}") from exc
        host, port = sock.getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host

        def command(fd: int) -> list[str]:
            return [
                sys.executable,
                sys.argv[0],
                "runstreams",
                "--listen-fd",
                str(fd),
                "--verbosity-daphne",
                str(options["verbosity_daphne"]),
            ]

        self.stdout.write(f"Sluice listening on http://{shown}:{port}/ ({options['workers']} workers)")
        sys.stdout.flush()
        Supervisor(command, sock, options["workers"]).run()

    def _serve(self, options: dict[str, Any]) -> None:
        from channels.routing import get_default_application

        from streams.edge.runtime import open_streams_if_started, runtime_stop
        from streams.server.flow import FlowServer, reactor, request_transports
        from streams.server.reactor import event_loop_name
        from streams.server.shutdown import GracefulShutdown

        host, port = options["host"], options["port"]
        interface = host.replace(":", r"\:")
        tls = self._tls_options(options)
        scheme = "https" if tls is not None else "http"
        endpoint = f"tcp:port={port}:interface={interface}"
        stdout = self.stdout

        class AnnouncingServer(FlowServer):
            def listen_success(self, listening: Any) -> None:
                super().listen_success(listening)
                address = listening.getHost()
                shown = f"[{address.host}]" if ":" in address.host else address.host
                loop = event_loop_name()
                stdout.write(f"Sluice listening on {scheme}://{shown}:{address.port}/ (event loop: {loop})")
                sys.stdout.flush()

        server = AnnouncingServer(
            application=get_default_application(),
            endpoints=[endpoint],
            signal_handlers=True,
            action_logger=None,
            verbosity=options["verbosity_daphne"],
            application_close_timeout=5,
        )
        if options["listen_fd"] is not None:
            server.adopt_socket(options["listen_fd"])
        elif tls is not None:
            server.serve_tls(host, port, tls)
        # While the loop still runs: the re-authorization and configuration listeners are tasks on it.
        cast(Any, reactor).addSystemEventTrigger("before", "shutdown", runtime_stop)
        shutdown = GracefulShutdown(
            streams=open_streams_if_started,
            listeners=lambda: list(server.listeners),
            transports=lambda: request_transports(server.connections),
            stop=cast(Any, reactor).stop,
            timeout=settings.SLUICE["SHUTDOWN_SECONDS"],
        )
        # After Twisted put in its own handlers, which would stop the reactor at once.
        cast(Any, reactor).callWhenRunning(shutdown.install)
        try:
            server.run()
        finally:
            if self._self_signed_dir is not None:
                shutil.rmtree(self._self_signed_dir, ignore_errors=True)

    def _tls_options(self, options: dict[str, Any]) -> Any:
        """TLS options (ALPN h2, http/1.1) from --tls-cert/--tls-key or --self-signed; None for plain HTTP."""
        from streams.server.tls import self_signed_write, tls_options

        cert, key = options["tls_cert"], options["tls_key"]
        if options["self_signed"]:
            self._self_signed_dir = tempfile.mkdtemp(prefix="sluice-tls-")  # removed when the server stops
            cert, key = self_signed_write(self._self_signed_dir)
            self.stdout.write(f"Self-signed certificate for localhost: {cert} (trust it with curl --cacert {cert})")
        if not cert:
            return None
        try:
            return tls_options(cert, key)
        except (OSError, ValueError) as exc:
            raise CommandError(f"cannot use {cert} / {key}: {exc}") from exc


def workers_default(*, tls: bool, child: bool, shared_layer: bool) -> int:
    """One worker per core when the workers share a channel layer; else one.

    Without a shared layer (no ``REDIS_URL``) a challenge response reaching one worker
    could not extend a stream held by another, so one process serves everything. TLS
    (several workers serve plain HTTP only) and a worker itself also mean one.
    """
    if tls or child or not shared_layer:
        return 1
    return os.cpu_count() or 1


def channel_layer_shared() -> bool:
    """Whether the channel layer reaches other processes (Redis), not just this one (in-memory)."""
    backend = str(settings.CHANNEL_LAYERS.get("default", {}).get("BACKEND", ""))
    return bool(backend) and not backend.endswith("InMemoryChannelLayer")


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS

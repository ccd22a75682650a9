"""Request heads read whole (``streams.server.request_head``) on a real gateway: refusals with their JSON
body, a head split across TCP segments, keep-alive and pipelined requests, and what Twisted still answers."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest

from tests.guards.test_admission_wire import guard, secure  # noqa: F401 (fixtures)
from tests.streams.edge.test_wire import WAIT
from tests.support.tokens import mint

pytestmark = pytest.mark.services


class Wire:
    """A plain socket to the gateway, reading responses one after another off one connection."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""

    def send(self, *segments: bytes) -> None:
        for segment in segments:
            self.sock.sendall(segment)

    def _fill(self) -> None:
        data = self.sock.recv(65536)
        assert data, f"the gateway closed the connection; unread: {self.buffer!r}"
        self.buffer += data

    def head(self) -> tuple[int, dict[bytes, bytes]]:
        while b"\r\n\r\n" not in self.buffer:
            self._fill()
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        headers = dict(line.lower().split(b": ", 1) for line in lines[1:])
        return int(lines[0].split(b" ")[1]), headers

    def answer(self) -> tuple[int, dict[bytes, bytes], bytes]:
        """A whole response: its body by ``Content-Length``, or chunked (its chunks left framed)."""
        status, headers = self.head()
        if headers.get(b"transfer-encoding") == b"chunked":
            body, _, self.buffer = self.until(b"\r\n0\r\n\r\n").partition(b"\r\n0\r\n\r\n")
            return status, headers, body
        length = int(headers[b"content-length"])
        while len(self.buffer) < length:
            self._fill()
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return status, headers, body

    def until(self, marker: bytes) -> bytes:
        while marker not in self.buffer:
            self._fill()
        return self.buffer

    def closed(self) -> bool:
        """True once the gateway has closed the connection (everything it sent read first)."""
        while True:
            data = self.sock.recv(65536)
            if not data:
                return True
            self.buffer += data

    def close(self) -> None:
        self.sock.close()


def get(path: str, port: int, **headers: str) -> bytes:
    lines = [f"GET {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Accept: text/event-stream"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def refusal(wire: Wire, status: int, code: str) -> None:
    got, headers, body = wire.answer()
    assert got == status, body
    assert headers[b"content-type"] == b"application/json"
    assert json.loads(body)["error"] == code


def test_refusals_and_a_stream_pipelined_on_one_connection(
    gateway: Any,
    kafka: Any,
    secure: tuple[str, str, str],  # noqa: F811 (the fixture imported above)
) -> None:
    path, topic, _ = secure
    kafka.produce(topic, "hello", key="k")
    port = gateway.port
    wire = Wire(port)
    try:
        token = mint(scope="read:items")
        wire.send(
            get(path, port)  # no token: 401
            + get(path, port, **{"Authorization": f"Bearer {token}", "Last-Event-ID": "not-an-id"})
            + get(path, port, Authorization=f"Bearer {token}")
        )
        refusal(wire, 401, "unauthorized")
        refusal(wire, 400, "invalid_last_event_id")
        status, headers = wire.head()
        assert status == 200
        assert headers[b"content-type"].startswith(b"text/event-stream")
        assert b"data: hello\n" in wire.until(b"data: hello\n")
    finally:
        wire.close()


def test_a_head_split_across_segments_then_the_next_request_kept_alive(
    gateway: Any,
    kafka: Any,
    secure: tuple[str, str, str],  # noqa: F811 (the fixture imported above)
) -> None:
    path, topic, _ = secure
    kafka.produce(topic, "split", key="k")
    port = gateway.port
    wire = Wire(port)
    try:
        refused = get(path, port, Authorization="Bearer not.a.token")
        wire.send(refused[:5], refused[5:31], refused[31:-1], refused[-1:])
        refusal(wire, 401, "invalid_token")
        stream = get(path, port, Authorization=f"Bearer {mint(scope='read:items')}")
        wire.send(*(stream[i : i + 9] for i in range(0, len(stream), 9)))
        status, _ = wire.head()
        assert status == 200
        assert b"data: split\n" in wire.until(b"data: split\n")
    finally:
        wire.close()


def test_a_malformed_request_line_is_400_and_the_connection_closed(gateway: Any) -> None:
    wire = Wire(gateway.port)
    try:
        wire.send(b"GET /a b c HTTP/1.1\r\nHost: x\r\n\r\n")
        assert wire.closed()
        assert wire.buffer.startswith(b"HTTP/1.1 400 Bad Request\r\n")
    finally:
        wire.close()


def test_a_post_with_a_body_then_the_admin_on_one_connection(gateway: Any) -> None:
    wire = Wire(gateway.port)
    host = b"Host: 127.0.0.1:%d\r\n" % gateway.port
    try:
        body = b"{}"
        wire.send(
            b"POST /healthz HTTP/1.1\r\n"
            + host
            + b"Content-Type: application/json\r\n"
            + b"Content-Length: %d\r\n\r\n" % len(body)
            + body[:1],
            body[1:],
        )
        status, _, answered = wire.answer()
        assert status == 403, answered  # Django read the POST: no CSRF token
        # The body was read whole: the next request on the connection is read from its first byte.
        wire.send(b"GET /admin/login/ HTTP/1.1\r\n" + host + b"\r\n")
        status, _, page = wire.answer()
        assert status == 200
        assert b"<form" in page
    finally:
        wire.close()

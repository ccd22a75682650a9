"""Malformed HTTP at the real server: no 5xx but 501/503, no traceback in a body, and it keeps serving.

A gateway of its own (``runstreams``) is sent bad methods, huge and non-UTF-8
headers and paths, absurd ``Last-Event-ID`` values, unknown transfer codings,
requests left half-sent, and thousands of connections dropped at once; then,
and after every batch, it must still serve a stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import Gateway
from tests.fuzz.conftest import STATUSES, TRIED

pytestmark = pytest.mark.slow

# 501 where HTTP itself calls for it (an unknown transfer coding), 503 where Kafka is away.
ALLOWED_5XX = {501, 503}
READ_SECONDS = 10.0
STREAM_SECONDS = 5.0  # a response that neither ends nor is a stream by then counts as no answer


def exchange(port: int, raw: bytes) -> tuple[int | None, bytes]:
    """Send ``raw`` on a new connection; the response's status (None if the server just closed) and bytes."""
    with socket.create_connection(("127.0.0.1", port), timeout=READ_SECONDS) as sock:
        # The server may close before reading everything (a huge header): what it answered counts.
        with contextlib.suppress(OSError):
            sock.sendall(raw)
        out = b""
        # Until the server closes (every request says connection: close), or a stream's head is in.
        sock.settimeout(STREAM_SECONDS)
        with contextlib.suppress(OSError):
            while chunk := sock.recv(65536):
                out += chunk
                if len(out) > 1 << 20 or (b"text/event-stream" in out and b"\r\n\r\n" in out):
                    break
    TRIED["http: requests sent"] += 1
    status: int | None = None
    if out.startswith(b"HTTP/"):
        status = int(out.split(b" ", 2)[1])
        STATUSES[status] += 1
    return status, out


def assert_sane(status: int | None, body: bytes, what: str) -> None:
    assert status is None or status < 500 or status in ALLOWED_5XX, f"{what}: {status} {body[:500]!r}"
    assert b"Traceback" not in body, f"{what}: {body[:2000]!r}"
    assert b'File "' not in body, f"{what}: {body[:2000]!r}"


@pytest.fixture
def target(gateway_factory: Callable[..., Gateway], kafka: Any, route: Any) -> tuple[Gateway, str]:
    """A gateway of this test's own with one public stream route: (gateway, stream path)."""
    topic = kafka.topic()
    path = f"/hostile/{uuid.uuid4().hex[:8]}"
    route(path=path, topic=topic, heartbeat_seconds=3600)
    return gateway_factory(), path


def still_serving(gateway: Gateway, path: str) -> None:
    with httpx.Client(base_url=gateway.url, timeout=READ_SECONDS) as http:
        assert http.get("/healthz").status_code == 200
        with http.stream("GET", path) as response:
            assert response.status_code == 200
            assert next(response.iter_raw()).startswith(b"retry: ")


def request(method: bytes, path: bytes, headers: list[tuple[bytes, bytes]] = (), body: bytes = b"") -> bytes:  # type: ignore[assignment]
    lines = [method + b" " + path + b" HTTP/1.1", b"host: 127.0.0.1", b"connection: close"]
    lines += [name + b": " + value for name, value in headers]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


CASES: list[tuple[str, Callable[[str], bytes]]] = [
    ("unknown method", lambda p: request(b"BREW", p.encode())),
    ("method with NUL", lambda p: request(b"GE\x00T", p.encode())),
    ("huge method", lambda p: request(b"G" * 70_000, p.encode())),
    ("no version", lambda p: f"GET {p}\r\n\r\n".encode()),
    ("HTTP/2.0 on a 1.1 connection", lambda p: f"GET {p} HTTP/2.0\r\nhost: x\r\n\r\n".encode()),
    ("garbage line", lambda p: b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 100 + b"\r\n\r\n"),
    ("path with invalid UTF-8", lambda p: request(b"GET", p.encode() + b"/\xff\xfe")),
    ("path with percent-encoded invalid UTF-8", lambda p: request(b"GET", p.encode() + b"%ff%fe%00")),
    ("path with NUL", lambda p: request(b"GET", p.encode() + b"\x00x")),
    ("path of 100 KB", lambda p: request(b"GET", p.encode() + b"/" + b"a" * 100_000)),
    ("dot-dot path", lambda p: request(b"GET", b"/../../../etc/passwd")),
    ("absolute-form path", lambda p: request(b"GET", b"http://evil.example" + p.encode())),
    ("query with invalid UTF-8", lambda p: request(b"GET", p.encode() + b"?lastEventId=%ff%fe&since=%ff")),
    ("header of 100 KB", lambda p: request(b"GET", p.encode(), [(b"x-big", b"a" * 100_000)])),
    ("2000 headers", lambda p: request(b"GET", p.encode(), [(f"x-h{n}".encode(), b"v") for n in range(2000)])),
    ("header with invalid UTF-8", lambda p: request(b"GET", p.encode(), [(b"x-bad", b"\xff\xfe\xfd")])),
    ("header name with invalid UTF-8", lambda p: request(b"GET", p.encode(), [(b"x-\xff", b"v")])),
    ("header without colon", lambda p: request(b"GET", p.encode(), [(b"no-colon-here", b"")]).replace(b": \r", b"\r")),
    ("Last-Event-ID of 1 MB", lambda p: request(b"GET", p.encode(), [(b"last-event-id", b"A" * 1_000_000)])),
    ("Last-Event-ID of 1025 bytes", lambda p: request(b"GET", p.encode(), [(b"last-event-id", b"A" * 1025)])),
    ("Last-Event-ID invalid UTF-8", lambda p: request(b"GET", p.encode(), [(b"last-event-id", b"\xff\xfe")])),
    ("Last-Event-ID nested JSON", lambda p: request(b"GET", p.encode(), [(b"last-event-id", b"[" * 1000)])),
    ("Last-Event-ID huge partition count", lambda p: request(b"GET", p.encode(), [(b"last-event-id", b"Af____8P")])),
    (
        "Last-Event-ID absurd offset",
        lambda p: request(b"GET", p.encode(), [(b"last-event-id", b"AQIA_____________wE=")]),
    ),
    ("Last-Event-ID partition 10^6", lambda p: request(b"GET", p.encode(), [(b"last-event-id", b"AQKAiXoA")])),
    ("lastEventId query of 1 MB", lambda p: request(b"GET", p.encode() + b"?lastEventId=" + b"A" * 1_000_000)),
    ("since absurd", lambda p: request(b"GET", p.encode() + b"?since=99999999999999999999999999")),
    (
        "unknown transfer coding",
        lambda p: request(b"POST", p.encode(), [(b"transfer-encoding", b"gzip, chunked")], b"0\r\n\r\n"),
    ),
    ("bad chunk size", lambda p: request(b"POST", p.encode(), [(b"transfer-encoding", b"chunked")], b"zz\r\n")),
    ("negative content-length", lambda p: request(b"POST", p.encode(), [(b"content-length", b"-1")])),
    ("content-length not a number", lambda p: request(b"POST", p.encode(), [(b"content-length", b"ten")])),
    (
        "two content-lengths",
        lambda p: request(b"POST", p.encode(), [(b"content-length", b"1"), (b"content-length", b"2")], b"ab"),
    ),
    ("content-length 10^30", lambda p: request(b"POST", p.encode(), [(b"content-length", b"1" + b"0" * 30)])),
    (
        "authorization of 1 MB",
        lambda p: request(b"GET", p.encode(), [(b"authorization", b"Bearer " + b"a" * 1_000_000)]),
    ),
    ("cookie of 200 KB", lambda p: request(b"GET", p.encode(), [(b"cookie", b"jwt=" + b"a" * 200_000)])),
    ("admin with bad session cookie", lambda p: request(b"GET", b"/admin/", [(b"cookie", b"sessionid=\xff\x00;;;=")])),
    ("HEAD on a stream", lambda p: request(b"HEAD", p.encode())),
    ("OPTIONS *", lambda p: request(b"OPTIONS", b"*")),
    ("CONNECT", lambda p: request(b"CONNECT", b"127.0.0.1:22")),
]


def test_malformed_requests(target: tuple[Gateway, str]) -> None:
    gateway, path = target
    for what, build in CASES:
        # A stream that was accepted stays open; read its head only.
        status, body = exchange(gateway.port, build(path))
        assert_sane(status, body, what)
    still_serving(gateway, path)
    output = "".join(gateway.output)
    assert "Traceback" not in output, output[-3000:]


@given(
    method=st.sampled_from([b"GET", b"POST", b"HEAD", b"PUT", b"DELETE"]) | st.binary(min_size=1, max_size=12),
    suffix=st.binary(max_size=200),
    headers=st.lists(st.tuples(st.binary(min_size=1, max_size=30), st.binary(max_size=300)), max_size=8),
)
def test_arbitrary_request_bytes(
    target: tuple[Gateway, str], method: bytes, suffix: bytes, headers: list[tuple[bytes, bytes]]
) -> None:
    gateway, _path = target
    # A real stream would stay open: HEAD and bodies of arbitrary methods are fine, GET on the stream is not.
    raw = request(method, b"/hostile-nothing/" + suffix, headers)
    status, body = exchange(gateway.port, raw)
    assert_sane(status, body, repr(raw[:200]))


def test_half_sent_requests_and_connection_floods(target: tuple[Gateway, str]) -> None:
    gateway, path = target
    # Requests that never finish, held open while the server goes on serving others.
    held = []
    for n in range(200):
        sock = socket.create_connection(("127.0.0.1", gateway.port), timeout=READ_SECONDS)
        sock.sendall(b"GET " + path.encode() + b" HTTP/1.1\r\nhost: 127.0.0.1\r\nx-partial: " + b"a" * (n % 50))
        held.append(sock)
    TRIED["http: half-sent requests held"] += len(held)
    still_serving(gateway, path)
    for sock in held:
        sock.close()

    async def flood(count: int) -> int:
        async def one(n: int) -> None:
            try:
                _reader, writer = await asyncio.open_connection("127.0.0.1", gateway.port)
            except OSError:
                return
            if n % 3 == 1:
                writer.write(b"GET / HTTP/1.1\r\n")
            elif n % 3 == 2:
                writer.write(request(b"GET", path.encode()))
                await writer.drain()
            # Dropped with a reset half the time, politely the other half.
            if n % 2:
                sock = writer.get_extra_info("socket")
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            writer.close()

        for start in range(0, count, 250):
            await asyncio.gather(*(one(n) for n in range(start, min(count, start + 250))))
        return count

    TRIED["http: connections opened and dropped"] += asyncio.run(flood(3000))
    still_serving(gateway, path)
    with httpx.Client(base_url=gateway.url, timeout=READ_SECONDS) as http:
        healthz = http.get("/healthz").json()
    # Every dropped stream was let go of.
    assert all(topic["subscribers"] <= 1 for topic in healthz["topics"].values()), healthz
    output = "".join(gateway.output)
    assert "Traceback" not in output, output[-3000:]

"""Request heads read whole with httptools (``streams.server.request_head``), against Twisted's own reader.

Each case feeds the same bytes to a :class:`HeadChannel` and to Twisted's ``HTTPChannel`` over a
string transport: the requests they start, and what they write back, must be the same.
"""

from __future__ import annotations

from typing import Any

import pytest
from twisted.internet.testing import StringTransport
from twisted.web import http

from streams.server.request_head import HeadChannel, head_parse

STREAM = (
    b"GET /scores/1?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nAuthorization: Bearer a.b.c\r\n"
    b"Last-Event-ID: 0.0.4\r\nAccept: text/event-stream\r\n\r\n"
)


class Recorder(http.Request):
    """A request that records what it was given; it answers at once if ``answer`` is set on its class."""

    seen: list[tuple[bytes, bytes, bytes, list[tuple[bytes, list[bytes]]], bytes]]
    answer = False

    def process(self) -> None:
        headers = sorted((name, list(values)) for name, values in self.requestHeaders.getAllRawHeaders())
        assert self.content is not None
        self.seen.append((self.method, self.uri, self.clientproto, headers, self.content.read()))
        if self.answer:
            self.setHeader(b"content-length", b"2")
            self.write(b"ok")
            self.finish()


def channel(kind: type[http.HTTPChannel], *, answer: bool) -> tuple[Any, StringTransport, list[Any]]:
    seen: list[Any] = []
    recorder = type("R", (Recorder,), {"seen": seen, "answer": answer})
    protocol = kind()
    protocol.requestFactory = recorder
    protocol.whole_head_request = None  # the recorder for every request, as Twisted's reader uses
    protocol.timeOut = None
    transport = StringTransport()
    protocol.makeConnection(transport)
    return protocol, transport, seen


def both(segments: list[bytes], *, answer: bool = True) -> tuple[list[Any], bytes]:
    """Feed ``segments`` to both readers; what each started and wrote, checked equal, returned once."""
    results = []
    for kind in (HeadChannel, http.HTTPChannel):
        protocol, transport, seen = channel(kind, answer=answer)
        for segment in segments:
            protocol.dataReceived(segment)
        results.append((seen, transport.value(), transport.disconnecting))
    assert results[0] == results[1]
    return results[0][0], results[0][1]


def test_a_whole_head_starts_the_request_twisted_would() -> None:
    (seen,), written = both([STREAM])
    method, uri, version, headers, body = seen
    assert (method, uri, version, body) == (b"GET", b"/scores/1?x=1", b"HTTP/1.1", b"")
    assert (b"Last-Event-Id", [b"0.0.4"]) in headers
    assert written.startswith(b"HTTP/1.1 200 OK\r\n")
    assert written.endswith(b"\r\n\r\nok")


@pytest.mark.parametrize("size", [1, 7, 40])
def test_a_head_split_over_segments_is_the_same_request(size: int) -> None:
    segments = [STREAM[i : i + size] for i in range(0, len(STREAM), size)]
    (seen,), _ = both(segments)
    assert seen[1] == b"/scores/1?x=1"


def test_pipelined_requests_are_answered_in_order_one_after_the_other() -> None:
    second = STREAM.replace(b"/scores/1?x=1", b"/scores/2")
    seen, written = both([STREAM + second + STREAM[:30], STREAM[30:]])
    assert [request[1] for request in seen] == [b"/scores/1?x=1", b"/scores/2", b"/scores/1?x=1"]
    assert written.count(b"HTTP/1.1 200 OK\r\n") == 3


def test_a_pipelined_request_waits_for_the_response_before_it() -> None:
    protocol, _, seen = channel(HeadChannel, answer=False)
    protocol.dataReceived(STREAM + STREAM.replace(b"/scores/1?x=1", b"/next"))
    assert [request[1] for request in seen] == [b"/scores/1?x=1"]  # the second is held
    protocol.requests[0].finish()
    assert [request[1] for request in seen] == [b"/scores/1?x=1", b"/next"]


def test_keep_alive_reads_the_next_request_on_the_same_connection() -> None:
    protocol, transport, seen = channel(HeadChannel, answer=True)
    protocol.dataReceived(STREAM)
    protocol.dataReceived(b"GET /again HTTP/1.1\r\nHost: x\r\n\r\n")
    assert [request[1] for request in seen] == [b"/scores/1?x=1", b"/again"]
    assert not transport.disconnecting


def test_connection_close_ends_the_connection_after_the_response() -> None:
    seen, written = both([STREAM.replace(b"Accept:", b"Connection: close\r\nAccept:")])
    assert len(seen) == 1
    assert b"Connection: close" in written


def test_a_request_with_a_body_is_read_by_twisted() -> None:
    post = b"POST /scores/1 HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
    (seen,), _ = both([post[:40], post[40:]])
    assert seen[0] == b"POST"
    assert seen[4] == b"hello"
    chunked = b"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
    (seen,), _ = both([chunked])
    assert seen[4] == b"hello"


@pytest.mark.parametrize(
    "head",
    [
        b"GET /a b HTTP/1.1\r\nHost: x\r\n\r\n",  # a space in the target
        b"GET /a HTTP/2.0\r\nHost: x\r\n\r\n",
        b"GET /a HTTP/1.1\r\nHost x\r\n\r\n",  # no colon
        b"GET /a HTTP/1.1\r\nHo st: x\r\n\r\n",
        b"GET /a HTTP/1.1\r\nHost: x\x00y\r\n\r\n",
        b"GET /\xc3\xa9 HTTP/1.1\r\nHost: x\r\n\r\n",
        b"G\x01T /a HTTP/1.1\r\n\r\n",
        b"GET /a HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n",
        b"GET /a HTTP/1.1\r\nHost: x\nX-B: y\r\n\r\n",  # a bare LF inside a value, to Twisted
        b"GET /a HTTP/1.1\r\nHost: x\rX-B: y\r\n\r\n",
    ],
)
def test_a_malformed_head_gets_twisteds_answer(head: bytes) -> None:
    seen, written = both([head])
    assert seen == []
    assert written.startswith(b"HTTP/1.1 400 Bad Request")


@pytest.mark.parametrize(
    "head",
    [
        b"GET /a HTTP/1.1\r\nHost: x\r\nX: " + b"y" * 17000 + b"\r\n\r\n",  # a line over 16 KiB: closed
        b"GET /a HTTP/1.1\r\n" + b"X: y\r\n" * 501 + b"\r\n",  # over 500 headers: 400
    ],
)
def test_a_head_past_twisteds_limits_is_refused_as_twisted_refuses_it(head: bytes) -> None:
    protocol, transport, seen = channel(HeadChannel, answer=True)
    for start in range(0, len(head), 1000):
        protocol.dataReceived(head[start : start + 1000])
    assert seen == []
    assert transport.disconnecting
    assert both([head]) == ([], transport.value())


def test_an_obsolete_folded_header_is_read_as_twisted_reads_it() -> None:
    (seen,), _ = both([b"GET /a HTTP/1.1\r\nHost: x\r\nX-Long: one\r\n two\r\n\r\n"])
    assert (b"X-Long", [b"one two"]) in seen[3]


def test_http_1_0_is_answered_and_the_connection_closed() -> None:
    (seen,), written = both([b"GET /a HTTP/1.0\r\nHost: x\r\n\r\n"])
    assert seen[2] == b"HTTP/1.0"
    assert written.startswith(b"HTTP/1.0 200 OK")


def test_an_upgrade_is_left_to_twisted() -> None:
    assert head_parse(b"GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n") is None
    assert head_parse(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n") is not None

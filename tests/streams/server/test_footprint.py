"""What an open stream keeps of its request: attribute dicts rebuilt to size, parse-time parts dropped."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from twisted.internet.address import IPv4Address
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure
from twisted.web import http

from streams.server.flow import GoneNotice
from streams.server.footprint import REQUEST_DROPPED, attributes_compact, request_trim


class Defaults:
    shared = ("a", "class", "value")
    number = 0


def test_compacted_attributes_read_the_same_and_take_less() -> None:
    instance = Defaults()
    for n in range(40):  # grown while "parsing"
        setattr(instance, f"scratch{n}", n)
    for n in range(40):
        delattr(instance, f"scratch{n}")
    instance.shared = Defaults.shared  # the class's own object: read from the class once dropped
    instance.number = 5
    instance.own = [1]
    before = sys.getsizeof(instance.__dict__)
    attributes_compact(instance)
    assert instance.__dict__ == {"number": 5, "own": [1]}
    assert instance.shared is Defaults.shared
    assert sys.getsizeof(instance.__dict__) < before


def streaming_request(factory: http.HTTPFactory | None = None) -> tuple[http.Request, StringTransport]:
    """A GET whose chunked response head is out, on a real HTTPChannel over a string transport."""
    channel = http.HTTPChannel()
    if factory is not None:
        channel.factory = factory
    transport = StringTransport(peerAddress=IPv4Address("TCP", "127.0.0.1", 40000))
    channel.makeConnection(transport)
    channel.dataReceived(b"GET /s?x=1 HTTP/1.1\r\nHost: h\r\nCookie: a=b\r\n\r\n")
    request: Any = channel.requests[-1]
    request.setResponseCode(200)
    request.write(b"")  # the head
    assert request.startedWriting
    assert request.chunked
    return request, transport


def test_a_trimmed_request_still_writes_finishes_and_is_logged(tmp_path: Path) -> None:
    factory = http.HTTPFactory(logPath=str(tmp_path / "access.log"))
    factory.startFactory()
    request, transport = streaming_request(factory)
    request_trim(request, transport)
    assert not set(REQUEST_DROPPED) & set(vars(request))
    assert request.content is None
    assert request.args is None
    request.write(b"data: 1\n\n")
    request.finish()  # Twisted's access log formatter reads the request here
    assert transport.value().endswith(b"\r\n\r\n9\r\ndata: 1\n\n\r\n0\r\n\r\n")
    factory.stopFactory()
    assert '"GET /s?x=1 HTTP/1.1" 200 9' in (tmp_path / "access.log").read_text()


def test_a_trimmed_request_tells_its_notice_when_the_client_goes() -> None:
    request, transport = streaming_request()
    gone: list[str] = []
    request.notifications.append(GoneNotice(lambda: gone.append("gone")))
    request_trim(request, transport)
    request.connectionLost(Failure(ConnectionError("client left")))
    assert gone == ["gone"]


def test_a_finished_request_does_not_call_its_notice() -> None:
    request, transport = streaming_request()
    gone: list[str] = []
    request.notifications.append(GoneNotice(lambda: gone.append("gone")))
    request_trim(request, transport)
    request.finish()
    assert gone == []

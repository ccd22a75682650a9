"""HTTP/1.x request heads read whole with ``httptools`` instead of a line at a time.

Twisted's :class:`~twisted.web.HTTPChannel` reads a request through ``LineReceiver``: a
method call per line, a split, a name check and a strip per header, about a tenth of a worker's
event loop in a storm of stream requests (docs/benchmarks.md, "Admissions per second").
:class:`HeadChannel` holds the bytes of a request head until its blank line has arrived, parses
the head in one call of ``httptools`` (llhttp), checks it as Twisted's reader would, and gives
the channel the request exactly as that reader does: the request object, its headers, then
``allHeadersReceived`` and ``allContentReceived``. The request then runs as any other (daphne's
request, here :class:`~streams.server.head_request.HeadRequest`, the stream app,
:class:`~streams.server.flow.RequestFlow`).

Everything else goes to Twisted's own reader unchanged, byte for byte from the start of the
request: a request with a body (``Content-Length``, ``Transfer-Encoding``), an upgrade
(websockets), a head that ``httptools`` or the checks refuse (Twisted answers its ``400`` and
closes, as before), a head past Twisted's size or header-count limits, and any data while a
request is being handled (Twisted buffers pipelined requests and replays them here once the
response ends). HTTP/2 never reaches a channel of this kind (its connection replaces the
channel once ALPN chooses ``h2``).
"""

from __future__ import annotations

from typing import Any

import httptools
from twisted.web.http import HTTPChannel, _GenericHTTPChannelProtocol
from twisted.web.iweb import INonQueuedRequestFactory

from streams.server.head_request import HeadRequest

HEAD_END = b"\r\n\r\n"
# Twisted's request-target check (``_parseRequestLine``): printable ASCII, and bytes up to 176.
TARGET_BYTES = bytes(range(33, 177))
# Headers that give a request a body: such a request is read by Twisted (its transfer decoders).
BODY_HEADERS = (b"content-length", b"transfer-encoding")
VERSIONS = {"1.1": b"HTTP/1.1", "1.0": b"HTTP/1.0"}


class ParsedHead:
    """What ``httptools`` reports of one request head: its target and its headers, in order."""

    __slots__ = ("target", "headers", "complete")

    def __init__(self) -> None:
        self.target = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.complete = False

    # httptools' callbacks
    def on_url(self, url: bytes) -> None:
        self.target += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_message_complete(self) -> None:
        self.complete = True


def head_parse(head: bytes) -> tuple[bytes, bytes, bytes, list[tuple[bytes, bytes]]] | None:
    """``(method, target, version, headers)`` of a whole request head without a body, or None.

    None for anything Twisted's reader should see instead: a parse error, a bare CR or LF, an upgrade, a body,
    a version other than HTTP/1.0 or 1.1, a target or a header value Twisted would refuse.
    """
    if head.count(b"\n") != head.count(b"\r\n") or head.count(b"\r") != head.count(b"\r\n"):
        return None  # a bare CR or LF: llhttp may end a line there, Twisted does not
    parsed = ParsedHead()
    parser = httptools.HttpRequestParser(parsed)
    try:
        parser.feed_data(head)
    except (httptools.HttpParserError, httptools.HttpParserUpgrade):
        return None
    version = VERSIONS.get(parser.get_http_version())
    target = parsed.target
    if not parsed.complete or version is None or not target or target.translate(None, TARGET_BYTES):
        return None
    for name, value in parsed.headers:
        if name.lower() in BODY_HEADERS or b"\x00" in value:
            return None
    return parser.get_method(), target, version, parsed.headers


class HeadChannel(HTTPChannel):
    """Twisted's HTTP/1.x channel, reading a whole request head in one parse when it can."""

    _head_pending = b""
    # The request class for heads read here (Twisted's reader uses ``requestFactory``): given
    # ``whole_head = True``, it may start without what a body or an upgrade needs (``head_request``).
    # A class attribute: every open stream's channel is kept, and an instance entry would cost each.
    whole_head_request: Any = HeadRequest

    def dataReceived(self, data: bytes) -> None:
        pending = self._head_pending
        if pending:
            data = pending + data
            self._head_pending = b""
        elif not self._head_ready():
            HTTPChannel.dataReceived(self, data)
            return
        self.resetTimeout()
        while True:
            end = data.find(HEAD_END)
            if end < 0:
                if len(data) > self.totalHeadersSize:
                    HTTPChannel.dataReceived(self, data)  # Twisted refuses it
                else:
                    self._head_pending = data  # the rest of the head is on its way
                return
            head, data = data[: end + 4], data[end + 4 :]
            request = head_parse(head) if len(head) <= self.totalHeadersSize else None
            if request is None or len(request[3]) > self.maxHeaders:
                HTTPChannel.dataReceived(self, head + data)
                return
            self._request_start(*request)
            if not data:
                return
            if not self._head_ready():
                # A pipelined request: Twisted buffers it while this one is handled (its raw mode)
                # and gives it back here once the response ends (``requestDone`` -> ``setLineMode``).
                HTTPChannel.dataReceived(self, data)
                return

    def _head_ready(self) -> bool:
        """Between requests, with nothing of Twisted's reader begun: a new head may be read here."""
        channel: Any = self
        return bool(
            self.line_mode
            and not self._busyReceiving
            and not self.paused
            and not self._buffer
            and not self._handlingRequest
            and self.persistent
            and channel._HTTPChannel__first_line == 1
            and not channel._HTTPChannel__header
        )

    def _request_start(self, method: bytes, target: bytes, version: bytes, headers: list[tuple[bytes, bytes]]) -> None:
        """What Twisted's reader does on a head's first line, its headers and its blank line."""
        factory: Any = self.whole_head_request or self.requestFactory
        request = factory(self) if INonQueuedRequestFactory.providedBy(factory) else factory(self, len(self.requests))
        request.whole_head = True
        self.requests.append(request)
        add = request.requestHeaders.addRawHeader
        for name, value in headers:
            add(name, value.strip(b" \t"))
        self._command = method
        self._path = target  # type: ignore[assignment]  # mypy infers a Request (a reused name in Twisted)
        self._version = version
        self.allHeadersReceived()
        self.allContentReceived()


def head_channel_protocol() -> Any:
    """``HTTPFactory.protocol``: Twisted's connection protocol (HTTP/2 after ALPN) over a :class:`HeadChannel`."""
    return _GenericHTTPChannelProtocol(HeadChannel())

"""daphne, with Twisted's producer/consumer flow control exposed to the stream app.

daphne's ``send`` writes into the transport without waiting for the socket, so
an app cannot see a client that stopped reading. :class:`FlowServer` hands each
HTTP request's app a :class:`RequestFlow` (see ``streams.edge.http.request.flow_attach``):
it writes straight to the Twisted request, registers as its push producer, and
counts the bytes written while the transport (or the HTTP/2 stream window)
says "pause". The hub cuts a client once that count passes its bound.

On plain HTTP/1.1 a write to a connection with nothing pending goes straight
to the socket (one ``send``), and only what the kernel does not take is left to
Twisted. Twisted's own path buffers every write and, on the asyncio reactor,
registers the socket with epoll for writing and unregisters it once drained:
two ``epoll_ctl`` calls and a loop hop per write, which at 1000 clients was
most of the gateway's CPU (docs/benchmarks.md).

A stream's head waits two loop passes for what the stream is written meanwhile (a resume's
catch-up from the cache), up to :data:`HELD_BYTES_MAX`, and all of it leaves in one ``send``.

A compressed stream (``Content-Encoding: br`` or ``gzip``) hands its flow an
encoder with :meth:`RequestFlow.compress`: every write is compressed and flushed
where it reaches the socket, so each event or heartbeat leaves whole. A plain
stream's flow holds ``None`` there and pays one test per write.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import struct
from collections.abc import Callable
from functools import partial
from typing import Any

from daphne.server import Server
from twisted.internet import reactor  # daphne installed the asyncio reactor already
from twisted.internet.interfaces import IPushProducer
from twisted.internet.tcp import Server as TcpServer
from twisted.python.failure import Failure
from twisted.web.http import Request  # by name: the module's deprecation proxy runs Python per look-up
from zope.interface import implementer

from streams.core.compression import Encoder
from streams.edge.http.request import flow_attach
from streams.fanout.sinks import SharedFrames, http_chunk
from streams.server.footprint import request_trim
from streams.server.inputs import InputQueue
from streams.server.reaping import EventReaping

logger = logging.getLogger("sluice.streams")

try:  # HTTP/2 needs twisted[http2]; without it every request is HTTP/1.x.
    from twisted.web._http2 import H2Stream as _H2Stream

    H2_STREAM: type[Any] | None = _H2Stream
except ImportError:  # pragma: no cover - the extra is in requirements.txt
    H2_STREAM = None


# Bytes of a stream's first writes held to go with its head; more are sent at once (a catch-up
# from the cache is written in one pass: past this, the socket and Twisted's buffer take the rest,
# and Twisted's flow control pauses it as before).
HELD_BYTES_MAX = 32 * 1024


@implementer(IPushProducer)
class RequestFlow:
    """Direct, flow-controlled writes to one daphne request."""

    __slots__ = (
        "request",
        "paused",
        "paused_bytes",
        "_registered",
        "_resumed",
        "_stopped",
        "_direct",
        "_encoder",
        "_held",
        "_held_bytes",
    )

    def __init__(self, request: Request) -> None:
        self.request = request
        self.paused = False
        self.paused_bytes = 0
        self._registered = False
        self._resumed: asyncio.Future[None] | None = None
        self._stopped = False
        # The plain TCP transport of a chunked HTTP/1.1 response, once headers are out (see _send).
        self._direct: TcpServer | None = None
        self._encoder: Encoder | None = None
        # A chunked response's head and what follows it soon, sent together (see _head_send).
        self._held: list[bytes] | None = None
        self._held_bytes = 0

    def compress(self, encoder: Encoder) -> None:
        """Compress (and flush) everything written from now on with ``encoder``."""
        self._encoder = encoder

    def write(self, data: bytes) -> bool:
        request = self.request
        if self._stopped or request.finished or request.channel is None:
            # Gone, not slow: the data is dropped and the stream app ends on the
            # http.disconnect daphne sends it (a False here would count a cut).
            return True
        if self._encoder is not None:
            data = self._encoder(data)
        if not self._registered:
            request.registerProducer(self, True)
            self._registered = True
        if self.paused:
            self.paused_bytes += len(data)
        direct = self._direct
        if direct is None:
            transport = getattr(request.channel, "transport", None)
            if type(transport) is TcpServer and not request.startedWriting and _idle(transport):
                self._head_send(request, transport, data)
            else:
                Request.write(request, data)
            if request.chunked and request.startedWriting and type(transport) is TcpServer:
                self._direct = transport
                # The head is out: what only reading the request and writing the head needed goes.
                request_trim(request, transport)
        elif data and not request._disconnected:
            request.sentLength += len(data)
            if self._held is not None:
                self._hold(http_chunk(data))
            else:
                self._send(direct, http_chunk(data))
        return True

    def write_shared(self, frames: SharedFrames) -> None:
        """:meth:`write` of ``frames.data``, sending the chunk built once for all the streams written it.

        The broadcast's and the keep-alives' loops: on a plain chunked HTTP/1.1 response with
        nothing queued, one ``send`` of the chunk framed once for every stream.
        """
        transport = self._direct
        if transport is None or self.paused or self._stopped or self._encoder is not None:
            self.write(frames.data)
            return
        request = self.request
        if request.finished or request._disconnected:
            return  # gone: as in write
        request.sentLength += len(frames.data)
        if self._held is not None:
            self._hold(frames.chunk)
        else:
            self._send(transport, frames.chunk)

    def _head_send(self, request: Request, transport: TcpServer, data: bytes) -> None:
        """Twisted's head and first chunk, collected and sent at once like any other write.

        Twisted queues the head and has the loop watch the socket for writing until it is out: two
        ``epoll_ctl`` calls and a loop pass for every stream opened. A stream's (a chunked response's)
        goes two loop passes later, with what it was written meanwhile: a resume's catch-up from the
        cache runs in the task its subscription started in the same pass, and leaves in the same
        ``send`` instead of a second one.
        """
        channel: Any = request.channel
        head = HeadCollector()
        channel.transport = head
        try:
            Request.write(request, data)
        finally:
            channel.transport = transport
        if not head.parts:
            return
        if not request.chunked:
            self._send(transport, b"".join(head.parts))
            return
        self._held = head.parts
        self._held_bytes = sum(map(len, head.parts))
        loop = asyncio.get_running_loop()
        loop.call_soon(loop.call_soon, self._held_send)

    def _hold(self, chunk: bytes) -> None:
        """Add ``chunk`` to what waits with the head; all of it goes at once past :data:`HELD_BYTES_MAX`."""
        assert self._held is not None
        self._held.append(chunk)
        self._held_bytes += len(chunk)
        if self._held_bytes > HELD_BYTES_MAX:
            self._held_send()

    def _held_send(self) -> None:
        """Send the head and what waited with it (nothing if the client went or it was sent)."""
        held, self._held = self._held, None
        transport = self._direct
        if held is None or transport is None or self._stopped or self.request._disconnected:
            return
        self._send(transport, b"".join(held))

    @staticmethod
    def _send(transport: TcpServer, chunk: bytes) -> None:
        """Send now if nothing is queued before it, else (or for the rest) queue it in Twisted."""
        if _idle(transport):
            try:
                sent = transport.socket.send(chunk)
            except BlockingIOError:
                sent = 0
            except OSError:
                sent = 0  # Twisted's own write finds the error and closes the connection
            if sent == len(chunk):
                return
            chunk = chunk[sent:]
        transport.write(chunk)

    def on_gone(self, callback: Callable[[], object]) -> None:
        """Call ``callback`` once if the client goes away before the response ends (at once if it has).

        A callback on the request, not a task per stream reading ``http.disconnect``.
        """

        request = self.request
        # notifyFinish() made after the connection was lost never fires: ask the request first.
        if request._disconnected or request.channel is None:
            if not request.finished:
                callback()
            return

        # What notifyFinish() does, without a Deferred and its callback tuples (about 400 B of every
        # open stream): the request calls each of its notifications back when it ends.
        # Twisted types the list as Deferreds; it calls only their callback and errback.
        notifications: list[Any] = request.notifications
        notifications.append(GoneNotice(callback))

    async def wait_resumed(self) -> None:
        if not self.paused or self._stopped:
            return
        if self._resumed is None:
            self._resumed = asyncio.get_running_loop().create_future()
        await asyncio.shield(self._resumed)

    # IPushProducer, called by Twisted when the client's buffers fill and drain.
    def pauseProducing(self) -> None:
        self.paused = True

    def resumeProducing(self) -> None:
        self.paused = False
        self.paused_bytes = 0
        self._wake()

    def stopProducing(self) -> None:
        self._stopped = True
        self._wake()

    def _wake(self) -> None:
        if self._resumed is not None and not self._resumed.done():
            self._resumed.set_result(None)
        self._resumed = None

    def release(self) -> None:
        """Unregister from the request (before the response finishes).

        After connectionLost the request has no channel left to unregister from, but it still holds
        this flow as its producer: that reference is dropped too, or the request and its flow (and the
        transport, headers and address they hold) would form a cycle that only the cycle collector's
        full collection frees, minutes later (docs/reliability.md, "A long run").
        """
        request = self.request
        if self._registered and request.producer is self:
            if request.channel is not None:
                request.unregisterProducer()
            else:
                request.producer = None
        self._registered = False

    def finish(self) -> None:
        """End the response: the last chunk, then the connection is free for the next request."""
        request = self.request
        if not request.finished and not request._disconnected and request.channel is not None:
            encoder, self._encoder = self._encoder, None
            if encoder is not None:
                self.write(encoder.finish())
            self._held_send()
            request.finish()

    def abort(self) -> None:
        """Drop the client now: TCP reset on HTTP/1.x, RST_STREAM on HTTP/2."""
        self._stopped = True
        self._held = None
        self._wake()
        channel: Any = self.request.channel
        if channel is None:
            return
        if H2_STREAM is not None and isinstance(channel, H2_STREAM):
            channel.abortConnection()
        elif channel.transport is not None:
            _linger_off(channel.transport)
            channel.transport.abortConnection()


def _idle(transport: TcpServer) -> bool:
    """Connected, and nothing queued in Twisted: a write may go straight to the socket."""
    return bool(
        transport.connected
        and not transport.disconnecting
        and not transport._writeDisconnected
        and not transport._tempDataBuffer
        and len(transport.dataBuffer) == transport.offset
    )


class HeadCollector:
    """Stands in for a request's transport while Twisted writes the response head: keeps what it is given."""

    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.parts.append(data)

    def writeSequence(self, sequence: list[bytes]) -> None:
        self.parts.extend(sequence)


class GoneNotice:
    """In a Twisted request's ``notifications``: ``callback`` when it ends without its response."""

    __slots__ = ("_callback",)

    def __init__(self, callback: Callable[[], object]) -> None:
        self._callback = callback

    def callback(self, result: object) -> None:
        """The response finished: nothing to tell."""

    def errback(self, reason: Failure) -> None:
        """The connection was lost first (called by ``Request.connectionLost``, which goes on to the others)."""
        try:
            self._callback()
        except Exception:
            logger.exception("a stream's end on its client's departure failed")


def _linger_off(transport: Any) -> None:
    """Make the close a reset: the kernel drops what it still holds for the client at once.

    Without it, closing sends the whole socket buffer first (megabytes on a
    fast link), so a slow client learns it was cut only after reading all of
    it, and the server's kernel keeps that memory meanwhile.
    """
    handle = getattr(transport, "getHandle", None)
    if handle is None:
        return
    with contextlib.suppress(OSError, AttributeError):
        handle().setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


# Every request's scope shares it (nothing writes to it).
ASGI_VERSION = {"version": "3.0"}


class FlowServer(EventReaping, Server):
    """daphne's server, adding :class:`RequestFlow` to every HTTP scope, its connections reaped on events.

    With :meth:`adopt_socket` it serves an inherited listening socket instead of
    its endpoints (the worker processes of ``runstreams --workers``).
    """

    _adopted_fd: int | None = None
    _tls: tuple[str, int, Any] | None = None

    def adopt_socket(self, fd: int) -> None:
        self._adopted_fd = fd
        self.endpoints: list[str] = []

    def serve_tls(self, interface: str, port: int, options: Any) -> None:
        """Serve HTTPS on ``interface:port`` with Twisted TLS ``options`` (``streams.server.tls``: ALPN offers h2)."""
        self._tls = (interface, port, options)
        self.endpoints = []

    def run(self) -> None:
        if self._adopted_fd is not None:
            reactor.callWhenRunning(self._adopt)
        if self._tls is not None:
            reactor.callWhenRunning(self._listen_tls)
        super().run()

    def _listen_tls(self) -> None:
        from twisted.internet.endpoints import SSL4ServerEndpoint

        assert self._tls is not None
        interface, port, options = self._tls
        listening = SSL4ServerEndpoint(reactor, port, options, interface=interface).listen(self.http_factory)
        listening.addCallback(self.listen_success)
        listening.addErrback(self.listen_error)
        self.listeners.append(listening)

    def _adopt(self) -> None:
        assert self._adopted_fd is not None
        sock = socket.socket(fileno=os.dup(self._adopted_fd))
        family = sock.family
        sock.close()
        os.set_blocking(self._adopted_fd, False)  # Twisted adopts non-blocking sockets only
        port = reactor.adoptStreamPort(self._adopted_fd, family, self.http_factory)
        # The port holds its own copy: once it stops listening (SIGTERM), no descriptor of this
        # process keeps the socket accepting connections nobody answers.
        os.close(self._adopted_fd)
        self.listeners.append(port)
        self.listen_success(port)

    def create_application(self, protocol: Any, scope: dict[str, Any]) -> Any:
        """daphne's, with the request's :class:`RequestFlow` in the scope and an input queue made on demand."""
        if scope.get("type") != "http" or not isinstance(protocol, Request):
            queue = super().create_application(protocol, scope)
            self.application_watch(protocol)
            return queue
        flow_attach(scope, RequestFlow(protocol))
        queue = InputQueue()
        scope.setdefault("asgi", ASGI_VERSION)
        instance = self.application(scope=scope, receive=queue.get, send=partial(self.handle_reply, protocol))
        if protocol not in self.connections:
            return None
        self.connections[protocol]["application_instance"] = asyncio.ensure_future(instance)
        self.application_watch(protocol)
        return queue


def request_transports(connections: dict[Any, Any]) -> list[Any]:
    """The transports carrying daphne's current requests (``Server.connections`` keys)."""
    transports = []
    for protocol in connections:
        channel = getattr(protocol, "channel", None)
        transport = getattr(channel, "transport", None)
        if transport is not None and transport not in transports:
            transports.append(transport)
    return transports

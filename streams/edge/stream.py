"""The life of one open stream response, shared by Kafka and proxy streams.

Start the response, hand the stream's source a sink, let live reconfiguration
and the token's deadline end it, wait until the client or the source ends it,
and clean up in ``finally`` however it ends. What differs between the kinds
(a hub subscription, an upstream) is a :class:`StreamSource`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

from guards.verification import Principal
from streams.core.asgi import Receive, Send
from streams.core.routes import RouteSpec
from streams.edge.challenge import deadlines_register, stream_deadlines
from streams.edge.reauthorization import StreamDeadline
from streams.edge.reconfiguration import OpenStream
from streams.edge.request import StreamRequest
from streams.edge.responses import stream_finish, stream_start
from streams.edge.runtime import config_bus
from streams.edge.teardown import stream_teardown
from streams.fanout.sinks import Flow, FlowSink, QueueSink, Sink

# The close reason of a stream whose client went away.
CLIENT_GONE = "client"
# The close reason of a client cut for being too far behind: its connection is already dropped.
CUT_SLOW = "slow"


class StreamSource(Protocol):
    """What one kind of stream does inside the shared response."""

    @property
    def closed(self) -> asyncio.Future[str]:
        """Resolves with the reason once the stream is over (set by :meth:`end` or the source itself)."""

    @property
    def close_reason(self) -> str | None: ...

    def on_closed(self, callback: Callable[[], object]) -> None:
        """Call ``callback`` soon, on the event loop, once the stream is over (as :attr:`closed` resolves)."""

    def attach(self, sink: Sink) -> None:
        """Start delivering to ``sink`` (the response head is out)."""

    def end(self, reason: str) -> None:
        """Stop delivering and end the stream (a configuration change, an expired token, a client gone)."""

    def challenge(self) -> None:
        """Send the ``challenge`` event (the token expires soon)."""

    def detach(self) -> None:
        """Stop delivering, whatever ended the stream (called once, in ``finally``)."""


def sink_for(flow: Flow | None, send: Send, limit: int) -> Sink:
    """Direct writes on daphne with Sluice's server, a queue drained by a task on any other server."""
    return FlowSink(flow, limit) if flow is not None else QueueSink(send, limit)


@dataclass(frozen=True, slots=True)
class Watched:
    """A route whose live changes may end (part of) a stream: ``end`` is called with the reason."""

    route: RouteSpec
    end: Callable[[str], None]


async def stream_serve(
    request: StreamRequest,
    receive: Receive,
    send: Send,
    source: StreamSource,
    deadlines: Sequence[StreamDeadline],
    *,
    limit: int,
    watched: Sequence[Watched],
    head_sent: bool = False,
) -> None:
    """Serve ``source`` as this request's response until the client leaves or the stream ends.

    ``limit``: the client's pending bytes before it is cut; ``watched``: its routes, held
    against live reconfiguration; ``head_sent``: the response started already (a stream
    held while Kafka was away). On daphne with Sluice's server this returns once the
    stream is live, and the stream ends in callbacks (:mod:`streams.edge.teardown`);
    elsewhere it waits for the end.
    """
    flow = request.flow
    if not head_sent:
        await stream_start(send)
    sink = sink_for(flow, send, limit)
    # A change of a route (disabled, deleted, guard tightened) may end the stream (live reconfiguration).
    opened = [OpenStream(watch.route, request.scope, request.query, end=watch.end) for watch in watched]
    ending = StreamEnding(source, opened, deadlines, flow)
    try:
        source.attach(sink)
        open_streams = config_bus().streams
        for open_stream in ending.opened:
            open_streams.add(open_stream)
        # A guarded stream ends when its token expires (nothing after exp is delivered),
        # unless a challenge response moves the deadline first.
        for deadline in deadlines:
            deadline.start(on_challenge=source.challenge, on_expire=partial(source.end, "expired"))
    except BaseException:
        ending.clean_up()
        raise
    if flow is not None:
        # On daphne the request says when its client goes, and nothing needs to wait: no task,
        # no coroutine per open stream. The clean-up runs when the source's end resolves.
        flow.on_gone(ending.client_gone)
        teardown = stream_teardown(request.scope)
        teardown.defer(ending.finish)
        teardown.hand_off(source.on_closed)
        return
    try:
        disconnected = await wait_until_over(receive, source.closed)
    finally:
        ending.clean_up()
    if not disconnected and source.close_reason != CUT_SLOW:
        if isinstance(sink, QueueSink):
            await sink.close()
        await stream_finish(send)


async def route_serve(
    route: RouteSpec,
    request: StreamRequest,
    receive: Receive,
    send: Send,
    source: StreamSource,
    principal: Principal | None,
    *,
    head_sent: bool = False,
) -> None:
    """Serve one route's ``source``: the token's deadline heard, the route's limit, its live changes watched."""
    deadlines = stream_deadlines(route, principal)
    await deadlines_register(deadlines, stream_teardown(request.scope))
    await stream_serve(
        request,
        receive,
        send,
        source,
        deadlines,
        limit=route.max_pending_bytes,
        watched=[Watched(route, source.end)],
        head_sent=head_sent,
    )


class StreamEnding:
    """What ends with a stream, however it ends: its live-configuration watches, its deadlines, its source."""

    __slots__ = ("deadlines", "flow", "opened", "source")

    def __init__(
        self,
        source: StreamSource,
        opened: list[OpenStream],
        deadlines: Sequence[StreamDeadline],
        flow: Flow | None,
    ) -> None:
        self.source = source
        self.opened = opened
        self.deadlines = deadlines
        self.flow = flow

    def client_gone(self) -> None:
        self.source.end(CLIENT_GONE)

    def clean_up(self) -> None:
        try:
            open_streams = config_bus().streams
            for open_stream in self.opened:
                open_streams.remove(open_stream)
            for deadline in self.deadlines:
                deadline.cancel()
            self.source.detach()
        finally:
            if self.flow is not None:
                self.flow.release()

    def finish(self) -> None:
        """Clean up, and end the response unless the client went or was cut (its connection is gone)."""
        try:
            self.clean_up()
        finally:
            if self.flow is not None and self.source.close_reason not in (CLIENT_GONE, CUT_SLOW):
                self.flow.finish()


def client_disconnect(receive: Receive) -> asyncio.Task[None]:
    """A task that ends when ASGI ``receive`` says the client went away (servers without a :class:`Flow`)."""

    async def read() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    return asyncio.ensure_future(read())


async def wait_until_over(receive: Receive, closed: asyncio.Future[str]) -> bool:
    """Wait for the client to leave or the source to end the stream; True if the client left.

    For servers without a :class:`Flow`: the client's going is read from ``receive`` in a task.
    """
    gone = client_disconnect(receive)
    try:
        waiters: list[asyncio.Future[Any]] = [gone, closed]
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    return not closed.done()

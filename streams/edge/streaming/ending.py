"""Where a stream ends: :class:`StreamEnd` holds what a stream request took, and gives it all back once.

On daphne with Sluice's server an open stream needs no coroutine: the hub writes to
the socket, the request says when its client goes, and the heartbeat wheel and the
token's timers do the rest. So once a stream is live (:func:`~streams.edge.streaming.stream.stream_serve`)
its app returns instead of waiting: the chain of coroutines from daphne's task down
to the stream, with their frames, was about 3 KiB of every idle stream
(``bench/connection_memory.py``). The request's :class:`StreamEnd` is made by the
request's lifecycle (:mod:`streams.edge.lifecycle`) and handed down; it runs its
clean-up when the app returns or, for a stream handed off, when the stream ends.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from streams.core.asgi import Scope
from streams.core.closing import CONNECTION_GONE, CloseReason
from streams.core.sse import retry_line
from streams.edge.authorization.reauthorization import StreamDeadline
from streams.edge.authorization.reconfiguration import OpenStream
from streams.edge.runtime import WorkerRuntime
from streams.edge.streaming.source import StreamSource
from streams.fanout.sinks import Flow

logger = logging.getLogger("sluice.streams")


class StreamEnd:
    """What one stream request holds (an address slot, deadlines, live-configuration watches, a source)."""

    __slots__ = ("_address", "_deadlines", "_flow", "_handed_off", "_runtime", "_source", "_watches")

    def __init__(self, runtime: WorkerRuntime, flow: Flow | None) -> None:
        self._runtime = runtime
        self._flow = flow
        self._address: str | None = None
        self._deadlines: tuple[StreamDeadline, ...] = ()
        self._watches: tuple[OpenStream, ...] = ()
        self._source: StreamSource | None = None
        self._handed_off = False

    @property
    def deadlines(self) -> tuple[StreamDeadline, ...]:
        return self._deadlines

    def address_hold(self, scope: Scope) -> None:
        """Take an admission and the client address's stream slot.

        :class:`~streams.core.errors.AdmissionsBusy` past the worker's admission rate,
        :class:`~streams.core.errors.TooManyStreams` at the address's limit.
        """
        self._runtime.admissions.take()
        self._address = self._runtime.addresses.take(scope)

    async def deadlines_register(self, deadlines: Sequence[StreamDeadline]) -> None:
        """Hear challenge responses for ``deadlines`` until the stream ends.

        Registered before the response starts: once a client sees ``200``, a challenge
        response reaches the stream.
        """
        if not deadlines:
            return
        bus = self._runtime.reauthorization()
        for deadline in deadlines:
            await bus.stream_open(deadline)
            self._deadlines = (*self._deadlines, deadline)

    def source_hold(self, source: StreamSource) -> None:
        """``source`` is detached however the stream ends."""
        self._source = source

    def watch(self, watches: Sequence[OpenStream]) -> None:
        """Hold the stream's routes against live reconfiguration until it ends."""
        open_streams = self._runtime.open_streams()
        for watch in watches:
            open_streams.add(watch)
        self._watches = tuple(watches)

    def client_gone(self) -> None:
        if self._source is not None:
            self._source.end(CloseReason.CLIENT)

    def hand_off(self, on_end: Callable[[Callable[[], object]], None]) -> None:
        """The stream outlives its app: end it when its source ends (``on_end(callback)``), not when the app returns."""
        self._handed_off = True
        on_end(self.run)

    def returned(self) -> None:
        """The app returned (or raised): end now, unless the stream was handed off."""
        if not self._handed_off:
            self.run()

    def run(self) -> None:
        """The end of the stream: everything given back, in the reverse of the order it was taken; once."""
        try:
            self._release()
        except Exception:
            logger.exception("cleaning up a stream failed")

    def _release(self) -> None:
        source, self._source = self._source, None
        flow, self._flow = self._flow, None
        if flow is not None and source is not None and self._handed_off and source.close_reason == CloseReason.SHUTDOWN:
            # Drained: the last frame was whole, and the client comes back after its own share of the drain window.
            base = max((watch.route.retry_ms or 0 for watch in self._watches), default=0)
            flow.write(retry_line(self._runtime.drain_retry_ms(base)) + b"\n")
        try:
            try:
                open_streams = self._runtime.open_streams_if_started()
                for watch in self._watches:
                    if open_streams is not None:
                        open_streams.remove(watch)
                self._watches = ()
                for deadline in self._deadlines:
                    deadline.cancel()
                if source is not None:
                    source.detach()
            finally:
                if flow is not None:
                    flow.release()
                    # The end of the response, unless the client went or was cut (its connection is gone).
                    if self._handed_off and (source is None or source.close_reason not in CONNECTION_GONE):
                        flow.finish()
        finally:
            deadlines, self._deadlines = self._deadlines, ()
            if deadlines:
                bus = self._runtime.reauthorization()
                for deadline in deadlines:
                    bus.stream_close(deadline)
            address, self._address = self._address, None
            if address is not None:
                self._runtime.addresses.give_back(address)

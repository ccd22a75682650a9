"""Upstream SSE connections for ``sse-proxy`` routes (SPEC 3), shared between clients.

One :class:`Upstream` reads one upstream stream with httpx and httpx-sse and
writes every event, re-framed field for field, into the sinks of its
subscribers. It re-opens the upstream on failure with backoff (at least the
upstream's ``retry``) and the last id it saw, without ending its clients.

:class:`Upstreams` shares connections: clients that open without a
last event id join the live upstream of their URL; clients with the same last
id share one until it has delivered anything (after that a newcomer with that
id would miss what was delivered, so it gets its own). Plain asyncio, no Django.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
from httpx_sse import EventSource, SSEError
from httpx_sse._decoders import SSEDecoder, SSELineDecoder  # not re-exported; the version is pinned

from streams.core.closing import CloseReason
from streams.core.schemas import SchemaCheck
from streams.core.sse import HEARTBEAT, block_frame, checkpoint_frame, preamble
from streams.fanout.cutoffs import loop_cutoffs
from streams.fanout.sinks import Sink

logger = logging.getLogger("sluice.proxy")

MAX_BACKOFF_SECONDS = 10.0
# An upstream silent for this long (no event, no comment) is taken for dead and re-opened.
READ_TIMEOUT_SECONDS = 300.0


class UpstreamError(Exception):
    """The upstream could not be opened; ``status`` is its HTTP status when it answered."""

    def __init__(self, detail: str, status: int | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.status = status

    @property
    def refused(self) -> bool:
        """A 4xx (or a non-SSE answer): asking again will not help."""
        return self.status is not None and self.status < 500


@dataclass(frozen=True, slots=True)
class UpstreamEvent:
    """One event block as the upstream sent it: ``None`` marks a field it did not send."""

    id: str | None = None
    event: str | None = None
    data: str | None = None
    retry: int | None = None

    def frame(self) -> bytes:
        """The block re-framed (SPEC 1): same fields, same meaning to a browser."""
        return block_frame(event_id=self.id, event=self.event, retry_ms=self.retry, data=self.data)


class FieldDecoder:
    """httpx-sse's decoder, also telling which fields a block held.

    httpx-sse keeps the last id across blocks and cannot tell ``data:`` (an
    empty payload, which a browser dispatches) from no data line at all (which
    it does not); forwarding unchanged needs both.
    """

    def __init__(self) -> None:
        self._decoder = SSEDecoder()
        self._seen: set[str] = set()

    def decode(self, line: str) -> UpstreamEvent | None:
        if line and not line.startswith(":"):
            self._seen.add(line.partition(":")[0])
        sse = self._decoder.decode(line)
        if line:
            return None
        seen, self._seen = self._seen, set()
        if sse is None or not seen & {"id", "event", "data", "retry"}:
            return None
        return UpstreamEvent(
            id=sse.id if "id" in seen else None,
            event=sse.event if "event" in seen else None,
            data=sse.data if "data" in seen else None,
            retry=sse.retry,
        )


async def events_read(response: httpx.Response) -> AsyncIterator[UpstreamEvent]:
    """The event blocks of an open SSE response, in order."""
    lines = SSELineDecoder()
    decoder = FieldDecoder()
    async for text in response.aiter_text():
        for line in lines.decode(text):
            event = decoder.decode(line)
            if event is not None:
                yield event
    for line in [*lines.flush(), ""]:
        event = decoder.decode(line)
        if event is not None:
            yield event


class ProxySubscriber:
    """One client of an upstream: its sink and the future that says why its stream ended.

    Until the client's response head is out there is no sink yet: what arrives
    meanwhile waits in ``backlog`` (bounded by ``limit`` like the sink) and goes
    first on :meth:`Upstream.attach`.
    """

    __slots__ = (
        "sink",
        "limit",
        "schema",
        "heartbeat_seconds",
        "backlog",
        "backlog_bytes",
        "closed",
        "close_reason",
        "__weakref__",
    )

    def __init__(
        self, first: bytes, limit: int, schema: SchemaCheck | None = None, heartbeat_seconds: float = 15.0
    ) -> None:
        self.sink: Sink | None = None
        self.limit = limit
        self.heartbeat_seconds = heartbeat_seconds
        self.schema = schema  # the route's: events whose data does not validate are not sent (SPEC 3, 5)
        self.backlog = [first]
        self.backlog_bytes = len(first)
        self.closed: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.close_reason: str | None = None

    def write(self, data: bytes) -> bool:
        """``False`` once the client is over its pending-bytes bound."""
        if self.sink is None:
            self.backlog.append(data)
            self.backlog_bytes += len(data)
            return self.backlog_bytes <= self.limit
        return self.sink.write(data)

    def abort(self) -> None:
        if self.sink is not None:
            self.sink.abort()

    def end(self, reason: str) -> None:
        if not self.closed.done():
            self.close_reason = reason
            self.closed.set_result(reason)


class Upstream:
    """One upstream stream, read once and written to every subscriber."""

    def __init__(
        self, client: httpx.AsyncClient, url: str, last_id: str | None, *, base_delay: float, owner: Upstreams
    ) -> None:
        self.client = client
        self.url = url
        self.opened_with = last_id
        self.last_id = last_id
        self.base_delay = base_delay
        self.owner = owner
        self.retry_ms: int | None = None
        self.delivered = 0
        self.reconnects = 0
        self.subscribers: dict[ProxySubscriber, None] = {}
        self.cutoffs = loop_cutoffs()
        self.opened: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.task = asyncio.get_running_loop().create_task(self._run())

    @property
    def joinable(self) -> bool:
        """A newcomer with ``opened_with`` as its last id misses nothing by joining."""
        return not self.task.done() and (self.opened_with is None or self.delivered == 0)

    def subscribe(self, sub: ProxySubscriber) -> None:
        self.subscribers[sub] = None

    def attach(self, sub: ProxySubscriber, sink: Sink) -> None:
        """Start writing ``sub``'s events to ``sink``, what waited first (its response head is out)."""
        sub.sink = sink
        if sub.closed.done():  # cut while it waited
            sink.abort()
            return
        backlog, sub.backlog = b"".join(sub.backlog), []
        if not sink.write(backlog):
            self.cut(sub)

    def unsubscribe(self, sub: ProxySubscriber) -> None:
        self.subscribers.pop(sub, None)
        if not self.subscribers and self.opened.done():
            self.close()

    def close(self) -> None:
        self.task.cancel()
        self.owner.forget(self)

    def _write(self, data: bytes) -> None:
        for sub in list(self.subscribers):
            if not sub.write(data):
                self.cut(sub)

    def cut(self, sub: ProxySubscriber) -> None:
        """Over its pending-bytes bound: the client is dropped and resumes with its last id (SPEC 2.5)."""
        self.subscribers.pop(sub, None)
        sub.abort()
        sub.end(CloseReason.SLOW)
        self.owner.cut_slow += 1

    def heartbeat(self, now: float) -> None:
        """A keep-alive comment to each client that has had nothing for its ``heartbeat_seconds`` (SPEC 1)."""
        for sub in list(self.subscribers):
            sink = sub.sink
            if sink is None or sub.closed.done():
                continue
            # A client that has not taken the last bytes yet gets nothing more to hold.
            if now - sink.last_write < sub.heartbeat_seconds or sink.congested():
                continue
            if not sink.write(HEARTBEAT):
                self.cut(sub)

    def _end_all(self, reason: str) -> None:
        for sub in list(self.subscribers):
            sub.end(reason)
        self.subscribers.clear()

    async def _open(self) -> httpx.Response:
        headers = {"accept": "text/event-stream", "cache-control": "no-cache"}
        if self.last_id:
            headers["last-event-id"] = self.last_id
        request = self.client.build_request("GET", self.url, headers=headers)
        try:
            response = await self.client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise UpstreamError(f"upstream {self.url} did not answer: {exc.__class__.__name__}") from exc
        if response.status_code != 200:
            await response.aclose()
            raise UpstreamError(
                f"upstream {self.url} answered {response.status_code}", status=response.status_code
            ) from None
        try:
            EventSource(response)._check_content_type()
        except SSEError:
            await response.aclose()
            raise UpstreamError(
                f"upstream {self.url} answered {response.headers.get('content-type')!r}, not an event stream",
                status=response.status_code,
            ) from None
        return response

    async def _run(self) -> None:
        failures = 0
        try:
            while True:
                try:
                    response = await self._open()
                except UpstreamError as exc:
                    if not self.opened.done():
                        self.opened.set_exception(exc)
                        return
                    if exc.refused:
                        logger.warning("upstream %s refused a re-open: %s", self.url, exc.detail)
                        self._end_all(CloseReason.UPSTREAM_REFUSED)
                        return
                    failures += 1
                    await asyncio.sleep(self._backoff(failures))
                    continue
                if self.opened.done():
                    self.reconnects += 1
                    self.owner.reconnects += 1
                else:
                    self.opened.set_result(None)
                failures = 0
                try:
                    if self.subscribers:  # every client may have left while it opened
                        async for event in events_read(response):
                            self._deliver(event)
                except (httpx.HTTPError, httpx.StreamError, UnicodeDecodeError) as exc:
                    logger.info("upstream %s failed (%s); re-opening from %r", self.url, exc, self.last_id)
                else:
                    logger.info("upstream %s ended; re-opening from %r", self.url, self.last_id)
                finally:
                    await response.aclose()
                if not self.subscribers:
                    return
                failures += 1
                await asyncio.sleep(self._backoff(failures))
        finally:
            self.owner.forget(self)
            if not self.opened.done():
                self.opened.set_exception(UpstreamError(f"upstream {self.url} closed before it opened"))
            self._end_all(CloseReason.UPSTREAM_CLOSED)

    def _backoff(self, failures: int) -> float:
        """Doubling from the upstream's ``retry`` (else the route's), capped."""
        base = self.retry_ms / 1000 if self.retry_ms is not None else self.base_delay
        return float(min(max(base, 0.05) * 2 ** (failures - 1), max(base, MAX_BACKOFF_SECONDS)))

    def _deliver(self, event: UpstreamEvent) -> None:
        self.cutoffs.run_due()  # streams whose token expired by now end before this event
        if event.id is not None:
            self.last_id = event.id
        if event.retry is not None:
            self.retry_ms = event.retry
        if event.data is not None:
            self.delivered += 1
        frame = event.frame()
        if event.data is None or not any(sub.schema is not None for sub in self.subscribers):
            self._write(frame)
            return
        # One verdict per schema version for this event, whatever the number of clients.
        verdicts: dict[str, bool] = {}
        skipped = checkpoint_frame(event.id) if event.id is not None else b""
        for sub in list(self.subscribers):
            schema = sub.schema
            valid = True
            if schema is not None:
                cached = verdicts.get(schema.key)
                if cached is not None:
                    valid = cached
                else:
                    valid = verdicts[schema.key] = schema.value_valid(event.data.encode("utf-8"))
                    if not valid:
                        self.owner.schema_rejected += 1
                        schema.rejection_log(f"upstream {self.url} event id {event.id}")
            data = frame if valid else skipped
            # A skipped event still moves the client's last id past it (an id-only block).
            if data and not sub.write(data):
                self.cut(sub)

    def preamble(self, retry_ms: int) -> bytes:
        """What a new subscriber gets first: the reconnection delay, and the last id when joining mid-stream."""
        return preamble(self.retry_ms if self.retry_ms is not None else retry_ms, self.last_id or None)


class Upstreams:
    """This process's upstream connections, shared where sharing loses nothing."""

    def __init__(self, client: httpx.AsyncClient | None = None) -> None:
        self._client = client
        self.upstreams: dict[tuple[str, str | None], Upstream] = {}
        # One keep-alive pass a second over every upstream's clients: no timer per connection.
        self._ticker: asyncio.Task[None] | None = None
        # Counters for /metrics (the upstreams come and go, these stay).
        self.cut_slow = 0
        self.reconnects = 0
        self.schema_rejected = 0

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            timeout = httpx.Timeout(10.0, read=READ_TIMEOUT_SECONDS)
            self._client = httpx.AsyncClient(timeout=timeout, follow_redirects=True)
        return self._client

    async def subscribe(
        self,
        url: str,
        last_id: str | None,
        *,
        retry_ms: int,
        limit: int,
        schema: SchemaCheck | None = None,
        heartbeat_seconds: float = 15.0,
    ) -> tuple[Upstream, ProxySubscriber]:
        """Join (or open) the upstream for ``url`` from ``last_id``; raises :class:`UpstreamError` if it refuses.

        The subscriber's first bytes (``retry`` and a checkpoint) come before any event; it writes
        nothing until :meth:`Upstream.attach` gives it its sink; ``limit`` bounds its pending bytes.
        """
        key = (url, last_id)
        upstream = self.upstreams.get(key)
        if upstream is None or not upstream.joinable:
            upstream = Upstream(self.client, url, last_id, base_delay=retry_ms / 1000, owner=self)
            self.upstreams[key] = upstream
        sub = ProxySubscriber(upstream.preamble(retry_ms), limit, schema, heartbeat_seconds)
        if self._ticker is None:
            self._ticker = asyncio.get_running_loop().create_task(self._tick(), name="sluice-upstream-ticker")
        # Subscribed before the open finishes, so no event between the two is lost.
        upstream.subscribe(sub)
        try:
            await asyncio.shield(upstream.opened)
        except BaseException:
            upstream.unsubscribe(sub)
            raise
        return upstream, sub

    @property
    def subscribers(self) -> int:
        return sum(len(upstream.subscribers) for upstream in self.upstreams.values())

    def forget(self, upstream: Upstream) -> None:
        key = (upstream.url, upstream.opened_with)
        if self.upstreams.get(key) is upstream:
            del self.upstreams[key]

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            now = time.monotonic()
            for upstream in list(self.upstreams.values()):
                try:
                    upstream.heartbeat(now)
                except Exception:
                    logger.exception("keep-alive pass failed for upstream %s", upstream.url)

    async def close(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
        for upstream in list(self.upstreams.values()):
            upstream.close()
        if self._client is not None:
            await self._client.aclose()

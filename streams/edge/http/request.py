"""One stream request, parsed once: method, query, last event id, ``since``, and the server's flow.

The server below the app (``streams.server.flow``) puts a :class:`~streams.fanout.sinks.Flow`
in the ASGI scope under the key :data:`FLOW_KEY` (a key of the scope itself: an ``extensions``
dictionary of its own was some 110 B of every open stream);
:func:`request_flow` is the one place that reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import parse_qs

from streams.core.asgi import Scope
from streams.core.compression import Encoding, encoding_choose
from streams.core.errors import InvalidLastEventId, InvalidSince
from streams.core.ids import MAX_EVENT_ID_BYTES, EventId, EventIdError, event_id_parse
from streams.fanout.sinks import Flow

# The ASGI scope key holding the request's Flow (set by the server, read here).
FLOW_KEY = "sluice.flow"
STREAM_METHODS = ("GET", "HEAD")
# A guarded route also takes the challenge response (SPEC 4.3).
GUARDED_METHODS = (*STREAM_METHODS, "POST")


def flow_attach(scope: Scope, flow: Flow) -> None:
    """Give the app the socket end of its response (called by the server for each HTTP request)."""
    scope[FLOW_KEY] = flow


def request_flow(scope: Scope) -> Flow | None:
    """The request's :class:`Flow` on daphne with Sluice's server; None on any other ASGI server."""
    flow: Flow | None = scope.get(FLOW_KEY)
    return flow


@dataclass(frozen=True, slots=True)
class StreamRequest:
    """What the stream kinds read from the scope, taken once."""

    scope: Scope
    method: str
    query: dict[str, list[str]]
    flow: Flow | None = field(repr=False)

    @classmethod
    def of(cls, scope: Scope) -> StreamRequest:
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        return cls(scope, str(scope.get("method", "")), query, request_flow(scope))

    def header(self, name: bytes) -> bytes | None:
        for key, value in self.scope.get("headers", []):
            if key == name:
                return bytes(value)
        return None

    def encoding(self, *, brotli_ok: bool = True) -> Encoding | None:
        """The content coding this client accepts that Sluice prefers (``Accept-Encoding``), if any."""
        return encoding_choose(self.header(b"accept-encoding"), brotli_ok=brotli_ok)

    @property
    def content_type(self) -> str:
        """The request's media type, lower case, without parameters."""
        value = self.header(b"content-type")
        return value.decode("latin-1").split(";", 1)[0].strip().lower() if value is not None else ""

    def last_event_id_raw(self) -> str | None:
        """``Last-Event-ID`` header, else the ``lastEventId`` query parameter (SPEC 1), as text; None if empty."""
        raw: str | None = None
        value = self.header(b"last-event-id")
        if value:
            if len(value) > MAX_EVENT_ID_BYTES:
                raise InvalidLastEventId(f"Last-Event-ID is longer than {MAX_EVENT_ID_BYTES} bytes")
            raw = value.decode("utf-8", "replace")
        # An empty header (a client with no id yet) falls back to the query parameter.
        if raw is None and "lastEventId" in self.query:
            raw = self.query["lastEventId"][0]
            if len(raw.encode("utf-8")) > MAX_EVENT_ID_BYTES:
                raise InvalidLastEventId(f"lastEventId is longer than {MAX_EVENT_ID_BYTES} bytes")
        if raw is not None and any(c in raw for c in "\r\n\x00"):
            # No id holds these (SPEC 1), and a proxy route would pass it on as a header.
            raise InvalidLastEventId("a last event id cannot hold CR, LF or NUL")
        return raw or None

    def last_event_id(self) -> EventId | None:
        """The last event id of a Kafka route, parsed (SPEC 2.2)."""
        raw = self.last_event_id_raw()
        if raw is None:
            return None
        try:
            return event_id_parse(raw)
        except EventIdError as exc:
            raise InvalidLastEventId(str(exc)) from exc

    def since_ms(self, *, allowed: bool) -> int | None:
        """``since`` as epoch milliseconds, if given (and the route takes it)."""
        if "since" not in self.query:
            return None
        if not allowed:
            raise InvalidSince("this route does not accept since")
        return since_parse(self.query["since"][0])


def since_parse(text: str) -> int:
    """``since`` as epoch milliseconds: ISO-8601 (naive means UTC) or epoch ms."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise InvalidSince(f"since={text!r} is neither ISO-8601 nor epoch milliseconds") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)

"""Server-Sent Events framing (SPEC 1): bytes exactly as browsers parse them.

Pure functions over ``str``/``bytes``; the hub calls them once per message and
shares the result between every subscriber that receives it.
"""

from __future__ import annotations

import re

CONTENT_TYPE = b"text/event-stream; charset=utf-8"
HEARTBEAT = b":\n\n"

_LINE_END = re.compile(r"\r\n|\r|\n")
_FIELD_UNSAFE = re.compile(r"[\r\n\x00]")


def field_sanitize(value: str) -> str:
    """Strip CR, LF and NUL, which would end or corrupt an ``id``/``event`` field."""
    return _FIELD_UNSAFE.sub("", value)


def data_lines(text: str) -> bytes:
    """``data:`` lines for a payload, split on every line end a browser honours.

    An empty payload still gets one ``data: `` line so the browser fires the event.
    """
    if "\n" not in text and "\r" not in text:
        return b"data: " + text.encode("utf-8") + b"\n"
    return b"".join(b"data: " + line.encode("utf-8") + b"\n" for line in _LINE_END.split(text))


def event_body(data: str, event: str | None = None) -> bytes:
    """Everything of an event after its ``id`` line, including the blank line."""
    head = b"event: " + field_sanitize(event).encode("utf-8") + b"\n" if event else b""
    return head + data_lines(data) + b"\n"


def id_line(event_id: str) -> bytes:
    return b"id: " + field_sanitize(event_id).encode("utf-8") + b"\n"


def retry_line(retry_ms: int) -> bytes:
    return b"retry: " + str(int(retry_ms)).encode("ascii") + b"\n"


def event_frame(event_id: str | None, body: bytes) -> bytes:
    """A whole event: the ``id`` line (if any) followed by a body from :func:`event_body`."""
    if event_id is None:
        return body
    return id_line(event_id) + body


def checkpoint_frame(event_id: str) -> bytes:
    """An id-only event: the browser stores it as ``lastEventId`` without firing ``message``."""
    return id_line(event_id) + b"\n"


def preamble(retry_ms: int | None, event_id: str | None) -> bytes:
    """The first bytes of a stream: the reconnection delay and the start checkpoint."""
    out = b""
    if retry_ms is not None:
        out += retry_line(retry_ms)
    if event_id is not None:
        out += id_line(event_id)
    return out + b"\n" if out else b""


def block_frame(
    *, event_id: str | None = None, event: str | None = None, retry_ms: int | None = None, data: str | None = None
) -> bytes:
    """A block with exactly these fields (None leaves one out), as a relay re-frames what its upstream sent.

    ``data=""`` is kept: a browser dispatches an event with an empty payload, but
    none for a block without a data line.
    """
    out = id_line(event_id) if event_id is not None else b""
    if event:
        out += b"event: " + field_sanitize(event).encode("utf-8") + b"\n"
    if retry_ms is not None:
        out += retry_line(retry_ms)
    if data is not None:
        out += data_lines(data)
    return out + b"\n"

"""ASGI answers of the stream app: the head of a stream, a refusal as JSON, headers added to every answer."""

from __future__ import annotations

from streams.core.asgi import Message, Send
from streams.core.compression import Encoding
from streams.core.errors import StreamError
from streams.core.sse import CONTENT_TYPE

# no-transform: a proxy must not recompress (or buffer to compress) the stream; X-Accel-Buffering: nginx
# passes each chunk on at once. Vary: the same URL answers compressed or not by Accept-Encoding.
STREAM_HEADERS = [
    (b"content-type", CONTENT_TYPE),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
    (b"vary", b"Accept-Encoding"),
]


async def stream_start(send: Send, encoding: Encoding | None = None) -> None:
    headers = STREAM_HEADERS if encoding is None else [*STREAM_HEADERS, (b"content-encoding", encoding.token)]
    await send({"type": "http.response.start", "status": 200, "headers": headers})


async def stream_finish(send: Send) -> None:
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def empty_answer(send: Send, status: int, headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


async def send_error(send: Send, error: StreamError) -> None:
    """A refusal: its status, its headers and its JSON body (never cached)."""
    body = error.body()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"),
        *error.headers,
    ]
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def send_with_headers(send: Send, extra: list[tuple[bytes, bytes]]) -> Send:
    """``send``, adding ``extra`` to the response head (the route's CORS headers on every answer)."""
    if not extra:
        return send

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *extra]}
        await send(message)

    return sending

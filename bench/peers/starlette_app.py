"""sse-starlette on uvicorn: one asyncio.Queue per client, an in-process broadcast per channel.

uvicorn --app-dir bench/peers starlette_app:app --port P --log-level warning
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from publisher import Publisher
from sse_starlette.sse import EventSourceResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

channels: dict[str, set[asyncio.Queue[str]]] = {}


def broadcast(channel: str, text: str) -> None:
    for queue in channels.get(channel, ()):
        queue.put_nowait(text)


publisher = Publisher(broadcast)


async def events(request: Request) -> EventSourceResponse:
    channel = request.path_params["channel"]
    queue: asyncio.Queue[str] = asyncio.Queue()
    channels.setdefault(channel, set()).add(queue)

    async def stream() -> AsyncIterator[dict[str, str]]:
        try:
            while True:
                yield {"data": await queue.get()}
        finally:
            channels[channel].discard(queue)

    return EventSourceResponse(stream(), sep="\n")


async def start(request: Request) -> JSONResponse:
    q = request.query_params
    publisher.start(float(q["rate"]), int(q["count"]), int(q["size"]), int(q.get("keys", "0")))
    return JSONResponse({"started": True})


async def status(request: Request) -> JSONResponse:
    return JSONResponse(publisher.status())


app = Starlette(
    routes=[
        Route("/events/{channel}", events),
        Route("/start", start, methods=["POST"]),
        Route("/status", status),
    ]
)

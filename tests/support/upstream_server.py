"""A small upstream SSE server for proxy tests (aiohttp), run in its own process so a test can kill it.

``python -m tests.support.upstream_server --port P [--published N]``

- ``GET /events``: numbered events. With ``Last-Event-ID: k`` it resumes at
  ``k + 1``; without one it starts at the next event published (live); with
  ``?from=n`` at ``n``. Event ``n`` is :func:`event_fields` ``(n)``; it is sent
  once ``n`` has been published.
- ``POST /publish?count=K``: publish ``K`` more events.
- ``GET /fixed``: one fixed byte sequence with every SSE oddity (:data:`FIXED`), then held open.
- ``GET /refuse``: ``401`` with a JSON body.
- ``GET /log``: the ``Last-Event-ID`` of every ``/events`` request so far (JSON list; null for none).

``--published N`` starts as if ``N`` events had been published (a restart that
"missed" nothing: the events were published while it was down).
"""

from __future__ import annotations

import argparse
import asyncio
import json

from aiohttp import web

RETRY_MS = 200

# CRLF and CR line ends, a field without its space, an empty payload, an id-only
# block, a comment, a retry alone, and payload text that looks like fields.
FIXED = (
    b": upstream says hello\n"
    b"retry: 1500\n\n"
    b'id: a-1\nevent: score\ndata: {"home": 1}\n\n'
    b"id: a-2\r\ndata: first line\r\ndata:second line without a space\r\ndata:  two spaces\r\n\r\n"
    b"id: a-3\rdata\r\r"
    b"id: a-4\n\n"
    b"event: note\ndata: id: not-an-id\ndata: event: not-a-type\n\n"
    b"retry: 700\n\n"
    b"id: a-5\nevent: last\ndata: \xc3\xa9t\xc3\xa9 \xe2\x9c\x93\n\n"
)


def event_fields(n: int) -> tuple[str, str, str]:
    """Event ``n`` as (id, type, data): every third has a type, every fourth several lines."""
    kind = "tick" if n % 3 == 0 else "message"
    data = f"event {n}\nsecond line of {n}\n third line" if n % 4 == 0 else f"event {n}"
    return str(n), kind, data


def event_bytes(n: int) -> bytes:
    event_id, kind, data = event_fields(n)
    out = f"id: {event_id}\n"
    if kind != "message":
        out += f"event: {kind}\n"
    out += "".join(f"data: {line}\n" for line in data.split("\n"))
    return (out + "\n").encode()


class Upstream:
    def __init__(self, published: int) -> None:
        self.published = published
        self.changed = asyncio.Condition()
        self.log: list[str | None] = []

    async def events(self, request: web.Request) -> web.StreamResponse:
        last = request.headers.get("Last-Event-ID")
        self.log.append(last)
        if last:
            n = int(last) + 1
        elif "from" in request.query:
            n = int(request.query["from"])
        else:
            n = self.published + 1
        response = web.StreamResponse(headers={"content-type": "text/event-stream", "cache-control": "no-cache"})
        await response.prepare(request)
        await response.write(f"retry: {RETRY_MS}\n\n".encode())
        while True:
            async with self.changed:
                await self.changed.wait_for(lambda n=n: self.published >= n)
            while n <= self.published:
                await response.write(event_bytes(n))
                n += 1

    async def publish(self, request: web.Request) -> web.Response:
        async with self.changed:
            self.published += int(request.query.get("count", "1"))
            self.changed.notify_all()
        return web.json_response({"published": self.published})

    async def fixed(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await response.prepare(request)
        await response.write(FIXED)
        await asyncio.Event().wait()
        return response

    async def refuse(self, request: web.Request) -> web.Response:
        return web.json_response({"error": "who are you"}, status=401)

    async def connections(self, request: web.Request) -> web.Response:
        return web.json_response(self.log)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--published", type=int, default=0)
    args = parser.parse_args()

    async def make_app() -> web.Application:
        upstream = Upstream(args.published)
        app = web.Application()
        app.add_routes(
            [
                web.get("/events", upstream.events),
                web.post("/publish", upstream.publish),
                web.get("/fixed", upstream.fixed),
                web.get("/refuse", upstream.refuse),
                web.get("/log", upstream.connections),
            ]
        )
        return app

    print(json.dumps({"port": args.port}), flush=True)
    # Handlers wait on events forever: a stop does not wait for them (the default would be a minute).
    web.run_app(
        make_app(), host="127.0.0.1", port=args.port, shutdown_timeout=0.5, print=lambda *_: print("ready", flush=True)
    )


if __name__ == "__main__":
    main()

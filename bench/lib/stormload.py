"""A reconnect-storm load client: one process's share of the streams, on its own loopback source address.

One process holds at most a few thousand sockets (the per-process open-file limit is 20,000, and a
source address has some 28,000 ephemeral ports), so ``bench/storm.py`` starts several of these, each
binding its connections to its own ``127.0.0.x``. A stream is a bare :class:`asyncio.Protocol` on
uvloop: the request written once, the chunked body decoded as it arrives, the events counted, and the
stream level once the last event produced has been read. Times are ``time.monotonic()`` (one clock
for every process on Linux), so the parent compares them across processes.
"""

from __future__ import annotations

import asyncio
import resource
import socket
import time
from functools import partial
from typing import Any

MARK = b'"seq":%d}'
IP_BIND_ADDRESS_NO_PORT = 24  # linux/in.h


def identity(stream: Stream) -> Stream:
    return stream


class Stream(asyncio.Protocol):
    """One stream request: its status, its events, and when the last one wanted arrived."""

    def __init__(self, request: bytes, last_seq: int, done: asyncio.Future[None]) -> None:
        self.request = request
        self.mark = MARK % last_seq
        self.done = done
        self.head = b""
        self.raw = b""  # chunked body not decoded yet
        self.body = b""
        self.status = 0
        self.admitted_at = 0.0
        self.level_at = 0.0
        self.connected_at = 0.0
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.connected_at = time.monotonic()
        transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        if not self.status:
            self.head += data
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                return
            self.status = int(self.head[9:12])
            data, self.head = self.head[end + 4 :], self.head[:end]
            if self.status != 200:
                self._finish()
                return
            self.admitted_at = time.monotonic()
        self.raw += data
        seen = len(self.body)
        while True:  # decode every complete chunk
            line = self.raw.find(b"\r\n")
            if line < 0:
                break
            size = int(self.raw[:line], 16)
            if len(self.raw) < line + 2 + size + 2:
                break
            self.body += self.raw[line + 2 : line + 2 + size]
            self.raw = self.raw[line + 4 + size :]
        if self.body.find(self.mark, max(0, seen - len(self.mark))) >= 0:
            self.level_at = time.monotonic()
            self._finish()

    def connection_lost(self, exc: Exception | None) -> None:
        self._finish()

    def _finish(self) -> None:
        if not self.done.done():
            self.done.set_result(None)

    def last_id(self) -> str:
        """The id of the frame holding the last event wanted."""
        at = self.body.find(self.mark)
        start = self.body.rfind(b"\n\n", 0, at) + 2 if self.body.rfind(b"\n\n", 0, at) >= 0 else 0
        for line in self.body[start:at].split(b"\n"):
            if line.startswith(b"id: "):
                return line[4:].decode()
        raise ValueError(f"no id before the last event in {self.body[-200:]!r}")

    def events(self) -> int:
        return self.body.count(b"\ndata: ") + self.body.startswith(b"data: ")


class Client:
    """One client: its path, token and Last-Event-ID, and its streams' times."""

    def __init__(self, index: int, token: str | None) -> None:
        self.index = index
        self.token = token
        self.last_id: str | None = None
        self.refused = 0
        self.stream: Stream | None = None

    def request(self) -> bytes:
        head = f"GET /storm/{self.index} HTTP/1.1\r\nhost: 127.0.0.1\r\naccept: text/event-stream\r\n"
        if self.token is not None:
            head += f"authorization: Bearer {self.token}\r\n"
        if self.last_id is not None:
            head += f"last-event-id: {self.last_id}\r\n"
        return (head + "\r\n").encode()

    async def read(self, port: int, source: str, last_seq: int) -> Stream:
        """Open a stream and read it to ``last_seq`` (a 503 is retried after its retry-after); left open."""
        loop = asyncio.get_running_loop()
        while True:
            done: asyncio.Future[None] = loop.create_future()
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                # The port is chosen at connect, by the whole 4-tuple: bind(port 0) would search the
                # source address's ports for one free of every connection, slower as they fill.
                sock.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
                sock.setblocking(False)
                sock.bind((source, 0))
                await loop.sock_connect(sock, ("127.0.0.1", port))
                stream = Stream(self.request(), last_seq, done)
                transport, _ = await loop.create_connection(partial(identity, stream), sock=sock)
            except OSError:
                sock.close()
                self.refused += 1
                await asyncio.sleep(1.0)
                continue
            await done
            if stream.status == 200 and stream.level_at:
                self.stream = stream
                return stream
            transport.close()
            self.refused += 1
            await asyncio.sleep(1.0)


def tokens_make(private_pem: bytes | None, first: int, count: int, alg: str = "ES256") -> list[str | None]:
    """Each client's own token (``sub`` c<n>, the storm role), or None for a public route.

    ``private_pem``: the PEM private key, or for HS256 the secret.
    """
    if private_pem is None:
        return [None] * count
    import jwt
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    key: Any = private_pem if alg == "HS256" else load_pem_private_key(private_pem, None)
    now = int(time.time())
    base = {"scope": "storm:read", "iss": "storm", "aud": "sluice", "iat": now, "exp": now + 3600}
    return [
        jwt.encode({**base, "sub": f"c{n}"}, key, algorithm=alg, headers={"kid": "s1"})
        for n in range(first, first + count)
    ]


async def phases(conn: Any, port: int, source: str, clients: list[Client], before: int, backlog: int) -> None:
    gate = asyncio.Semaphore(200)  # the first opens are not the storm: paced

    async def first(client: Client) -> None:
        async with gate:
            stream = await client.read(port, source, before - 1)
            client.last_id = stream.last_id()
            stream.transport.close()

    await asyncio.gather(*(first(c) for c in clients))
    conn.send("ready")
    await asyncio.to_thread(conn.recv)  # "go": the backlog is produced
    cpu0 = time.process_time()
    streams = await asyncio.wait_for(
        asyncio.gather(*(c.read(port, source, before + backlog - 1) for c in clients)), 300
    )
    conn.send(
        {
            "admitted": [s.admitted_at for s in streams],
            "level": [s.level_at for s in streams],
            "refused": sum(c.refused for c in clients),
            "connected": [s.connected_at for s in streams],
            "cpu": time.process_time() - cpu0,
            "wrong_counts": sum(1 for s in streams if s.events() != backlog),
        }
    )
    await asyncio.to_thread(conn.recv)  # "close": every process's clients are level
    for s in streams:
        s.transport.close()


def storm_client_main(
    conn: Any,
    port: int,
    source: str,
    first: int,
    count: int,
    before: int,
    backlog: int,
    private_pem: bytes | None,
    alg: str = "ES256",
) -> None:
    """A child process: ``count`` clients from index ``first``; told "go" and "close" through ``conn``."""
    import uvloop

    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    clients = [Client(first + n, token) for n, token in enumerate(tokens_make(private_pem, first, count, alg))]
    uvloop.run(phases(conn, port, source, clients, before, backlog))

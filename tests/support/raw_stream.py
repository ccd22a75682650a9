"""A stream read over a raw socket whose receive window is small: how tests make a client that reads slowly."""

from __future__ import annotations

import socket


def small_window_stream(port: int, path: str, timeout: float) -> tuple[socket.socket, bytes, bytes]:
    """A GET of ``path`` with a 4 KiB receive buffer (set before connecting, so the advertised window
    is small too); the socket, the response head, and what came after the head."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(timeout)
    sock.connect(("127.0.0.1", port))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n\r\n".encode())
    received = b""
    while b"\r\n\r\n" not in received:
        data = sock.recv(4096)
        assert data, "the gateway closed before the response head"
        received += data
    head, _, rest = received.partition(b"\r\n\r\n")
    return sock, head, rest

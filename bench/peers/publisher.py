"""An in-process publisher for the Python peers: messages at a set rate into the peer's own channel.

The peers' servers import this (it runs in their process and event loop), so
their publish cost is in their CPU figures. ``/start`` begins a run, ``/status``
says when it is over. The payload is the one ``bench/fanout.py`` produces.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any


def payload_make(seq: int, ts: int, size: int) -> str:
    head = f'{{"seq":{seq},"ts":{ts},"pad":"'
    return head + "x" * max(0, size - len(head) - 2) + '"}'


class Publisher:
    """Publishes ``count`` messages at ``rate``/s through ``send(channel, text)``."""

    def __init__(self, send: Callable[[str, str], Any]) -> None:
        self.send = send
        self.task: asyncio.Task[None] | None = None
        self.report: dict[str, Any] = {}

    def start(self, rate: float, count: int, size: int, keys: int) -> None:
        self.report = {}
        self.task = asyncio.get_running_loop().create_task(self._run(rate, count, size, keys))

    async def _run(self, rate: float, count: int, size: int, keys: int) -> None:
        send = self.send
        start = time.perf_counter()
        behind = 0.0
        for seq in range(count):
            delay = start + seq / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)  # everything due when it wakes goes out in one go
            elif -delay > behind:
                behind = -delay
            send(f"k{seq % keys}" if keys else "all", payload_make(seq, time.time_ns(), size))
        self.report = {"seconds": time.perf_counter() - start, "max_behind": behind, "failed": 0}

    def status(self) -> dict[str, Any]:
        return {"done": bool(self.report), **self.report}

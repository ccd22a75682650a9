"""Requests Django refuses as suspicious (a bad ``Host`` header, too many fields, ...): one line each, bounded.

Django logs each such refusal on ``django.security.<Exception>`` at ERROR with
its traceback, about thirty lines. Anyone can send bad ``Host`` headers, so
that is a way to multiply log volume. :class:`RefusalLog` sits on the handler
of ``django.security`` instead: it counts every refusal
(``sluice_requests_refused{reason}`` on ``/metrics``), writes at most a few
access-log lines per client address and minute (status 400, the reason, the
running count and how many lines were held back), and never a traceback.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from prometheus_client import Counter

from streams.edge.http.counters import stream_metrics

access_logger = logging.getLogger("sluice.access")

requests_refused = Counter(
    "sluice_requests_refused",
    "Requests Django refused as suspicious (bad Host header and the like), by reason.",
    ["reason"],
    registry=stream_metrics,
)


@dataclass(slots=True)
class _Allowance:
    tokens: float
    stamp: float
    held_back: int = 0


class LineBudget:
    """A token bucket per client address (``burst`` lines, refilled at ``per_minute``), for at most ``clients``.

    The least recently seen addresses are forgotten past ``clients``, so a flood
    from many addresses costs bounded memory; ``total_per_minute`` bounds the
    lines of all of them together.
    """

    def __init__(
        self, *, burst: int = 5, per_minute: float = 5.0, clients: int = 4096, total_per_minute: float = 60.0
    ) -> None:
        self.burst = burst
        self.rate = per_minute / 60.0
        self.clients = clients
        self._allowances: OrderedDict[str, _Allowance] = OrderedDict()
        self._total = _Allowance(tokens=total_per_minute, stamp=0.0)
        self._total_rate = total_per_minute / 60.0
        self._total_burst = total_per_minute

    def take(self, client: str, now: float) -> int | None:
        """Lines held back for ``client`` since its last line if one may be written now, else None."""
        allowance = self._allowances.pop(client, None) or _Allowance(tokens=float(self.burst), stamp=now)
        self._allowances[client] = allowance
        while len(self._allowances) > self.clients:
            self._allowances.popitem(last=False)
        _refill(allowance, now, self.rate, self.burst)
        _refill(self._total, now, self._total_rate, self._total_burst)
        if allowance.tokens < 1 or self._total.tokens < 1:
            allowance.held_back += 1
            return None
        allowance.tokens -= 1
        self._total.tokens -= 1
        held_back, allowance.held_back = allowance.held_back, 0
        return held_back


def _refill(allowance: _Allowance, now: float, rate: float, cap: float) -> None:
    allowance.tokens = min(cap, allowance.tokens + (now - allowance.stamp) * rate)
    allowance.stamp = now


def refusal_reason(logger_name: str) -> str:
    """``django.security.DisallowedHost`` -> ``disallowed_host``."""
    name = logger_name.rpartition(".")[2] or "suspicious"
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


class RefusalLog(logging.Handler):
    """The handler of ``django.security``: each refusal is counted, and becomes one access line at most."""

    def __init__(self, burst: int = 5, per_minute: float = 5.0) -> None:
        super().__init__(logging.INFO)
        self.budget = LineBudget(burst=burst, per_minute=per_minute)
        self.counts: dict[str, int] = {}

    def emit(self, record: logging.LogRecord) -> None:
        reason = refusal_reason(record.name)
        requests_refused.labels(reason).inc()
        count = self.counts[reason] = self.counts.get(reason, 0) + 1
        request: Any = getattr(record, "request", None)
        meta = getattr(request, "META", {}) or {}
        client = str(meta.get("REMOTE_ADDR", ""))
        held_back = self.budget.take(client, time.monotonic())
        if held_back is not None:
            entry = {
                "event": "refused",
                "path": str(getattr(request, "path", "")),
                "method": str(getattr(request, "method", "") or ""),
                "status": int(getattr(record, "status_code", 400)),
                "client": client,
                "reason": reason,
                "detail": record.getMessage()[:200],
                "count": count,
                "held_back": held_back,
            }
            # The access line replaces Django's record, and its traceback.
            access_logger.info(json.dumps(entry, separators=(",", ":")))

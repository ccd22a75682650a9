"""A bounded budget of log lines per key: a token bucket each, the least recently seen forgotten.

Anyone can send requests that are refused, so a line per refusal is a way to
multiply log volume: the lines about refusals (``streams.ops.refusals``, and the
refused origins of :mod:`streams.edge.http.refused_origins`) go through one of these.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass


@dataclass(slots=True)
class _Allowance:
    tokens: float
    stamp: float
    held_back: int = 0


class LineBudget:
    """A token bucket per key (``burst`` lines, refilled at ``per_minute``), for at most ``clients`` keys.

    The least recently seen keys are forgotten past ``clients``, so a flood
    from many keys costs bounded memory; ``total_per_minute`` bounds the
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
        """Lines held back for ``client`` (a key) since its last line if one may be written now, else None."""
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

"""Tokens this worker has admitted, so that a client presenting one again skips its signature check.

An ``EventSource`` that reconnects (a dropped connection, a proxy's idle timeout, a
resume after a gateway's restart) sends the token it was admitted with. Its signature
is what costs (an ES256 verify is 65-71 µs of OpenSSL, most of a token's check): this
remembers, per exact token string, the signature verified and the payload decoded.
Nothing else is skipped: on every request the guard's current policy chooses the key
(a token is taken from here only if that key equals the one it was verified with, so
a rotated or removed key, or another guard's, verifies again), and the claims are
checked against the current policy and clock (expiry, issuer, audience, identity,
roles). Only tokens that were admitted are remembered, each until its ``exp``; at most
``size`` of them, the least recently used dropped first. Plain Python, no Django.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from cachetools import TLRUCache


@dataclass(frozen=True, slots=True)
class VerifiedToken:
    """A token's signature, verified with ``key`` for ``alg``, and its decoded claims."""

    alg: str
    key: Any  # the key object (or HMAC secret) the signature was verified with
    claims: Mapping[str, Any]
    expires: float  # the token's exp: the entry is dropped then


def _until_expiry(_token: str, entry: VerifiedToken, _now: float) -> float:
    return entry.expires


class VerifiedTokens:
    """At most ``size`` admitted tokens by their exact text, each until its ``exp``; ``size`` 0 keeps none."""

    def __init__(self, size: int, *, clock: Callable[[], float] = time.time) -> None:
        self.size = size
        self._entries: TLRUCache[str, VerifiedToken] | None = (
            TLRUCache(maxsize=size, ttu=_until_expiry, timer=clock) if size > 0 else None
        )

    def claims(self, token: str, alg: str, key: Any) -> Mapping[str, Any] | None:
        """The claims of ``token`` if its signature was verified with this ``alg`` and an equal ``key``."""
        if self._entries is None:
            return None
        entry = self._entries.get(token)
        if entry is None or entry.alg != alg:
            return None
        # The route table (and every key object in it) is rebuilt every second: keys are compared by value
        # (cryptography compares public keys' numbers; an HMAC secret is bytes).
        if entry.key is not key and entry.key != key:
            return None
        return entry.claims

    def remember(self, token: str, alg: str, key: Any, claims: Mapping[str, Any], expires: float) -> None:
        """Keep ``token``, admitted with ``key``, until ``expires`` (its ``exp``; one already past is not kept)."""
        if self._entries is not None:
            self._entries[token] = VerifiedToken(alg=alg, key=key, claims=claims, expires=expires)

    def __len__(self) -> int:
        return 0 if self._entries is None else len(self._entries)

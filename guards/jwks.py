"""Keys from a guard's ``jwks_url``: fetched, cached, refreshed on an unknown ``kid`` (SPEC 4.1).

One cache per process, shared by every guard naming the same URL. A refresh
is single-flight and rate-limited (at most one attempt per URL every
``min_refresh_seconds``, failed or not), so a stream of tokens with made-up
``kid`` values cannot turn the gateway against the identity provider. When a
refresh fails the last good keys stay in use. No Django here.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .jws import MalformedToken, header_read, token_split
from .policy import ASYMMETRIC_ALGORITHMS, PolicyError, VerifyingKey, jwk_parse

logger = logging.getLogger("sluice.guards")

MAX_JWKS_BYTES = 1024 * 1024
FETCH_TIMEOUT_SECONDS = 5.0


class KeysUnavailable(Exception):
    """The JWKS URL has never answered with usable keys."""


def jwks_download(url: str) -> bytes:
    """The JWKS document at ``url`` (blocking; run it in a thread)."""
    request = urllib.request.Request(url, headers={"accept": "application/json"})
    # The policy allows only https (or http to loopback), so urlopen sees no file: or ftp: URL.
    with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT_SECONDS) as response:
        body: bytes = response.read(MAX_JWKS_BYTES + 1)
    if len(body) > MAX_JWKS_BYTES:
        raise ValueError(f"JWKS larger than {MAX_JWKS_BYTES} bytes")
    return body


_INFERRED_ALG: dict[tuple[Any, Any], str] = {
    ("EC", "P-256"): "ES256",
    ("EC", "P-384"): "ES384",
    ("OKP", "Ed25519"): "EdDSA",
    ("RSA", None): "RS256",
}


def jwks_parse(document: bytes, url: str = "") -> tuple[VerifyingKey, ...]:
    """The signing keys of a JWKS document; keys that are not for signatures or do not parse are skipped."""
    parsed = json.loads(document)
    if not isinstance(parsed, dict) or not isinstance(parsed.get("keys"), list):
        raise ValueError('not a JWKS document ({"keys": [...]})')
    keys: list[VerifyingKey] = []
    for jwk in parsed["keys"]:
        if not isinstance(jwk, dict) or jwk.get("use", "sig") != "sig":
            continue
        if "alg" not in jwk:
            # Many providers omit alg; the key type decides it (RSA keys are taken as RS256).
            kty = jwk.get("kty")
            alg = _INFERRED_ALG.get((kty, None if kty == "RSA" else jwk.get("crv")))
            if alg is None:
                continue
            jwk = {**jwk, "alg": alg}
        try:
            keys.append(jwk_parse(jwk, ASYMMETRIC_ALGORITHMS))
        except PolicyError as exc:
            logger.warning("jwks %s: key skipped: %s", url, exc)
    return tuple(keys)


@dataclass
class _Entry:
    keys: tuple[VerifyingKey, ...] = ()
    fetched: float | None = None  # last success
    attempted: float | None = None  # last attempt, failed or not

    def has(self, kid: str) -> bool:
        return any(key.kid == kid for key in self.keys)


class JwksCache:
    """Per-URL keys, refreshed when older than ``max_age_seconds`` or on an unknown ``kid``."""

    def __init__(
        self,
        *,
        download: Callable[[str], bytes] = jwks_download,
        max_age_seconds: float = 300.0,
        min_refresh_seconds: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.download = download
        self.max_age_seconds = max_age_seconds
        self.min_refresh_seconds = min_refresh_seconds
        self.clock = clock
        self._entries: dict[str, _Entry] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    def _wants_refresh(self, entry: _Entry, kid: str | None) -> bool:
        now = self.clock()
        if entry.attempted is not None and now - entry.attempted < self.min_refresh_seconds:
            return False
        if entry.fetched is None or now - entry.fetched >= self.max_age_seconds:
            return True
        return kid is not None and not entry.has(kid)

    async def keys(self, url: str, kid: str | None) -> tuple[VerifyingKey, ...]:
        """The keys at ``url``, fetched first if stale, missing, or lacking ``kid`` (rate permitting)."""
        entry = self._entries.setdefault(url, _Entry())
        lock = self._locks.setdefault(url, asyncio.Lock())
        if lock.locked() or self._wants_refresh(entry, kid):  # a fetch under way is waited for
            async with lock:
                if self._wants_refresh(entry, kid):  # another request may have refreshed meanwhile
                    await self._refresh(url, entry)
        if entry.fetched is None:
            raise KeysUnavailable(f"no keys could be fetched from {url}")
        return entry.keys

    async def _refresh(self, url: str, entry: _Entry) -> None:
        entry.attempted = self.clock()
        try:
            document = await asyncio.to_thread(self.download, url)
            keys = jwks_parse(document, url)
        except Exception as exc:  # any failure keeps the last good keys
            logger.warning(
                "jwks %s: fetch failed (%s: %s); keeping %d cached keys", url, type(exc).__name__, exc, len(entry.keys)
            )
            return
        entry.keys, entry.fetched = keys, self.clock()
        logger.info("jwks %s: %d keys (%s)", url, len(keys), ", ".join(key.kid for key in keys))


@functools.cache
def jwks_cache() -> JwksCache:
    """This process's cache, made on first use (``jwks_cache.cache_clear()`` starts a new one)."""
    return JwksCache()


def token_kid(token: str) -> str | None:
    """The ``kid`` a token names (unverified; only used to decide whether to refresh)."""
    try:
        kid = header_read(token_split(token)[0]).get("kid")
    except MalformedToken:
        return None
    return kid if isinstance(kid, str) else None

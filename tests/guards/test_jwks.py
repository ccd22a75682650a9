"""The JWKS cache: fetched once, refreshed when stale or on an unknown kid, rate-limited, single-flight."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from guards.jwks import JwksCache, KeysUnavailable, jwks_parse
from guards.policy import policy_compile
from guards.verification import TokenRejected, token_verify
from tests.support.tokens import ec_key, ed_key, guard_fields, mint, rsa_key

URL = "https://issuer.test/jwks"


class FakeIdp:
    """A download function with a document that can change or fail, counting calls; and a clock."""

    def __init__(self, *keys: dict[str, Any]) -> None:
        self.document: dict[str, Any] | None = {"keys": list(keys)}
        self.calls = 0
        self.now = 1000.0

    def download(self, url: str) -> bytes:
        self.calls += 1
        if self.document is None:
            raise OSError("connection refused")
        return json.dumps(self.document).encode()

    def clock(self) -> float:
        return self.now


def cache_for(idp: FakeIdp) -> JwksCache:
    return JwksCache(download=idp.download, clock=idp.clock, max_age_seconds=300, min_refresh_seconds=30)


def kids(keys: tuple[Any, ...]) -> list[str]:
    return [key.kid for key in keys]


async def test_fetched_once_then_cached() -> None:
    idp = FakeIdp(rsa_key().jwk())
    cache = cache_for(idp)
    assert kids(await cache.keys(URL, "rsa-1")) == ["rsa-1"]
    assert kids(await cache.keys(URL, "rsa-1")) == ["rsa-1"]
    assert idp.calls == 1


async def test_unknown_kid_refreshes_but_at_most_once_per_interval() -> None:
    idp = FakeIdp(rsa_key().jwk())
    cache = cache_for(idp)
    await cache.keys(URL, "rsa-1")
    idp.document = {"keys": [rsa_key().jwk(), rsa_key("rsa-2").jwk()]}
    idp.now += 5
    assert kids(await cache.keys(URL, "rsa-2")) == ["rsa-1"]  # too soon: rate-limited
    assert kids(await cache.keys(URL, "made-up")) == ["rsa-1"]
    assert idp.calls == 1
    idp.now += 30
    assert kids(await cache.keys(URL, "rsa-2")) == ["rsa-1", "rsa-2"]
    assert idp.calls == 2


async def test_stale_keys_are_refreshed() -> None:
    idp = FakeIdp(rsa_key().jwk())
    cache = cache_for(idp)
    await cache.keys(URL, None)
    idp.document = {"keys": [ec_key().jwk()]}
    idp.now += 301
    assert kids(await cache.keys(URL, None)) == ["ec-1"]


async def test_failed_refresh_keeps_the_last_good_keys() -> None:
    idp = FakeIdp(rsa_key().jwk())
    cache = cache_for(idp)
    await cache.keys(URL, None)
    idp.document = None
    idp.now += 301
    assert kids(await cache.keys(URL, None)) == ["rsa-1"]
    assert idp.calls == 2


async def test_never_fetched_is_unavailable_and_retried_only_after_the_interval() -> None:
    idp = FakeIdp()
    idp.document = None
    cache = cache_for(idp)
    with pytest.raises(KeysUnavailable):
        await cache.keys(URL, "rsa-1")
    with pytest.raises(KeysUnavailable):
        await cache.keys(URL, "rsa-1")
    assert idp.calls == 1
    idp.document = {"keys": [rsa_key().jwk()]}
    idp.now += 30
    assert kids(await cache.keys(URL, "rsa-1")) == ["rsa-1"]


async def test_concurrent_requests_share_one_fetch() -> None:
    idp = FakeIdp(rsa_key().jwk())
    cache = cache_for(idp)
    results = await asyncio.gather(*(cache.keys(URL, "rsa-1") for _ in range(20)))
    assert all(kids(keys) == ["rsa-1"] for keys in results)
    assert idp.calls == 1


def test_parse_skips_encryption_private_and_broken_keys_and_infers_alg() -> None:
    no_alg = {k: v for k, v in rsa_key().jwk().items() if k != "alg"}
    ec_no_alg = {k: v for k, v in ec_key().jwk().items() if k != "alg"}
    document = {
        "keys": [
            no_alg,
            ec_no_alg,
            ed_key().jwk(),
            {**rsa_key("enc").jwk(), "use": "enc"},
            {**rsa_key("priv").jwk(), "d": "x"},
            {"kty": "RSA", "kid": "broken", "alg": "RS256", "n": "%", "e": "AQAB"},
            {"kty": "oct", "kid": "hmac", "k": "c2VjcmV0"},
            "junk",
        ]
    }
    keys = jwks_parse(json.dumps(document).encode())
    assert [(key.kid, key.alg) for key in keys] == [("rsa-1", "RS256"), ("ec-1", "ES256"), ("ed-1", "EdDSA")]


def test_parse_refuses_what_is_not_a_jwks() -> None:
    with pytest.raises(ValueError, match="JWKS"):
        jwks_parse(b'[{"kty": "RSA"}]')


def test_fetched_keys_verify_and_keep_the_alg_binding() -> None:
    policy = policy_compile(name="g", **guard_fields(keys=[], jwks_url=URL, algorithms=["RS256", "ES256"], secret=""))
    fetched = jwks_parse(json.dumps({"keys": [rsa_key().jwk(), ec_key().jwk()]}).encode())
    assert token_verify(policy, mint(), fetched=fetched).identity == "alice"
    with pytest.raises(TokenRejected) as caught:
        token_verify(policy, mint(ec_key(), kid="rsa-1"), fetched=fetched)
    assert caught.value.reason == "alg_mismatch"
    with pytest.raises(TokenRejected) as caught:
        token_verify(policy, mint())
    assert caught.value.reason == "unknown_kid"

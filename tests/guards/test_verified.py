"""Admitted tokens remembered per worker: only the signature check is skipped, never a claim or the key's choice."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from guards import verification
from guards.policy import GuardPolicy, policy_compile
from guards.verification import TokenRejected, token_verify
from guards.verified import VerifiedTokens
from streams.core.errors import InsufficientRoles, InvalidToken
from streams.edge.authorization.admission import stream_admit, verified_tokens
from tests.support.route_specs import route_spec
from tests.support.tokens import SECRET, KeyPair, ec_key, guard_fields, mint, mint_hs256, rsa_key


def policy(**overrides: Any) -> GuardPolicy:
    """A policy compiled anew, as every route table is: its key objects are new ones."""
    return policy_compile(name="g", **guard_fields(**overrides))


@pytest.fixture
def signatures(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The algorithms of the signatures checked (each call to the real check)."""
    checked: list[str] = []
    real = verification.signature_valid

    def counted(alg: str, key: Any, signing_input: bytes, signature: bytes) -> bool:
        checked.append(alg)
        return real(alg, key, signing_input, signature)

    monkeypatch.setattr(verification, "signature_valid", counted)
    return checked


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The claims' clock, moved by setting its one item (the cache's clock is given apart)."""
    now = [time.time()]
    monkeypatch.setattr(verification, "time", SimpleNamespace(time=lambda: now[0]))
    return now


def rejected(token: str, guard: GuardPolicy, verified: VerifiedTokens) -> str:
    with pytest.raises(TokenRejected) as caught:
        token_verify(guard, token, verified=verified)
    return caught.value.reason


def test_a_token_presented_again_is_not_verified_again(signatures: list[str]) -> None:
    verified = VerifiedTokens(10)
    token = mint(ec_key())
    first = token_verify(policy(), token, verified=verified)
    again = token_verify(policy(), token, verified=verified)
    assert again == first
    assert signatures == ["ES256"]
    assert len(verified) == 1


def test_each_distinct_token_is_verified(signatures: list[str]) -> None:
    verified = VerifiedTokens(10)
    alice, bob = mint(ec_key(), sub="alice"), mint(ec_key(), sub="bob")
    assert token_verify(policy(), alice, verified=verified).identity == "alice"
    assert token_verify(policy(), bob, verified=verified).identity == "bob"
    assert token_verify(policy(), bob, verified=verified).identity == "bob"
    assert signatures == ["ES256", "ES256"]


def test_a_token_differing_in_its_signature_is_checked_and_refused() -> None:
    verified = VerifiedTokens(10)
    token = mint(ec_key())
    token_verify(policy(), token, verified=verified)
    head, _, signature = token.rpartition(".")
    forged = f"{head}.{signature[:-4]}{'AAAA' if signature[-4:] != 'AAAA' else 'BBBB'}"
    assert rejected(forged, policy(), verified) in ("bad_signature", "malformed_token")
    assert len(verified) == 1


def test_refused_tokens_are_not_remembered(signatures: list[str]) -> None:
    verified = VerifiedTokens(10)
    wrong_audience = mint(ec_key(), aud="someone-else")
    assert rejected(wrong_audience, policy(), verified) == "wrong_audience"
    assert rejected(wrong_audience, policy(), verified) == "wrong_audience"
    assert rejected(mint_hs256("another-secret-that-is-also-32-bytes-long"), policy(), verified) == "bad_signature"
    assert rejected(mint(ec_key(), exp=int(time.time()) - 10), policy(), verified) == "expired"
    assert len(verified) == 0
    assert signatures == ["ES256", "ES256", "HS256", "ES256"]


def test_claims_are_checked_on_every_request_expiry_first(clock: list[float]) -> None:
    verified = VerifiedTokens(10, clock=lambda: 0.0)  # the entry itself never expires here
    token = mint(ec_key(), exp=int(clock[0]) + 60)
    token_verify(policy(), token, verified=verified)
    clock[0] += 61
    assert len(verified) == 1
    assert rejected(token, policy(), verified) == "expired"


def test_an_entry_is_dropped_at_the_tokens_exp() -> None:
    now = [time.time()]
    verified = VerifiedTokens(10, clock=lambda: now[0])
    token = mint(ec_key(), exp=int(now[0]) + 60)
    principal = token_verify(policy(), token, verified=verified)
    key = policy().keys[1].key
    assert verified.claims(token, "ES256", key) is not None
    now[0] = principal.expires
    assert verified.claims(token, "ES256", key) is None
    verified.remember("other", "ES256", key, {}, now[0] + 60)  # a write sweeps out what has expired
    assert len(verified) == 1


def test_a_token_admitted_within_the_leeway_after_its_exp_is_not_remembered() -> None:
    verified = VerifiedTokens(10)
    token = mint(ec_key(), exp=int(time.time()) - 10)
    assert token_verify(policy(leeway=30), token, verified=verified).identity == "alice"
    assert len(verified) == 0


def test_the_number_kept_is_bounded_least_recently_used_first(signatures: list[str]) -> None:
    verified = VerifiedTokens(3)
    tokens = [mint(ec_key(), sub=f"user-{n}") for n in range(5)]
    for token in tokens:
        token_verify(policy(), token, verified=verified)
    assert len(verified) == 3
    signatures.clear()
    token_verify(policy(), tokens[4], verified=verified)
    assert signatures == []
    token_verify(policy(), tokens[0], verified=verified)
    assert signatures == ["ES256"]
    assert len(verified) == 3


def test_size_zero_keeps_nothing(signatures: list[str]) -> None:
    verified = VerifiedTokens(0)
    token = mint(ec_key())
    token_verify(policy(), token, verified=verified)
    token_verify(policy(), token, verified=verified)
    assert signatures == ["ES256", "ES256"]
    assert len(verified) == 0


def test_a_key_replaced_under_the_same_kid_verifies_again() -> None:
    verified = VerifiedTokens(10)
    token = mint(ec_key())
    token_verify(policy(), token, verified=verified)
    private = ec.generate_private_key(ec.SECP256R1())
    replaced = KeyPair(ec_key().kid, "ES256", private, private.public_key())
    assert rejected(token, policy(keys=[replaced.jwk()]), verified) == "bad_signature"


def test_a_key_removed_from_the_guard_refuses_the_token() -> None:
    verified = VerifiedTokens(10)
    token = mint(ec_key())
    token_verify(policy(), token, verified=verified)
    assert rejected(token, policy(keys=[rsa_key().jwk()]), verified) == "unknown_kid"
    assert rejected(token, policy(algorithms=["RS256"], keys=[rsa_key().jwk()]), verified) == "alg_not_allowed"


def test_a_rotated_hmac_secret_verifies_again() -> None:
    verified = VerifiedTokens(10)
    token = mint_hs256()
    token_verify(policy(), token, verified=verified)
    other = "another-secret-that-is-also-32-bytes-long"
    assert other != SECRET
    assert rejected(token, policy(secret=other), verified) == "bad_signature"


def test_the_current_policy_reads_the_claims(signatures: list[str]) -> None:
    verified = VerifiedTokens(10)
    token = mint(ec_key(), sub="alice", tenant="acme")
    token_verify(policy(), token, verified=verified)
    assert rejected(token, policy(issuer="https://other.test"), verified) == "wrong_issuer"
    assert rejected(token, policy(audience="other"), verified) == "wrong_audience"
    principal = token_verify(policy(identity_claim="tenant", roles_claim="roles"), token, verified=verified)
    assert (principal.identity, principal.roles) == ("acme", frozenset())
    assert signatures == ["ES256"]


async def test_admission_takes_a_token_admitted_before_and_still_checks_roles(signatures: list[str]) -> None:
    verified_tokens.cache_clear()
    token = mint(ec_key(), sub="carol", scope="read:items")
    reader = route_spec(guard=policy(), roles=("read:items",))
    writer = route_spec(guard=policy(), roles=("write:items",))
    scope = {"type": "http", "path": "/secure", "headers": [(b"authorization", f"Bearer {token}".encode())]}
    for _ in range(2):
        principal = await stream_admit(reader, scope, {})
        assert principal is not None
        assert principal.identity == "carol"
    with pytest.raises(InsufficientRoles):
        await stream_admit(writer, scope, {})
    with pytest.raises(InvalidToken):
        await stream_admit(route_spec(guard=policy(keys=[rsa_key().jwk()]), roles=("read:items",)), scope, {})
    assert signatures == ["ES256"]
    verified_tokens.cache_clear()

"""Token verification against a compiled policy: every reason a token is refused, and what a good one yields."""

from __future__ import annotations

import json
import time
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from guards.policy import GuardPolicy, policy_compile
from guards.verification import TokenRejected, claim_lookup, roles_read, token_verify
from tests.support.tokens import (
    AUDIENCE,
    ISSUER,
    ec_key,
    ed_key,
    guard_fields,
    mint,
    mint_hs256,
    mint_unsigned,
    rsa_key,
)


def policy(**overrides: Any) -> GuardPolicy:
    return policy_compile(name="g", **guard_fields(**overrides))


def rejected(token: str, guard: GuardPolicy | None = None) -> str:
    with pytest.raises(TokenRejected) as caught:
        token_verify(guard or policy(), token)
    return caught.value.reason


@pytest.mark.parametrize("key", [rsa_key, ec_key, ed_key], ids=["RS256", "ES256", "EdDSA"])
def test_valid_asymmetric_token_yields_principal(key: Any) -> None:
    principal = token_verify(policy(), mint(key()))
    assert principal.guard == "g"
    assert principal.identity == "alice"
    assert principal.roles == {"read:items", "write:items"}
    assert principal.expires > time.time()


def test_valid_hs256_token_uses_the_secret() -> None:
    assert token_verify(policy(), mint_hs256()).identity == "alice"


def test_hs256_with_another_secret_is_a_bad_signature() -> None:
    assert rejected(mint_hs256("another-secret-that-is-also-32-bytes-long")) == "bad_signature"


def test_expired() -> None:
    assert rejected(mint(exp=int(time.time()) - 10)) == "expired"


def test_not_yet_valid() -> None:
    assert rejected(mint(nbf=int(time.time()) + 60)) == "not_yet_valid"


def test_issued_in_the_future_is_not_yet_valid() -> None:
    assert rejected(mint(iat=int(time.time()) + 60)) == "not_yet_valid"


def test_leeway_admits_a_token_expired_within_it() -> None:
    token = mint(exp=int(time.time()) - 10)
    assert token_verify(policy(leeway=30), token).identity == "alice"
    assert rejected(token, policy(leeway=5)) == "expired"


def test_leeway_admits_nbf_within_it() -> None:
    token = mint(nbf=int(time.time()) + 10)
    assert token_verify(policy(leeway=30), token).identity == "alice"


def test_missing_exp_is_refused() -> None:
    assert rejected(mint(exp=None)) == "missing_claim"


@pytest.mark.parametrize(("claim", "value"), [("iss", "https://evil.test"), ("iss", None)])
def test_wrong_issuer(claim: str, value: Any) -> None:
    assert rejected(mint(**{claim: value})) == "wrong_issuer"


@pytest.mark.parametrize("value", ["someone-else", ["a", "b"], None])
def test_wrong_audience(value: Any) -> None:
    assert rejected(mint(aud=value)) == "wrong_audience"


def test_audience_list_containing_ours_is_accepted() -> None:
    assert token_verify(policy(), mint(aud=["other", "sluice-tests"])).identity == "alice"


def test_blank_issuer_and_audience_are_not_checked() -> None:
    token = mint(iss="anyone", aud="anything")
    assert token_verify(policy(issuer="", audience=""), token).identity == "alice"


def test_unknown_kid() -> None:
    assert rejected(mint(kid="rotated-away")) == "unknown_kid"


def test_no_kid_with_a_single_key_uses_it() -> None:
    single = policy(keys=[rsa_key().jwk()], algorithms=["RS256"], secret="")
    assert token_verify(single, mint(kid=None)).identity == "alice"


def test_no_kid_with_several_keys_is_unknown() -> None:
    assert rejected(mint(kid=None)) == "unknown_kid"


def test_alg_mismatch_between_header_and_key() -> None:
    # Signed with the EC key but naming the RSA key's kid: the key's alg decides.
    assert rejected(mint(ec_key(), kid=rsa_key().kid)) == "alg_mismatch"


def test_alg_not_in_the_allowed_list() -> None:
    assert rejected(mint(ec_key()), policy(algorithms=["RS256"], keys=[rsa_key().jwk()], secret="")) == (
        "alg_not_allowed"
    )


def test_alg_none_is_refused_even_with_valid_claims() -> None:
    assert rejected(mint_unsigned()) == "alg_not_allowed"


def test_tampered_signature() -> None:
    head, body, signature = mint().split(".")
    flipped = ("A" if signature[10] != "A" else "B").join((signature[:10], signature[11:]))
    assert rejected(f"{head}.{body}.{flipped}") == "bad_signature"


def test_tampered_payload() -> None:
    head, _, signature = mint().split(".")
    _, forged_body, _ = mint(sub="mallory").split(".")
    assert rejected(f"{head}.{forged_body}.{signature}") == "bad_signature"


def test_key_confusion_rs256_to_hs256_with_the_key_id() -> None:
    """The RSA public key PEM as an HMAC secret, naming the RSA kid: refused as an alg mismatch."""
    token = mint_hs256(rsa_key().public_pem(), kid=rsa_key().kid)
    assert rejected(token) == "alg_mismatch"


def test_key_confusion_rs256_to_hs256_without_key_id() -> None:
    """Without a kid the HS256 path uses only the guard's secret, so the PEM-signed token does not verify."""
    assert rejected(mint_hs256(rsa_key().public_pem())) == "bad_signature"


def test_key_confusion_when_hs256_is_not_allowed() -> None:
    rsa_only = policy(algorithms=["RS256"], keys=[rsa_key().jwk()], secret="")
    assert rejected(mint_hs256(rsa_key().public_pem(), kid=rsa_key().kid), rsa_only) == "alg_not_allowed"


def test_jku_and_x5u_are_ignored() -> None:
    """A header pointing at the attacker's keys changes nothing: only inline keys verify."""
    attacker = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    headers = {"kid": rsa_key().kid, "jku": "https://evil.test/jwks", "x5u": "https://evil.test/cert"}
    token = jwt.encode(
        {"iss": "https://issuer.test", "aud": "sluice-tests", "sub": "x", "exp": int(time.time()) + 60},
        attacker,
        algorithm="RS256",
        headers=headers,
    )
    assert rejected(token) == "bad_signature"


@pytest.mark.parametrize("token", ["", "not-a-jwt", "a.b.c", "e30.e30."])
def test_malformed(token: str) -> None:
    assert rejected(token) in {"malformed_token", "alg_not_allowed"}


def test_missing_identity_claim() -> None:
    assert rejected(mint(sub=None)) == "missing_claim"


def test_identity_from_another_claim() -> None:
    assert token_verify(policy(identity_claim="email"), mint(email="a@example.com")).identity == "a@example.com"


def test_roles_as_string_list_and_dotted_path() -> None:
    assert token_verify(policy(roles_claim="scope"), mint(scope="a  b\tc")).roles == {"a", "b", "c"}
    assert token_verify(policy(roles_claim="roles"), mint(roles=["x", "y"])).roles == {"x", "y"}
    nested = mint(realm_access={"roles": ["admin", "reader"]})
    assert token_verify(policy(roles_claim="realm_access.roles"), nested).roles == {"admin", "reader"}


def test_roles_missing_or_odd_grant_nothing() -> None:
    assert token_verify(policy(roles_claim="roles"), mint()).roles == frozenset()
    assert roles_read({"roles": 7}, "roles") == frozenset()
    assert roles_read({"roles": ["a", 1, None]}, "roles") == {"a"}


def test_grants_needs_every_role() -> None:
    principal = token_verify(policy(), mint(scope="read:items"))
    assert principal.grants(("read:items",))
    assert not principal.grants(("read:items", "write:items"))
    assert principal.grants(())


def test_attributes_from_claim_paths() -> None:
    guard = policy(attributes={"tenant": "org.id", "level": "level", "absent": "nope"})
    principal = token_verify(guard, mint(org={"id": "acme"}, level=3))
    assert principal.attributes == {"tenant": "acme", "level": "3"}


def test_claim_lookup_prefers_a_literal_dotted_name() -> None:
    assert claim_lookup({"a.b": 1, "a": {"b": 2}}, "a.b") == 1
    assert claim_lookup({"a": {"b": 2}}, "a.b") == 2


@pytest.mark.parametrize("alg", ["RS384", "RS512", "PS256", "ES384"])
def test_other_allowed_algorithms_verify(alg: str) -> None:
    if alg.startswith("ES"):
        private: Any = ec.generate_private_key(ec.SECP384R1())
        jwk = ECAlgorithm.to_jwk(private.public_key(), as_dict=True)
    else:
        private = rsa_key().private
        jwk = RSAAlgorithm.to_jwk(rsa_key().public, as_dict=True)
    guard = policy(algorithms=[alg], keys=[{**jwk, "kid": "k", "alg": alg}], secret="")
    token = jwt.encode(
        {"iss": ISSUER, "aud": AUDIENCE, "sub": "a", "exp": int(time.time()) + 60}, private, alg, {"kid": "k"}
    )
    assert token_verify(guard, token).identity == "a"


def test_an_oversized_token_is_refused_unread() -> None:
    from guards.verification import MAX_TOKEN_BYTES

    huge = mint(pad="x" * MAX_TOKEN_BYTES)
    assert len(huge) > MAX_TOKEN_BYTES
    assert rejected(huge) == "oversized"
    assert rejected("a" * 1_000_000) == "oversized"
    # Just under the bound is verified as usual.
    assert token_verify(policy(), mint(pad="x" * 2000)).identity == "alice"


@pytest.mark.parametrize(
    "kid",
    [
        "../../etc/passwd",
        "/dev/null",
        "' OR '1'='1",
        "x'; DROP TABLE guards_guard; --",
        "rsa-1\x00",
        "rsa-1/../rsa-1",
        "%2e%2e%2f",
        "*",
        " ",
    ],
)
def test_kid_tricks_name_no_key(kid: str) -> None:
    """A kid is only ever compared with the guard's own keys' kids: never a path, a query or a pattern."""
    assert rejected(mint(kid=kid)) in {"unknown_kid", "bad_signature"}
    # An HMAC token with the trick as kid is checked against the guard's secret, not anything the kid names.
    assert rejected(mint_hs256("a-secret-the-attacker-chose-32-bytes!!", kid=kid)) == "bad_signature"


def test_a_kid_that_is_not_a_string_is_malformed() -> None:
    from tests.support.tokens import b64

    header = b64(json.dumps({"alg": "RS256", "kid": 7}).encode())
    body = b64(json.dumps({"sub": "x", "exp": int(time.time()) + 60}).encode())
    assert rejected(f"{header}.{body}.{b64(b'signature')}") == "malformed_token"


def test_embedded_jwk_header_is_ignored() -> None:
    """A token carrying its own key (``jwk`` header) is verified with the guard's keys, not that one."""
    attacker = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = RSAAlgorithm.to_jwk(attacker.public_key(), as_dict=True)
    token = jwt.encode(
        {"iss": ISSUER, "aud": AUDIENCE, "sub": "x", "exp": int(time.time()) + 60},
        attacker,
        algorithm="RS256",
        headers={"kid": rsa_key().kid, "jwk": jwk},
    )
    assert rejected(token) == "bad_signature"


def _signed(header: dict[str, Any], body: Any, secret: bytes = b"") -> str:
    """A token with any header and body, HS256-signed with ``secret`` (the guard's secret by default)."""
    import hashlib
    import hmac

    from tests.support.tokens import SECRET, b64

    signing = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(body).encode())}"
    digest = hmac.new(secret or SECRET.encode(), signing.encode(), hashlib.sha256).digest()
    return f"{signing}.{b64(digest)}"


def _body(**claim: Any) -> dict[str, Any]:
    return {"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "exp": int(time.time()) + 60, **claim}


@pytest.mark.parametrize(
    "header",
    [
        {"alg": "HS256", "crit": ["exp"]},
        {"alg": "HS256", "crit": []},
        {"alg": "HS256", "crit": "b64"},
        {"alg": "HS256", "b64": False, "crit": ["b64"]},
    ],
    ids=["unknown-extension", "empty-crit", "crit-not-a-list", "detached-payload"],
)
def test_critical_extensions_and_detached_payloads_are_malformed(header: dict[str, Any]) -> None:
    assert rejected(_signed(header, _body())) == "malformed_token"


@pytest.mark.parametrize(
    ("claim", "reason"),
    [
        ({"exp": "soon"}, "malformed_token"),
        ({"nbf": "later"}, "malformed_token"),
        ({"iat": [1]}, "invalid_token"),
        ({"sub": 7}, "invalid_token"),
        ({"jti": 7}, "invalid_token"),
        ({"aud": 7}, "wrong_audience"),
        ({"aud": ["sluice-tests", 7]}, "wrong_audience"),
        ({"aud": []}, "wrong_audience"),
        ({"iss": 7}, "wrong_issuer"),
        ({"exp": None}, "missing_claim"),
    ],
)
def test_registered_claims_of_the_wrong_type(claim: dict[str, Any], reason: str) -> None:
    assert rejected(_signed({"alg": "HS256"}, _body(**claim))) == reason


def test_a_payload_that_is_not_an_object_is_malformed() -> None:
    assert rejected(_signed({"alg": "HS256"}, [1, 2])) == "malformed_token"


def test_a_signature_that_is_not_base64url_is_malformed() -> None:
    head, body, _ = mint_hs256().split(".")
    assert rejected(f"{head}.{body}.!!!") == "malformed_token"


def test_an_ec_key_of_another_curve_does_not_fit_es256() -> None:
    from guards.policy import VerifyingKey

    p384 = ec.generate_private_key(ec.SECP384R1()).public_key()
    guard = GuardPolicy(name="g", algorithms=("ES256",), keys=(VerifyingKey(kid="k", alg="ES256", key=p384),))
    token = jwt.encode(_body(), ec.generate_private_key(ec.SECP256R1()), "ES256", {"kid": "k"})
    assert rejected(token, guard) == "alg_mismatch"


def test_a_pem_text_as_hmac_secret_does_not_fit() -> None:
    secret = rsa_key().public_pem()
    guard = GuardPolicy(name="g", algorithms=("HS256",), secret=secret)
    assert rejected(mint_hs256(secret), guard) == "alg_mismatch"


def test_the_same_header_segment_is_verified_each_time_with_its_own_signature() -> None:
    """The parsed header is cached by its segment; the signature and claims never are."""
    good = mint_hs256()
    assert token_verify(policy(), good).identity == "alice"
    assert rejected(mint_hs256("another-secret-that-is-also-32-bytes-long")) == "bad_signature"
    assert token_verify(policy(), good).identity == "alice"

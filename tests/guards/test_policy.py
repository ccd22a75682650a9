"""Policy checks: what the admin and ``guard_upsert`` refuse, and what a usable policy compiles to."""

from __future__ import annotations

from typing import Any

import pytest

from guards.policy import PolicyError, policy_compile
from tests.support.tokens import SECRET, ec_key, guard_fields, rsa_key


def compile_error(**overrides: Any) -> PolicyError:
    with pytest.raises(PolicyError) as caught:
        policy_compile(name="g", **guard_fields(**overrides))
    return caught.value


def test_compiles_keys_and_credentials() -> None:
    policy = policy_compile(
        name="g", **guard_fields(header_template="Token {credentials}", query_param="access_token", cookie_name="jwt")
    )
    assert [key.kid for key in policy.keys] == ["rsa-1", "ec-1", "ed-1"]
    assert policy.secret == SECRET.encode()
    assert policy.credentials.header_prefix == "Token "
    assert (policy.credentials.query, policy.credentials.cookie) == ("access_token", "jwt")


def test_jwks_document_is_accepted() -> None:
    policy = policy_compile(name="g", **guard_fields(keys={"keys": [rsa_key().jwk()]}))
    assert [key.kid for key in policy.keys] == ["rsa-1"]


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"algorithms": ["none"]}, "algorithms", "never allowed"),
        ({"algorithms": ["RS256", "NONE"]}, "algorithms", "never allowed"),
        ({"algorithms": ["HS512"]}, "algorithms", "is not allowed"),
        ({"algorithms": []}, "algorithms", "non-empty"),
        ({"algorithms": "RS256"}, "algorithms", "non-empty list"),
        ({"secret": ""}, "secret", "HS256 needs a secret"),
        ({"secret": "short"}, "secret", "at least 32 bytes"),
        ({"keys": [{"kty": "RSA", "kid": "k", "alg": "RS256", "n": "AQAB!", "e": "AQAB"}]}, "keys", "does not parse"),
        ({"keys": [{"kty": "RSA", "alg": "RS256", "n": "x", "e": "AQAB"}]}, "keys", "needs a non-empty 'kid'"),
        ({"keys": [{**rsa_key().jwk(), "alg": "none"}]}, "keys", "never 'none'"),
        ({"keys": [{**rsa_key().jwk(), "alg": "RS1"}]}, "keys", "is not allowed"),
        ({"keys": [{**rsa_key().jwk(), "alg": "HS256"}]}, "keys", "guard's secret"),
        ({"keys": [rsa_key().jwk()], "algorithms": ["ES256"]}, "keys", "not in this guard's algorithms"),
        ({"keys": [{**ec_key().jwk(), "alg": "RS256"}]}, "keys", "does not parse"),
        ({"keys": [rsa_key().jwk(), rsa_key().jwk()]}, "keys", "more than once"),
        ({"keys": [{**rsa_key().jwk(), "d": "secret"}]}, "keys", "private members"),
        ({"keys": ["not a jwk"]}, "keys", "JWK object"),
        ({"keys": [], "algorithms": ["RS256"]}, "keys", "inline keys or a JWKS URL"),
        ({"keys": [], "jwks_url": "http://issuer.test/jwks"}, "jwks_url", "https"),
        ({"roles_claim": "a..b"}, "roles_claim", "not a claim path"),
        ({"identity_claim": ""}, "identity_claim", "not a claim path"),
        ({"attributes": {"1bad": "x"}}, "attributes", "not usable"),
        ({"attributes": ["tenant"]}, "attributes", "object"),
        ({"header_template": "Bearer"}, "header_template", "exactly once"),
        ({"header_name": "", "query_param": "", "cookie_name": ""}, "header_name", "at least one"),
    ],
)
def test_unusable_fields_are_refused_with_the_field_named(overrides: dict[str, Any], field: str, message: str) -> None:
    error = compile_error(**overrides)
    assert error.field == field
    assert message in error.message


@pytest.mark.parametrize("url", ["https://issuer.test/jwks", "http://127.0.0.1:8080/jwks", "http://localhost/jwks"])
def test_jwks_url_alone_satisfies_asymmetric_algorithms(url: str) -> None:
    policy = policy_compile(name="g", **guard_fields(keys=[], jwks_url=url))
    assert policy.keys == ()
    assert policy.jwks_url == url

"""Token -> principal for one guard policy (SPEC 4.2), with PyJWT and no Django.

simplejwt's ``TokenBackend`` is not used: it binds one algorithm to one key
(no per-``kid`` key set), folds every failure but expiry into "Token is
invalid" (the spec wants the reason), and imports Django. The key choice is
ours, and so are the token's parsing and the registered claims' checks (with
PyJWT's rules, see :mod:`guards.jws`); PyJWT's algorithm objects check the signature.
A token admitted before may skip the signature's check (:mod:`guards.verified`);
the key's choice and the claims are checked on every call.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .jws import KeyUnusable, MalformedToken, header_read, payload_read, segment_decode, signature_valid, token_split
from .policy import HMAC_ALGORITHMS, GuardPolicy, VerifyingKey
from .verified import VerifiedTokens

# Real access tokens are a few hundred bytes to a few KB; anything past this is refused unread.
MAX_TOKEN_BYTES = 8 * 1024


class TokenRejected(Exception):
    """A token the guard refuses. ``reason`` is stable (it reaches the JSON body); ``detail`` is for people."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a verified token speaks for, and what it grants."""

    guard: str
    identity: str
    roles: frozenset[str]
    attributes: Mapping[str, str] = field(default_factory=dict)
    expires: int = 0

    def grants(self, roles: tuple[str, ...] | frozenset[str]) -> bool:
        return all(role in self.roles for role in roles)


_MISSING = object()


def claim_lookup(claims: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted path (``realm_access.roles``); a top-level claim named with dots wins."""
    if path in claims:
        return claims[path]
    value: Any = claims
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return _MISSING
        value = value[part]
    return value


def roles_read(claims: Mapping[str, Any], path: str) -> frozenset[str]:
    """A string is split on whitespace (OAuth ``scope``), a list used as is; anything else grants nothing."""
    value = claim_lookup(claims, path)
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, list):
        return frozenset(item for item in value if isinstance(item, str))
    return frozenset()


def _scalar_text(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    return None


def _key_select(policy: GuardPolicy, header: Mapping[str, Any], fetched: tuple[VerifyingKey, ...]) -> tuple[str, Any]:
    """The algorithm and key to verify with; only ``alg`` and ``kid`` are read (never ``jku``, ``x5u``, ``jwk``)."""
    alg = header.get("alg")
    if not isinstance(alg, str) or alg.lower() == "none":
        raise TokenRejected("alg_not_allowed", "unsigned tokens (alg none) are refused")
    if alg not in policy.algorithms:
        raise TokenRejected("alg_not_allowed", f"alg {alg} is not allowed by this guard")
    kid = header.get("kid")
    if kid is not None and not isinstance(kid, str):
        raise TokenRejected("malformed_token", "kid is not a string")
    keys = policy.keys + fetched
    key = next((k for k in keys if k.kid == kid), None) if kid is not None else None
    if key is not None:
        # The key decides its algorithm: a token claiming HS256 for an RSA key's kid
        # (the RS256 -> HS256 key confusion) stops here.
        if key.alg != alg:
            raise TokenRejected("alg_mismatch", f"key {kid!r} is for {key.alg}, the token says {alg}")
        return alg, key.key
    if alg in HMAC_ALGORITHMS:
        return alg, policy.secret
    if kid is None and len(keys) == 1 and keys[0].alg == alg:
        return alg, keys[0].key  # an issuer with one key often omits kid
    if kid is None:
        raise TokenRejected("unknown_kid", "the token names no kid and the guard has no single key for it")
    raise TokenRejected("unknown_kid", f"no key with kid {kid!r}")


def token_verify(
    policy: GuardPolicy,
    token: str,
    *,
    fetched: tuple[VerifyingKey, ...] = (),
    verified: VerifiedTokens | None = None,
) -> Principal:
    """Verify ``token`` against ``policy`` (and keys ``fetched`` from its JWKS URL) or raise :class:`TokenRejected`.

    ``verified``: tokens admitted before, whose signature is not checked again when the key chosen
    now equals the one they were verified with; the claims are checked on every call.
    """
    if len(token) > MAX_TOKEN_BYTES:
        # Refused before any parsing: decoding and verifying cost grows with the size.
        raise TokenRejected("oversized", f"the token is longer than {MAX_TOKEN_BYTES} bytes")
    try:
        header_segment, payload_segment, signature_segment = token_split(token)
        header = header_read(header_segment)
    except MalformedToken as exc:
        raise TokenRejected("malformed_token", "not a signed JWT") from exc
    alg, key = _key_select(policy, header, fetched)
    remembered = verified.claims(token, alg, key) if verified is not None else None
    claims: Mapping[str, Any] = (
        remembered
        if remembered is not None
        else _signed_claims(token, alg, key, header_segment, payload_segment, signature_segment)
    )
    claims_check(policy, claims, time.time())
    principal = principal_from_claims(policy, claims)
    if verified is not None and remembered is None:
        verified.remember(token, alg, key, claims, principal.expires)
    return principal


def _signed_claims(token: str, alg: str, key: Any, header: str, payload: str, signature: str) -> dict[str, Any]:
    """The payload's claims once ``signature`` is ``alg``'s with ``key`` over the header and payload."""
    try:
        signature_bytes = segment_decode(signature)
        valid = signature_valid(alg, key, token[: len(header) + 1 + len(payload)].encode(), signature_bytes)
    except MalformedToken as exc:
        raise TokenRejected("malformed_token", "the token does not decode") from exc
    except KeyUnusable as exc:
        raise TokenRejected("alg_mismatch", "the token's algorithm does not fit the key") from exc
    if not valid:
        raise TokenRejected("bad_signature", "the signature does not verify")
    try:
        return payload_read(payload)
    except MalformedToken as exc:
        raise TokenRejected("malformed_token", "the token does not decode") from exc


def _time_claim(claims: Mapping[str, Any], name: str, reason: str, detail: str) -> int:
    try:
        return int(claims[name])
    except (ValueError, TypeError, OverflowError):
        raise TokenRejected(reason, detail) from None


def claims_check(policy: GuardPolicy, claims: Mapping[str, Any], now: float) -> None:
    """The registered claims, checked in PyJWT's order and with its rules (exp required, iss and aud if set)."""
    if claims.get("exp") is None:
        raise TokenRejected("missing_claim", "the token has no exp claim")
    leeway = policy.leeway
    if "iat" in claims:
        iat = _time_claim(claims, "iat", "invalid_token", "InvalidIssuedAtError")
        if iat > now + leeway:
            raise TokenRejected("not_yet_valid", "the token is not valid yet")
    if "nbf" in claims and _time_claim(claims, "nbf", "malformed_token", "the token does not decode") > now + leeway:
        raise TokenRejected("not_yet_valid", "the token is not valid yet")
    if _time_claim(claims, "exp", "malformed_token", "the token does not decode") <= now - leeway:
        raise TokenRejected("expired", "the token has expired")
    if policy.issuer:
        if "iss" not in claims:
            raise TokenRejected("wrong_issuer", "the token has no iss claim")
        if claims["iss"] != policy.issuer:
            raise TokenRejected("wrong_issuer", "the issuer (iss) is not the guard's")
    if policy.audience:
        audiences = claims.get("aud")
        if not audiences:
            raise TokenRejected("wrong_audience", "the token has no aud claim")
        if isinstance(audiences, str):
            audiences = [audiences]
        if not isinstance(audiences, list) or any(not isinstance(aud, str) for aud in audiences):
            raise TokenRejected("wrong_audience", "the audience (aud) is not the guard's")
        if policy.audience not in audiences:
            raise TokenRejected("wrong_audience", "the audience (aud) is not the guard's")
    if "sub" in claims and not isinstance(claims["sub"], str):
        raise TokenRejected("invalid_token", "InvalidSubjectError")
    if "jti" in claims and not isinstance(claims["jti"], str):
        raise TokenRejected("invalid_token", "InvalidJTIError")


def principal_from_claims(policy: GuardPolicy, claims: Mapping[str, Any]) -> Principal:
    identity = _scalar_text(claim_lookup(claims, policy.identity_claim))
    if identity is None:
        raise TokenRejected("missing_claim", f"the token has no {policy.identity_claim} claim (identity)")
    attributes: dict[str, str] = {}
    for name, path in policy.attributes.items():
        value = _scalar_text(claim_lookup(claims, path))
        if value is not None:
            attributes[name] = value
    return Principal(
        guard=policy.name,
        identity=identity,
        roles=roles_read(claims, policy.roles_claim),
        attributes=attributes,
        expires=int(claims["exp"]),
    )

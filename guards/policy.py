"""A guard's policy as plain data, and the checks that build it (SPEC 4.1).

No Django here: the stream app verifies tokens against a :class:`GuardPolicy`
compiled once per route table, and the model's validation reuses
:func:`policy_compile` so the admin refuses exactly what the hot path could
not use.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import jwt

# "none" is never allowed; HS256 uses the guard's secret, the others inline keys (or a JWKS URL).
ASYMMETRIC_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "EdDSA")
HMAC_ALGORITHMS = ("HS256",)
ALGORITHMS = ASYMMETRIC_ALGORITHMS + HMAC_ALGORITHMS
HMAC_MIN_SECRET_BYTES = 32  # RFC 7518 3.2: at least the size of the hash output
CREDENTIALS_PLACEHOLDER = "{credentials}"
# Private members of RSA, EC and OKP keys: a guard only ever needs the public half.
_PRIVATE_MEMBERS = ("d", "p", "q", "dp", "dq", "qi", "oth", "k")
LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")
_CLAIM_PATH = re.compile(r"[^.\s]+(\.[^.\s]+)*\Z")
_ATTRIBUTE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class PolicyError(ValueError):
    """A policy field that cannot be used; ``field`` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True, slots=True)
class VerifyingKey:
    """One inline public key, bound to the one algorithm it may verify."""

    kid: str
    alg: str
    key: Any  # a cryptography public key object, prepared by PyJWT


@dataclass(frozen=True, slots=True)
class CredentialSources:
    """Where a request may carry its token; tried cookie, header, query (SPEC 4.1)."""

    cookie: str = ""
    header: str = "authorization"
    header_prefix: str = "Bearer "
    header_suffix: str = ""
    query: str = ""


@dataclass(frozen=True, slots=True)
class GuardPolicy:
    """Everything needed to admit a request, with no database behind it."""

    name: str
    issuer: str = ""
    audience: str = ""
    algorithms: tuple[str, ...] = ("RS256",)
    keys: tuple[VerifyingKey, ...] = ()
    secret: bytes = b""
    jwks_url: str = ""
    roles_claim: str = "scope"
    identity_claim: str = "sub"
    attributes: Mapping[str, str] = field(default_factory=dict)
    challenge: int = 0
    leeway: int = 0
    credentials: CredentialSources = CredentialSources()


def algorithms_check(algorithms: Any) -> tuple[str, ...]:
    if not isinstance(algorithms, list | tuple) or not algorithms:
        raise PolicyError("algorithms", f"Give a non-empty list of algorithms from {', '.join(ALGORITHMS)}.")
    for alg in algorithms:
        if isinstance(alg, str) and alg.lower() == "none":
            raise PolicyError("algorithms", "'none' is never allowed: every token must be signed.")
        if alg not in ALGORITHMS:
            raise PolicyError("algorithms", f"{alg!r} is not allowed; use {', '.join(ALGORITHMS)}.")
    return tuple(dict.fromkeys(algorithms))


def jwk_parse(jwk: Any, allowed: tuple[str, ...]) -> VerifyingKey:
    """One inline JWK: must carry ``kid`` and an allowed asymmetric ``alg``, public members only."""
    if not isinstance(jwk, dict):
        raise PolicyError("keys", "Each key must be a JWK object.")
    kid, alg = jwk.get("kid"), jwk.get("alg")
    if not isinstance(kid, str) or not kid:
        raise PolicyError("keys", "Each key needs a non-empty 'kid'.")
    if not isinstance(alg, str) or alg.lower() == "none":
        raise PolicyError("keys", f"Key {kid!r} needs an 'alg' (and never 'none').")
    if alg in HMAC_ALGORITHMS:
        raise PolicyError("keys", f"Key {kid!r}: {alg} verifies with the guard's secret, not an inline key.")
    if alg not in ASYMMETRIC_ALGORITHMS:
        raise PolicyError("keys", f"Key {kid!r}: alg {alg!r} is not allowed; use {', '.join(ASYMMETRIC_ALGORITHMS)}.")
    if alg not in allowed:
        raise PolicyError("keys", f"Key {kid!r}: alg {alg} is not in this guard's algorithms.")
    private = [name for name in _PRIVATE_MEMBERS if name in jwk]
    if private:
        raise PolicyError("keys", f"Key {kid!r} holds private members ({', '.join(private)}); give the public key.")
    try:
        parsed = jwt.PyJWK(jwk, algorithm=alg)
    except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError, KeyError) as exc:
        raise PolicyError("keys", f"Key {kid!r} does not parse as a {alg} JWK: {exc}") from exc
    return VerifyingKey(kid=kid, alg=alg, key=parsed.key)


def keys_parse(keys: Any, allowed: tuple[str, ...]) -> tuple[VerifyingKey, ...]:
    if keys in (None, ""):
        return ()
    if isinstance(keys, dict) and "keys" in keys:
        keys = keys["keys"]  # a pasted JWKS document
    if not isinstance(keys, list):
        raise PolicyError("keys", 'Give a list of JWKs (or a JWKS document {"keys": [...]}).')
    parsed = tuple(jwk_parse(jwk, allowed) for jwk in keys)
    kids = [key.kid for key in parsed]
    duplicates = sorted({kid for kid in kids if kids.count(kid) > 1})
    if duplicates:
        raise PolicyError("keys", f"kid {duplicates[0]!r} is given more than once.")
    return parsed


def claim_path_check(field_name: str, path: Any) -> str:
    if not isinstance(path, str) or not _CLAIM_PATH.match(path):
        raise PolicyError(
            field_name, f"{path!r} is not a claim path (a name, or dotted names like realm_access.roles)."
        )
    return path


def attributes_check(attributes: Any) -> dict[str, str]:
    if attributes in (None, ""):
        return {}
    if not isinstance(attributes, dict):
        raise PolicyError("attributes", 'Give an object of attribute names to claim paths, e.g. {"tenant": "org.id"}.')
    for name, path in attributes.items():
        if not _ATTRIBUTE_NAME.match(name):
            raise PolicyError("attributes", f"{name!r} is not usable as ${{attributes.NAME}}.")
        claim_path_check("attributes", path)
    return dict(attributes)


def jwks_url_usable(url: str) -> bool:
    """https, or plain http to a loopback address (a development identity provider)."""
    parts = urlsplit(url)
    return parts.scheme == "https" or (parts.scheme == "http" and parts.hostname in LOOPBACK_HOSTS)


def header_template_split(template: str) -> tuple[str, str]:
    """``"Bearer {credentials}"`` -> ``("Bearer ", "")``."""
    if template.count(CREDENTIALS_PLACEHOLDER) != 1:
        raise PolicyError("header_template", f"The header template must hold {CREDENTIALS_PLACEHOLDER} exactly once.")
    prefix, _, suffix = template.partition(CREDENTIALS_PLACEHOLDER)
    return prefix, suffix


def policy_compile(
    *,
    name: str,
    issuer: str = "",
    audience: str = "",
    algorithms: Any = ("RS256",),
    keys: Any = None,
    secret: str = "",
    jwks_url: str = "",
    roles_claim: str = "scope",
    identity_claim: str = "sub",
    attributes: Any = None,
    challenge: int = 0,
    leeway: int = 0,
    header_name: str = "authorization",
    header_template: str = "Bearer {credentials}",
    query_param: str = "",
    cookie_name: str = "",
) -> GuardPolicy:
    """Check a guard's raw fields and compile them, or raise :class:`PolicyError` naming the field."""
    allowed = algorithms_check(list(algorithms) if isinstance(algorithms, tuple) else algorithms)
    parsed_keys = keys_parse(keys, allowed)
    if any(alg in HMAC_ALGORITHMS for alg in allowed):
        if not secret:
            raise PolicyError("secret", "HS256 needs a secret.")
        if len(secret.encode("utf-8")) < HMAC_MIN_SECRET_BYTES:
            raise PolicyError("secret", f"An HS256 secret needs at least {HMAC_MIN_SECRET_BYTES} bytes.")
    if jwks_url and not jwks_url_usable(jwks_url):
        raise PolicyError("jwks_url", "A JWKS URL must use https (plain http only to a loopback address).")
    if any(alg in ASYMMETRIC_ALGORITHMS for alg in allowed) and not parsed_keys and not jwks_url:
        raise PolicyError("keys", "Give inline keys or a JWKS URL for the asymmetric algorithms.")
    prefix, suffix = header_template_split(header_template) if header_name else ("", "")
    if not (header_name or query_param or cookie_name):
        raise PolicyError("header_name", "Name at least one place to read credentials: header, query or cookie.")
    if challenge < 0 or leeway < 0:
        raise PolicyError("leeway" if leeway < 0 else "challenge", "Seconds cannot be negative.")
    return GuardPolicy(
        name=name,
        issuer=issuer,
        audience=audience,
        algorithms=allowed,
        keys=parsed_keys,
        secret=secret.encode("utf-8"),
        jwks_url=jwks_url,
        roles_claim=claim_path_check("roles_claim", roles_claim),
        identity_claim=claim_path_check("identity_claim", identity_claim),
        attributes=attributes_check(attributes),
        challenge=challenge,
        leeway=leeway,
        credentials=CredentialSources(
            cookie=cookie_name,
            header=header_name.lower(),
            header_prefix=prefix,
            header_suffix=suffix,
            query=query_param,
        ),
    )

"""Keys and tokens minted for the guard tests (PyJWT + cryptography), and the policies that trust them."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from dataclasses import dataclass
from functools import cache
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

ISSUER = "https://issuer.test"
AUDIENCE = "sluice-tests"
SECRET = "a-test-secret-that-is-at-least-32-bytes-long"


@dataclass(frozen=True)
class KeyPair:
    kid: str
    alg: str
    private: Any
    public: Any

    def jwk(self) -> dict[str, Any]:
        exporter = {"RS256": RSAAlgorithm, "ES256": ECAlgorithm, "EdDSA": OKPAlgorithm}[self.alg]
        document: dict[str, Any] = exporter.to_jwk(self.public, as_dict=True)
        return {**document, "kid": self.kid, "alg": self.alg, "use": "sig"}

    def public_pem(self) -> bytes:
        return self.public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


@cache
def rsa_key(kid: str = "rsa-1") -> KeyPair:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return KeyPair(kid, "RS256", private, private.public_key())


@cache
def ec_key(kid: str = "ec-1") -> KeyPair:
    private = ec.generate_private_key(ec.SECP256R1())
    return KeyPair(kid, "ES256", private, private.public_key())


@cache
def ed_key(kid: str = "ed-1") -> KeyPair:
    private = ed25519.Ed25519PrivateKey.generate()
    return KeyPair(kid, "EdDSA", private, private.public_key())


def claims(**overrides: Any) -> dict[str, Any]:
    """Valid claims for the test issuer and audience, an hour to live; ``None`` removes a claim."""
    now = int(time.time())
    body: dict[str, Any] = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": "alice",
        "iat": now,
        "exp": now + 3600,
        "scope": "read:items write:items",
    }
    body.update(overrides)
    return {k: v for k, v in body.items() if v is not None}


def mint(
    key: KeyPair | None = None, *, kid: str | None = "", headers: dict[str, Any] | None = None, **claim: Any
) -> str:
    """A token signed with ``key`` (RSA by default); ``kid=""`` means the key's own kid, None none."""
    key = key or rsa_key()
    header = {"kid": key.kid if kid == "" else kid, **(headers or {})}
    if header["kid"] is None:
        del header["kid"]
    return jwt.encode(claims(**claim), key.private, algorithm=key.alg, headers=header)


def mint_hs256(secret: bytes | str = SECRET, *, kid: str | None = None, **claim: Any) -> str:
    """An HS256 token signed by hand, so any bytes (even a PEM public key) can be the secret."""
    header: dict[str, Any] = {"alg": "HS256", "typ": "JWT"}
    if kid is not None:
        header["kid"] = kid
    signing = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims(**claim)).encode())}"
    key = secret.encode() if isinstance(secret, str) else secret
    return f"{signing}.{b64(hmac.new(key, signing.encode(), hashlib.sha256).digest())}"


def mint_unsigned(**claim: Any) -> str:
    return f"{b64(json.dumps({'alg': 'none', 'typ': 'JWT'}).encode())}.{b64(json.dumps(claims(**claim)).encode())}."


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def guard_fields(**overrides: Any) -> dict[str, Any]:
    """Model/``policy_compile`` fields of a guard that trusts the RSA, EC and Ed25519 keys and the secret."""
    fields: dict[str, Any] = {
        "issuer": ISSUER,
        "audience": AUDIENCE,
        "algorithms": ["RS256", "ES256", "EdDSA", "HS256"],
        "keys": [rsa_key().jwk(), ec_key().jwk(), ed_key().jwk()],
        "secret": SECRET,
    }
    fields.update(overrides)
    return fields

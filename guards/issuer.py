"""A development token issuer: short-lived ES256 access tokens for signed-in users.

``runstreams --demo`` creates the key pair (the private half stays in a file
readable by its owner only) and registers its public half as the ``demo``
guard, so the demo page can get a token, stream a guarded route and answer
its challenges. Signing goes through simplejwt's ``TokenBackend``; verifying
stays with the guard like for any other issuer.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from rest_framework_simplejwt.backends import TokenBackend

DEV_GUARD = "demo"
DEV_ISSUER = "sluice-dev"
DEV_AUDIENCE = "sluice"
DEV_ALGORITHM = "ES256"
LIFETIME_MIN_SECONDS = 5
LIFETIME_MAX_SECONDS = 3600


@dataclass(frozen=True, slots=True)
class IssuerKey:
    """The issuer's P-256 key pair: the private PEM signs, the public JWK goes into the guard."""

    private_pem: bytes
    public_jwk: dict[str, str]

    @property
    def kid(self) -> str:
        return self.public_jwk["kid"]


@dataclass(frozen=True, slots=True)
class IssuedToken:
    access_token: str
    identity: str
    roles: tuple[str, ...]
    expires_at: int

    def as_json(self) -> dict[str, Any]:
        return {
            "access_token": self.access_token,
            "token_type": "Bearer",
            "identity": self.identity,
            "roles": list(self.roles),
            "expires_at": self.expires_at,
            "expires_in": max(0, self.expires_at - int(time.time())),
            "guard": DEV_GUARD,
        }


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _public_jwk(private: ec.EllipticCurvePrivateKey) -> dict[str, str]:
    numbers = private.public_key().public_numbers()
    jwk = {
        "crv": "P-256",
        "kty": "EC",
        "x": _b64url(numbers.x.to_bytes(32, "big")),
        "y": _b64url(numbers.y.to_bytes(32, "big")),
    }
    # RFC 7638 thumbprint: the required members, sorted, no whitespace.
    thumbprint = hashlib.sha256(json.dumps(jwk, separators=(",", ":"), sort_keys=True).encode()).digest()
    return {**jwk, "kid": _b64url(thumbprint)[:16], "alg": DEV_ALGORITHM, "use": "sig"}


def issuer_key_load(path: Path) -> IssuerKey:
    """The key pair stored at ``path`` (``FileNotFoundError`` if there is none yet)."""
    pem = path.read_bytes()
    private = serialization.load_pem_private_key(pem, password=None)
    if not isinstance(private, ec.EllipticCurvePrivateKey) or private.curve.name != "secp256r1":
        raise ValueError(f"{path} does not hold a P-256 private key")
    return IssuerKey(private_pem=pem, public_jwk=_public_jwk(private))


def issuer_key_ensure(path: Path) -> IssuerKey:
    """The key pair at ``path``, created (mode 0600) on first use and reused after, so tokens survive restarts."""
    try:
        return issuer_key_load(path)
    except FileNotFoundError:
        pass
    private = ec.generate_private_key(ec.SECP256R1())
    pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(pem)
    return IssuerKey(private_pem=pem, public_jwk=_public_jwk(private))


def token_issue(key: IssuerKey, *, identity: str, roles: tuple[str, ...], lifetime: int) -> IssuedToken:
    """A signed access token for ``identity`` granting ``roles`` (space-separated ``scope``) for ``lifetime`` s."""
    if not LIFETIME_MIN_SECONDS <= lifetime <= LIFETIME_MAX_SECONDS:
        raise ValueError(f"lifetime must be {LIFETIME_MIN_SECONDS} to {LIFETIME_MAX_SECONDS} seconds")
    now = int(time.time())
    backend = TokenBackend(
        DEV_ALGORITHM, signing_key=key.private_pem.decode("ascii"), audience=DEV_AUDIENCE, issuer=DEV_ISSUER
    )
    payload = {
        "sub": identity,
        "scope": " ".join(roles),
        "iat": now,
        "nbf": now,
        "exp": now + lifetime,
        "jti": uuid.uuid4().hex,
    }
    # simplejwt's backend adds aud and iss. No kid: the demo guard holds exactly this one key.
    token = backend.encode(payload)
    return IssuedToken(access_token=token, identity=identity, roles=roles, expires_at=now + lifetime)

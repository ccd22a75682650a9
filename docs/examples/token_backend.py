"""A site's backend that mints short-lived tokens for Sluice: the standard library and PyJWT.

Your site signs its users in; Sluice does not know them. This backend (or the
same few lines in yours) gives a signed-in user a token that lives a minute,
signed with the site's own ES256 key, and publishes the public half as a JWKS
document that a Sluice guard fetches (its ``jwks_url``). The page's ``token()``
asks it, on the page's own origin, whenever the client needs a token.

    pip install "pyjwt[crypto]"
    python docs/examples/token_backend.py --port 8001 --key var/site-token-key.pem

    GET  /.well-known/jwks.json   the public key (the guard's jwks_url)
    POST /token                   {"access_token": "...", "expires_in": 60}

The guard (admin, API or a configuration file)::

    guards:
      - name: site
        issuer: https://shop.example
        audience: sluice
        algorithms: [ES256]
        jwks_url: https://shop.example/.well-known/jwks.json   # http only to loopback
        challenge: 10

``signed_in_user`` stands in for your session check: replace it.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

ISSUER = "https://shop.example"
AUDIENCE = "sluice"
LIFETIME_SECONDS = 60


def key_load(path: Path) -> ec.EllipticCurvePrivateKey:
    """The site's P-256 signing key at ``path``, created (readable by its owner only) on first use."""
    if path.exists():
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        return key
    key = ec.generate_private_key(ec.SECP256R1())
    path.parent.mkdir(parents=True, exist_ok=True)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as file:
        file.write(pem)
    return key


def public_jwk(key: ec.EllipticCurvePrivateKey) -> dict[str, Any]:
    """The public half as a JWK, its ``kid`` the RFC 7638 thumbprint (a new key is a new kid)."""
    jwk: dict[str, Any] = jwt.algorithms.ECAlgorithm.to_jwk(key.public_key(), as_dict=True)
    required = json.dumps({name: jwk[name] for name in ("crv", "kty", "x", "y")}, separators=(",", ":"))
    thumbprint = base64.urlsafe_b64encode(hashlib.sha256(required.encode()).digest()).rstrip(b"=").decode()
    return {**jwk, "kid": thumbprint[:16], "alg": "ES256", "use": "sig"}


def token_mint(
    key: ec.EllipticCurvePrivateKey,
    *,
    subject: str,
    roles: list[str],
    lifetime: int = LIFETIME_SECONDS,
    issuer: str = ISSUER,
    audience: str = AUDIENCE,
) -> str:
    """A token for ``subject`` granting ``roles`` (the guard's ``scope`` claim, space-separated)."""
    now = int(time.time())
    claims = {
        "iss": issuer,
        "aud": audience,
        "sub": subject,
        "scope": " ".join(roles),
        "iat": now,
        "nbf": now,
        "exp": now + lifetime,
        "jti": uuid.uuid4().hex,
    }
    return jwt.encode(claims, key, algorithm="ES256", headers={"kid": public_jwk(key)["kid"]})


def signed_in_user(handler: BaseHTTPRequestHandler) -> str | None:
    """Who is asking: YOUR session check goes here (this example trusts everyone as "demo-user")."""
    return "demo-user"


def handler_for(key: ec.EllipticCurvePrivateKey, roles: list[str]) -> type[BaseHTTPRequestHandler]:
    jwks = json.dumps({"keys": [public_jwk(key)]}).encode()

    class TokenHandler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/.well-known/jwks.json":
                self.answer(200, jwks, cache="public, max-age=300")
            else:
                self.answer(404, b'{"error": "not_found"}')

        def do_POST(self) -> None:
            user = signed_in_user(self)
            if self.path != "/token":
                self.answer(404, b'{"error": "not_found"}')
            elif user is None:
                self.answer(401, b'{"error": "sign in first"}')
            else:
                token = token_mint(key, subject=user, roles=roles)
                self.answer(200, json.dumps({"access_token": token, "expires_in": LIFETIME_SECONDS}).encode())

        def answer(self, status: int, body: bytes, cache: str = "no-store") -> None:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.send_header("cache-control", cache)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # never log the tokens

    return TokenHandler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--key", type=Path, default=Path("var/site-token-key.pem"))
    parser.add_argument("--roles", default="scores:read", help="roles every token grants (space-separated)")
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler_for(key_load(args.key), args.roles.split()))
    print(f"tokens on http://127.0.0.1:{args.port}/token, keys on /.well-known/jwks.json")
    server.serve_forever()


if __name__ == "__main__":
    main()

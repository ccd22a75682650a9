"""A compact JWS read for the hot path: segments, header, payload, signature check.

PyJWT's ``jwt.decode`` costs 50-100 µs per token on top of the signature
itself (options merged per call, the header parsed twice, ``datetime`` for
the clock, warnings machinery per verify): more than OpenSSL's P-256 verify.
Here a token is split once, its header read from a small cache (every token
of an issuer carries the same header segment), and the signature checked by
PyJWT's own algorithm objects (``prepare_key`` and ``verify``: the same
curve checks and signature encodings PyJWT applies). The registered claims
are checked in :mod:`guards.verification`.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

import jwt
from jwt.algorithms import Algorithm

# PyJWT's extensions: b64 is the only one it knows, and a b64=false token (detached payload) is refused here.
_SUPPORTED_CRIT = frozenset({"b64"})
_HEADER_CACHE_MAX = 64
_headers: dict[str, Mapping[str, Any]] = {}
_algorithms: dict[str, Algorithm] = {}
# HMAC secrets PyJWT accepted (it refuses PEM and SSH key texts, with regular expressions: 8 µs a token).
_secrets_checked: set[tuple[str, bytes]] = set()


class MalformedToken(ValueError):
    """Not a compact JWS whose segments decode: no key was tried."""


class KeyUnusable(ValueError):
    """The key does not fit the algorithm (an RSA key for ES256, a PEM text as an HMAC secret)."""


def segment_decode(segment: str) -> bytes:
    """One base64url segment (padding optional); characters outside the alphabet are refused, not skipped."""
    try:
        return base64.b64decode(segment.encode("ascii") + b"=" * (-len(segment) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError, UnicodeEncodeError) as exc:
        raise MalformedToken("a segment is not base64url") from exc


def header_read(segment: str) -> Mapping[str, Any]:
    """The protected header of ``segment``, checked as PyJWT checks it; the same segment is parsed once."""
    header = _headers.get(segment)
    if header is not None:
        return header
    header = _json_object(segment, "the header")
    if "kid" in header and not isinstance(header["kid"], str):
        raise MalformedToken("kid is not a string")
    if "crit" in header:
        crit = header["crit"]
        if not isinstance(crit, list) or not crit or any(ext not in _SUPPORTED_CRIT for ext in crit):
            raise MalformedToken("the header names critical extensions this gateway does not support")
    if header.get("b64", True) is False:
        raise MalformedToken("detached payloads (b64 false) are not accepted")
    if len(segment) <= 1024:  # a made-up header per request must not grow the cache's entries
        if len(_headers) >= _HEADER_CACHE_MAX:
            _headers.clear()
        _headers[segment] = header
    return header


def token_split(token: str) -> tuple[str, str, str]:
    """The header, payload and signature segments of a compact JWS."""
    parts = token.split(".")
    if len(parts) != 3:
        raise MalformedToken("not three segments")
    return parts[0], parts[1], parts[2]


def payload_read(segment: str) -> dict[str, Any]:
    return _json_object(segment, "the payload")


def _json_object(segment: str, what: str) -> dict[str, Any]:
    """The JSON object a base64url segment holds; :class:`MalformedToken` naming ``what`` otherwise."""
    try:
        value = json.loads(segment_decode(segment))
    except (ValueError, RecursionError) as exc:
        raise MalformedToken(f"{what} is not JSON") from exc
    if not isinstance(value, dict):
        raise MalformedToken(f"{what} is not a JSON object")
    return value


def _algorithm(alg: str) -> Algorithm:
    algorithm = _algorithms.get(alg)
    if algorithm is None:
        algorithm = _algorithms[alg] = jwt.get_algorithm_by_name(alg)
    return algorithm


def signature_valid(alg: str, key: Any, signing_input: bytes, signature: bytes) -> bool:
    """Whether ``signature`` is ``alg``'s over ``signing_input`` with ``key`` (a key object, or an HMAC secret)."""
    algorithm = _algorithm(alg)
    if isinstance(key, bytes) and (alg, key) in _secrets_checked:
        return bool(algorithm.verify(signing_input, key, signature))
    try:
        prepared = algorithm.prepare_key(key)
    except (jwt.InvalidKeyError, TypeError, ValueError) as exc:
        raise KeyUnusable(str(exc)) from exc
    if isinstance(key, bytes) and prepared == key and len(_secrets_checked) < _HEADER_CACHE_MAX:
        _secrets_checked.add((alg, key))
    return bool(algorithm.verify(signing_input, prepared, signature))

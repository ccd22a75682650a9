"""Admission to a guarded route (SPEC 4.2): credentials -> verified principal -> roles.

Every refusal is logged on ``sluice.guards`` with the route, the reason and the
client address, never the token.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from guards.conf import guards_settings
from guards.credentials import credentials_read
from guards.jwks import KeysUnavailable, jwks_cache, token_kid
from guards.policy import VerifyingKey
from guards.verification import Principal, TokenRejected, token_verify
from guards.verified import VerifiedTokens
from streams.core.errors import InsufficientRoles, InvalidToken, KeysNotAvailable, MissingCredentials
from streams.core.routes import RouteSpec
from streams.edge.http.access import client_address

logger = logging.getLogger("sluice.guards")


@functools.cache
def verified_tokens() -> VerifiedTokens:
    """This process's admitted tokens (``VERIFIED_TOKENS``), made on first use (``cache_clear()`` starts anew)."""
    return VerifiedTokens(guards_settings.VERIFIED_TOKENS)


async def stream_admit(route: RouteSpec, scope: dict[str, Any], query: dict[str, list[str]]) -> Principal | None:
    """The principal a guarded route admits (None for a public route), or a 401/403 :class:`StreamError`."""
    policy = route.guard
    if policy is None:
        return None
    realm = f'Bearer realm="{policy.name}"'
    where = (route.pattern.source, scope.get("path", ""), client_address(scope))
    token = credentials_read(policy.credentials, scope.get("headers", []), query)
    if token is None:
        logger.info("refused route=%s path=%s client=%s reason=no_credentials", *where)
        raise MissingCredentials(
            f"this stream needs a token for guard {policy.name}", headers=[(b"www-authenticate", realm.encode())]
        )
    fetched: tuple[VerifyingKey, ...] = ()
    if policy.jwks_url:
        try:
            fetched = await jwks_cache().keys(policy.jwks_url, token_kid(token))
        except KeysUnavailable as exc:
            logger.warning("refused route=%s path=%s client=%s reason=keys_unavailable", *where)
            raise KeysNotAvailable(str(exc), headers=[(b"retry-after", b"5")]) from exc
    try:
        principal = token_verify(policy, token, fetched=fetched, verified=verified_tokens())
    except TokenRejected as exc:
        logger.warning("refused route=%s path=%s client=%s reason=%s", *where, exc.reason)
        raise InvalidToken(
            exc.detail,
            reason=exc.reason,
            headers=[(b"www-authenticate", f'{realm}, error="invalid_token"'.encode())],
        ) from None  # the PyJWT exception stays out of any traceback that might be logged
    if not principal.grants(route.roles):
        missing = sorted(set(route.roles) - principal.roles)
        logger.warning(
            "refused route=%s path=%s client=%s reason=insufficient_roles identity=%s missing=%s",
            *where,
            principal.identity,
            ",".join(missing),
        )
        raise InsufficientRoles(
            f"the token does not grant {', '.join(missing)}",
            reason="insufficient_roles",
            headers=[(b"www-authenticate", f'{realm}, error="insufficient_scope"'.encode())],
        )
    return principal

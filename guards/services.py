"""Writes to guard configuration: the one path the admin, commands and API share."""

from __future__ import annotations

from typing import Any, TypedDict

from django.db import transaction
from typing_extensions import Unpack

from common.upsert import model_upsert

from .issuer import DEV_ALGORITHM, DEV_AUDIENCE, DEV_GUARD, DEV_ISSUER, IssuerKey
from .models import Guard


class GuardFields(TypedDict, total=False):
    """The columns of a guard an upsert sets (a column left out keeps its value, or its default on a new row)."""

    description: str
    issuer: str
    audience: str
    algorithms: list[str]
    keys: list[dict[str, Any]]
    jwks_url: str
    secret: str
    roles_claim: str
    identity_claim: str
    attributes: dict[str, str]
    challenge: int
    leeway: int
    header_name: str
    header_template: str
    query_param: str
    cookie_name: str


@transaction.atomic
def guard_upsert(*, name: str, **fields: Unpack[GuardFields]) -> Guard:
    """Create or update the guard called ``name`` (validated like the admin form)."""
    return model_upsert(Guard, {"name": name}, fields)


@transaction.atomic
def dev_guard_ensure(*, key: IssuerKey, challenge: int = 10) -> Guard:
    """The ``demo`` guard trusting the development issuer's key (tokens in a header or ``?access_token=``)."""
    return guard_upsert(
        name=DEV_GUARD,
        issuer=DEV_ISSUER,
        audience=DEV_AUDIENCE,
        algorithms=[DEV_ALGORITHM],
        keys=[key.public_jwk],
        secret="",
        jwks_url="",
        roles_claim="scope",
        identity_claim="sub",
        challenge=challenge,
        query_param="access_token",
        description="Development issuer (POST /auth/token when signed in)",
    )


def guard_delete(*, guard: Guard) -> None:
    """Delete ``guard`` (``ProtectedError`` while a route uses it: its routes must never open up)."""
    guard.delete()

"""Routes and guards together: what route_upsert accepts, and what reaches the compiled route table."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from guards.models import Guard
from guards.services import guard_upsert
from streams.route_tables import route_table_build
from streams.services import route_upsert
from tests.support.tokens import guard_fields, rsa_key

pytestmark = [pytest.mark.django_db, pytest.mark.services]


def test_guard_by_name_and_roles_reach_the_route_table() -> None:
    guard_upsert(name="main", **guard_fields())
    route_upsert(path="/s/{t}", topic="${params.t}", guard="main", roles=["read:items"])
    spec = route_table_build().routes[0]
    assert spec.guard is not None
    assert spec.guard.name == "main"
    assert [key.kid for key in spec.guard.keys] == ["rsa-1", "ec-1", "ed-1"]
    assert spec.roles == ("read:items",)


def test_guard_as_instance_and_update_keeps_other_fields() -> None:
    guard = guard_upsert(name="main", **guard_fields())
    route_upsert(path="/s", topic="t", guard=guard, roles=["a"])
    route = route_upsert(path="/s", topic="t2")
    assert (route.guard, route.roles) == (guard, ["a"])
    assert route_upsert(path="/s", guard=None, roles=[]).guard is None


def test_unknown_guard_name() -> None:
    with pytest.raises(Guard.DoesNotExist):
        route_upsert(path="/s", topic="t", guard="nope")


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"roles": ["read"]}, "roles"),
        ({"roles": "read"}, "roles"),
        ({"topic": "user-${identity}"}, "topic"),
        ({"topic": "t-${attributes.tenant}"}, "topic"),
    ],
)
def test_token_dependent_fields_need_a_guard(fields: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        route_upsert(path="/s", **{"topic": "t", **fields})
    assert field in caught.value.message_dict


def test_identity_filter_needs_a_guard() -> None:
    with pytest.raises(ValidationError, match="need a guard"):
        route_upsert(path="/s", topic="t", filters=[{"key": "${identity}"}])
    guard_upsert(name="main", **guard_fields())
    route_upsert(path="/s", topic="t", guard="main", filters=[{"key": "${identity}"}])


def test_guard_change_reaches_the_route_table() -> None:
    guard_upsert(name="main", **guard_fields())
    route_upsert(path="/s", topic="t", guard="main")
    guard_upsert(name="main", algorithms=["RS256"], keys=[rsa_key("rsa-2").jwk()], secret="")
    assert [key.kid for key in route_table_build().routes[0].guard.keys] == ["rsa-2"]  # type: ignore[union-attr]


def test_stored_guard_that_no_longer_compiles_refuses_everything() -> None:
    guard_upsert(name="main", **guard_fields())
    route_upsert(path="/s", topic="t", guard="main")
    Guard.objects.filter(name="main").update(algorithms=["none"])  # bypasses validation, as a bad migration might
    policy = route_table_build().routes[0].guard
    assert policy is not None
    assert policy.algorithms == ()

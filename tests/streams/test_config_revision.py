"""The configuration's revision: every write moves it, and an unchanged route table is not rebuilt.

A worker renews its route table once a cache time with one query of the revision row; only a
moved revision rebuilds it. So every way of writing the configuration must move it (signals or
not, this process or another), and a change must reach a worker that hears no broadcast.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from django.core.management.sql import emit_post_migrate_signal
from django.db import connection
from django.test.utils import CaptureQueriesContext

from guards.models import Guard
from guards.services import guard_upsert
from streams.models import Cluster, ConfigRevision, Route, RouteFilter, Schema, Topic
from streams.models.revision import CONFIGURATION_TABLES
from streams.route_tables import RouteTableSource, config_revision
from streams.selectors import route_table, route_table_invalidate
from streams.services import route_upsert, schema_upsert, topic_upsert
from tests.support.polling import condition_wait, condition_wait_async

pytestmark = pytest.mark.services

SECRET = "a-test-secret-of-at-least-32-bytes-long"


def configuration_make() -> Route:
    guard_upsert(name="revision-guard", algorithms=["HS256"], keys=[], secret=SECRET)
    schema_upsert(name="revision-schema", json_schema={"type": "object"})
    topic_upsert(name="revision-topic")
    return route_upsert(path="/revision/a", topic="revision-topic", filters=[{"key": "k"}])


WRITES: dict[str, Callable[[], Any]] = {
    "service save": lambda: route_upsert(path="/revision/b", topic="revision-topic"),
    "queryset update": lambda: Route.objects.update(heartbeat_seconds=7),
    "bulk create": lambda: Route.objects.bulk_create([Route(path=f"/revision/bulk/{n}", topic="t") for n in range(3)]),
    "bulk update": lambda: Route.objects.bulk_update(list(Route.objects.all()), ["enabled"]),
    "queryset delete": lambda: RouteFilter.objects.all().delete(),
    "guard update": lambda: Guard.objects.update(leeway=5),
    "schema update": lambda: Schema.objects.update(description="changed"),
    "topic update": lambda: Topic.objects.update(cache_max_messages=10),
    "cluster insert": lambda: Cluster.objects.create(name="revision-cluster", bootstrap_servers="127.0.0.1:9092"),
    "raw SQL": lambda: connection.cursor().execute("UPDATE streams_route SET retry_ms = retry_ms + 1"),
}


@pytest.mark.django_db
@pytest.mark.parametrize("write", WRITES.values(), ids=WRITES.keys())
def test_every_way_of_writing_the_configuration_moves_the_revision(write: Callable[[], Any]) -> None:
    configuration_make()
    before = config_revision()
    assert before is not None
    write()
    assert config_revision() not in (None, before)


@pytest.mark.django_db
def test_reading_the_configuration_leaves_the_revision_alone() -> None:
    configuration_make()
    before = config_revision()
    list(Route.objects.select_related("guard", "schema"))
    RouteTableSource().read()
    assert config_revision() == before


@pytest.mark.django_db
def test_an_unchanged_table_is_renewed_with_one_query_and_not_rebuilt() -> None:
    configuration_make()
    for n in range(20):
        route_upsert(path=f"/revision/many/{n}", topic="revision-topic", guard="revision-guard", roles=["r"])
    source = RouteTableSource()
    table = source.read()
    with CaptureQueriesContext(connection) as queries:
        for _ in range(10):
            assert source.read() is table
    assert len(queries) == 10, [query["sql"] for query in queries]
    Route.objects.filter(path="/revision/many/3").update(enabled=False)
    renewed = source.read()
    assert renewed is not table
    assert renewed.match("/revision/many/3") is None
    assert len(renewed.routes) == len(table.routes) - 1


@pytest.mark.django_db
def test_a_change_heard_of_in_this_process_rebuilds_whatever_the_revision_says() -> None:
    configuration_make()
    source = RouteTableSource()
    table = source.read()
    source.forget()
    assert source.read() is not table


@pytest.mark.django_db
def test_without_a_revision_row_every_renewal_rebuilds() -> None:
    configuration_make()
    ConfigRevision.objects.all().delete()
    source = RouteTableSource()
    assert source.read() is not source.read()


@pytest.mark.django_db
def test_a_registry_schema_follows_the_registry_while_the_revision_stands(monkeypatch: pytest.MonkeyPatch) -> None:
    from streams.core.schemas import schema_reject_all, schema_validator_compile

    configuration_make()
    Schema.objects.create(name="revision-registry", registry_url="http://127.0.0.1:9", subject="s")
    Route.objects.filter(path="/revision/a").update(schema=Schema.objects.get(name="revision-registry"))
    registry = {"check": schema_reject_all("revision-registry", "registry down")}
    monkeypatch.setattr("streams.route_tables.registry_schemas.check", lambda *args: registry["check"])
    source = RouteTableSource()
    table = source.read()
    assert table.routes[0].schema is registry["check"]
    assert source.read() is table
    registry["check"] = schema_validator_compile("revision-registry", {"type": "object"}, key="registry|s|2")
    renewed = source.read()
    assert renewed.routes[0].schema is registry["check"]
    assert renewed.routes[0].id == table.routes[0].id


@pytest.mark.django_db
def test_triggers_lost_with_a_rebuilt_table_are_set_up_again_after_migrate() -> None:
    configuration_make()
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            for event in ("insert", "update", "delete"):
                cursor.execute(f"DROP TRIGGER sluice_revise_streams_route_{event}")
        else:
            cursor.execute("DROP TRIGGER sluice_revise ON streams_route")
    before = config_revision()
    Route.objects.update(retry_ms=1234)
    assert config_revision() == before  # what a migration that rebuilds the table leaves
    emit_post_migrate_signal(verbosity=0, interactive=False, db="default")
    after = config_revision()
    assert after != before  # a migration is a configuration change too
    Route.objects.update(retry_ms=4321)
    assert config_revision() != after
    assert set(CONFIGURATION_TABLES) <= set(connection.introspection.table_names())


@pytest.fixture
def cache_seconds(settings: Any) -> Callable[[float], None]:
    def set_to(seconds: float) -> None:
        settings.SLUICE = {**settings.SLUICE, "ROUTE_CACHE_SECONDS": seconds}

    return set_to


def _disable_elsewhere(path: str) -> None:
    """From another connection, with no signal: as another process's bulk write would."""
    from django.db import connection as thread_connection

    try:
        Route.objects.filter(path=path).update(enabled=False)
    finally:
        thread_connection.close()


@pytest.mark.django_db(transaction=True)
async def test_a_change_on_another_connection_is_seen_within_the_cache_time(
    cache_seconds: Callable[[float], None],
) -> None:
    cache_seconds(1)
    await asyncio.to_thread(configuration_make)
    route_table_invalidate()
    assert (await route_table()).match("/revision/a") is not None
    await asyncio.to_thread(_disable_elsewhere, "/revision/a")

    async def gone() -> bool:
        return (await route_table()).match("/revision/a") is None

    await condition_wait_async(gone, within=10, what="the disabled route gone from the table")


@pytest.mark.slow
def test_a_gateway_that_hears_no_broadcast_sees_a_bulk_change_within_its_cache_time(
    gateway_factory: Callable[..., Any],
) -> None:
    guard_upsert(name="revision-guard", algorithms=["HS256"], keys=[], secret=SECRET)
    route_upsert(path="/revision/guarded", topic="revision-topic", guard="revision-guard", enabled=False)
    # In-memory channel layer: the configuration broadcast does not cross processes.
    gateway = gateway_factory(SLUICE_ROUTE_CACHE_SECONDS="1")
    url = f"{gateway.url}/revision/guarded"
    assert httpx.get(url, timeout=10).status_code == 404
    Route.objects.filter(path="/revision/guarded").update(enabled=True)
    condition_wait(lambda: httpx.get(url, timeout=10).status_code == 401, within=15, what="the route enabled")

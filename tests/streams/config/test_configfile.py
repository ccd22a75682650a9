"""applyconfig / exportconfig with Sluice's own format (SPEC 6)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from django.core.management.base import CommandError

from common.config.document import ConfigError, document_load
from common.config.section import SECTIONS, ModelSection
from guards.models import Guard
from guards.services import guard_upsert
from pipeline.models import Pipeline
from streams.config.engine import config_apply, config_plan
from streams.models import Route, Schema, Topic
from streams.services import route_upsert, schema_upsert, topic_upsert
from tests.support.config_commands import FIXTURES, SPEC_EXAMPLE, applyconfig, applyconfig_refused, exportconfig, rows
from tests.support.sse_client import EventParser
from tests.support.tokens import mint, rsa_key

BROKEN = FIXTURES / "broken"


@pytest.mark.services
def test_spec_example_applies(db: None) -> None:
    out = applyconfig(SPEC_EXAMPLE)

    assert out.splitlines() == [
        "created guard authn_jwt",
        "created schema score",
        "created topic events",
        "created route /events/{topic}",
        "created route /upstream",
        "created pipeline scores",
        f"{SPEC_EXAMPLE}: 6 created, 0 updated, 0 unchanged, 0 deleted; applied",
    ]
    guard = Guard.objects.get(name="authn_jwt")
    assert guard.issuer == "https://auth.example.com"
    assert guard.algorithms == ["RS256"]
    assert guard.challenge == 10
    assert (guard.header_name, guard.header_template, guard.query_param, guard.cookie_name) == (
        "authorization",
        "Bearer {credentials}",
        "access_token",
        "",
    )
    # The example's n is standard base64 (as Zilla's docs write it): stored as base64url.
    assert "+" not in guard.keys[0]["n"]
    assert "/" not in guard.keys[0]["n"]
    assert "=" not in guard.keys[0]["n"]
    topic = Topic.objects.get(name="events")
    assert topic.schema is not None
    assert topic.schema.name == "score"
    assert (topic.cache_max_messages, topic.cache_max_bytes, topic.cache_max_age_seconds) == (10000, 16777216, 3600)
    route = Route.objects.get(path="/events/{topic}")
    assert route.guard == guard
    assert route.roles == ["proxy:stream"]
    assert route.allow_since is True
    assert route.allow_origins == ["*"]
    assert [(f.key, f.headers) for f in route.filters.all()] == [("${identity}", {"tag": "blue"})]
    proxy = Route.objects.get(path="/upstream")
    assert (proxy.kind, proxy.upstream, proxy.topic) == ("sse-proxy", "http://127.0.0.1:8001/events", "")


@pytest.mark.services
def test_applying_twice_changes_nothing(db: None) -> None:
    applyconfig(SPEC_EXAMPLE)
    before = rows()
    stamps = {r.path: r.updated for r in Route.objects.all()}

    out = applyconfig(SPEC_EXAMPLE)

    assert out.splitlines()[-1] == f"{SPEC_EXAMPLE}: 0 created, 0 updated, 6 unchanged, 0 deleted; applied"
    assert rows() == before
    assert {r.path: r.updated for r in Route.objects.all()} == stamps


def test_a_change_is_an_update(db: None, tmp_yaml: Any) -> None:
    applyconfig(SPEC_EXAMPLE)
    changed = SPEC_EXAMPLE.read_text().replace("initial: live ", "initial: earliest ")

    out = applyconfig(tmp_yaml(changed))

    assert "updated route /events/{topic}" in out.splitlines()
    assert "0 created, 1 updated, 5 unchanged, 0 deleted" in out
    assert Route.objects.get(path="/events/{topic}").initial == "earliest"


def test_check_validates_and_changes_nothing(db: None) -> None:
    out = applyconfig(SPEC_EXAMPLE, "--check")

    assert "would create route /events/{topic}" in out.splitlines()
    assert out.splitlines()[-1].endswith("6 created, 0 updated, 0 unchanged, 0 deleted; checked, nothing changed")
    assert rows() == {"guards": [], "schemas": [], "topics": [], "routes": [], "filters": []}


def test_prune_deletes_what_the_file_does_not_name(db: None, tmp_yaml: Any) -> None:
    applyconfig(SPEC_EXAMPLE)
    Route.objects.create(path="/old/{topic}", topic="${params.topic}")
    only_proxy = tmp_yaml(
        "routes:\n  - path: /upstream\n    kind: sse-proxy\n    upstream: http://127.0.0.1:8001/events\n"
    )

    checked = applyconfig(only_proxy, "--prune", "--check")
    assert Route.objects.count() == 3
    out = applyconfig(only_proxy, "--prune")

    assert checked.replace("would delete", "deleted").splitlines()[:-1] == out.splitlines()[:-1]
    assert set(out.splitlines()[:-1]) == {
        "unchanged route /upstream",
        "deleted route /old/{topic}",
        "deleted route /events/{topic}",
        "deleted pipeline scores",
        "deleted topic events",
        "deleted schema score",
        "deleted guard authn_jwt",
    }
    assert list(Route.objects.values_list("path", flat=True)) == ["/upstream"]
    assert not Guard.objects.exists()
    assert not Topic.objects.exists()
    assert not Schema.objects.exists()


def test_prune_never_deletes_what_a_kept_row_uses(db: None, tmp_yaml: Any) -> None:
    applyconfig(SPEC_EXAMPLE)
    keep = tmp_yaml("routes:\n  - path: /events/{topic}\n    topic: ${params.topic}\n    guard: authn_jwt\n")

    with pytest.raises(CommandError) as raised:
        applyconfig(keep, "--prune")

    assert str(raised.value) == f"{keep}: guards: cannot delete guard authn_jwt: still used by /events/{{topic}}"
    assert Route.objects.count() == 2  # nothing applied, nothing pruned


def test_without_prune_other_rows_stay(db: None, tmp_yaml: Any) -> None:
    Route.objects.create(path="/old/{topic}", topic="${params.topic}")
    applyconfig(SPEC_EXAMPLE)
    assert Route.objects.filter(path="/old/{topic}").exists()


# One broken file each: the one error, at file:line:column and field, and nothing changed.
BROKEN_FILES = [
    ("bad_yaml.yaml", "4:1", "", "not valid YAML: while parsing a flow sequence"),
    ("unknown_field.yaml", "3:5", "routes[0].topik", "unknown field (known: allow_since,"),
    ("bad_path.yaml", "4:5", "routes[0].path", "unbalanced '{' at position 8"),
    ("unknown_guard.yaml", "4:5", "routes[0].guard", "no guard named 'nobody'"),
    ("bad_jwk.yaml", "4:5", "guards[0].keys", "Key 'k1' does not parse as a RS256 JWK"),
    ("wrong_type.yaml", "4:5", "routes[0].retry_ms", "must be an integer, not 'soon'"),
    ("unknown_param.yaml", "5:5", "routes[0].topic", "${params.name} is not a parameter of the path /events/{topic}"),
    ("duplicate_path.yaml", "4:5", "routes[1].path", "route /events/{topic} is given twice (first at line 2)"),
    ("duplicate_key.yaml", "4:5", "routes[0].topic", "given twice (first at line 3)"),
    ("bad_cors.yaml", "4:34", "routes[0].cors.allow_credentials", "Credentials cannot be allowed for every origin"),
    ("bad_origin.yaml", "7:11", "routes[0].cors.allow_origins[1]", "'https://app.example.com/index.html' is not an"),
    ("bad_filter.yaml", "8:9", "routes[0].filters[1].headers", "league: ${params.league} is not a path parameter"),
    ("bad_where.yaml", "6:5", "routes[0].where", "expected a field, a number, a string, true or false"),
    ("where_unknown_param.yaml", "6:5", "routes[0].where", "${params.team} is not a parameter of the path"),
    ("bad_choice.yaml", "4:5", "routes[0].event_id", "Value 'offset' is not a valid choice"),
    ("bad_conflate.yaml", "6:25", "routes[0].conflate.max_rate", "less than or equal to 1000"),
    ("unknown_schema.yaml", "3:5", "topics[0].schema", "no schema named 'nowhere'"),
    ("cache_not_mapping.yaml", "3:5", "topics[0].cache", "must be a mapping, not 10000"),
    ("bad_format.yaml", "6:5", "topics[0].registry", "the registry password is a secret"),
    ("bad_inline_schema.yaml", "5:7", "topics[0].value.avro_schema", "not an Avro schema"),
]


@pytest.mark.parametrize(("name", "position", "field", "message"), BROKEN_FILES)
@pytest.mark.parametrize("mode", [["--check"], []], ids=["check", "apply"])
def test_broken_file_one_precise_error(
    db: None, name: str, position: str, field: str, message: str, mode: list[str]
) -> None:
    path = BROKEN / name
    error = applyconfig_refused(path, *mode)
    where = f"{path}:{position}: {field}: " if field else f"{path}:{position}: "
    assert error.startswith(where), error
    assert message in error
    assert rows() == {"guards": [], "schemas": [], "topics": [], "routes": [], "filters": []}


def test_every_problem_is_reported_and_nothing_is_applied(db: None, tmp_yaml: Any) -> None:
    path = tmp_yaml(
        "topics:\n  - name: fine\n"
        "routes:\n"
        "  - path: /a/{x}\n    topic: ${params.y}\n"
        "  - path: /b\n    topic: b\n    retry_ms: -1\n"
        "  - {path: /c, topic: c, nope: 1}\n"
    )
    with pytest.raises(ConfigError) as raised:
        config_apply(document_load(path.read_text(), str(path)))

    assert [(p.mark.line if p.mark else None, p.where) for p in raised.value.problems] == [
        (9, "routes[2].nope"),
    ]  # structure first: nothing is written while a file does not even parse
    fixed = path.read_text().replace(", nope: 1", "")
    with pytest.raises(ConfigError) as raised:
        config_apply(document_load(fixed, str(path)))
    assert [(p.mark.line if p.mark else None, p.where) for p in raised.value.problems] == [
        (5, "routes[0].topic"),
        (8, "routes[1].retry_ms"),
    ]
    assert not Topic.objects.exists()


def test_guard_credentials_round_trip_every_combination(db: None, tmp_yaml: Any) -> None:
    key = {"kty": "EC", "crv": "P-256", "kid": "ec", "alg": "ES256"}
    key |= {"x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU", "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}
    variants = [
        "",
        "    credentials: {query: access_token}\n",
        "    credentials: {cookie: jwt, header: 'Token {credentials}', header_name: x-token}\n",
    ]
    for index, credentials in enumerate(variants):
        text = f"guards:\n  - name: g{index}\n    keys: [{key!r}]\n{credentials}".replace("'", '"')
        text = text.replace('"Token {credentials}"', "'Token {credentials}'")
        applyconfig(tmp_yaml(text, f"g{index}.yaml"))
    exported = tmp_yaml(exportconfig(), "exported.yaml")
    before = rows()
    out = applyconfig(exported)
    assert "0 created, 0 updated, 3 unchanged" in out
    assert rows() == before
    assert Guard.objects.get(name="g0").header_name == "authorization"
    g1 = Guard.objects.get(name="g1")
    assert (g1.header_name, g1.query_param, g1.algorithms) == ("", "access_token", ["ES256"])
    g2 = Guard.objects.get(name="g2")
    assert (g2.header_name, g2.header_template, g2.cookie_name) == ("x-token", "Token {credentials}", "jwt")


@pytest.mark.services
def test_export_then_apply_into_an_empty_database_gives_the_same_rows(db: None, tmp_path: Path) -> None:
    applyconfig(SPEC_EXAMPLE)
    applyconfig(FIXTURES / "zilla.sse.proxy.jwt.yaml")
    Route.objects.filter(path="/upstream").update(enabled=False, order=3, description="old one")
    registry = schema_upsert(name="reg", registry_url="https://registry.example.com", subject="s-value", version=2)
    topic_upsert(name="raw", schema=registry, cache_max_messages=5, description="raw feed")
    topic_upsert(
        name="readings",
        value_format="avro-inline",
        value_avro_schema={"type": "record", "name": "R", "fields": [{"name": "c", "type": "double"}]},
        key_format="avro",
        registry="https://${env.SR_USER}:${env.SR_PASSWORD}@registry.example.com",
    )
    route_upsert(
        path="/raw/{league}/*",
        topic="raw",
        schema=registry,
        binary="base64",
        max_pending_bytes=65536,
        event_id="key",
        initial="snapshot",
        filters=[{"key": "k"}, {"headers": {"league": "${params.league}", "tier": "1"}}],
    )
    before = rows()
    out = tmp_path / "exported.yaml"
    exportconfig("-o", str(out))
    Pipeline.objects.all().delete()
    Route.objects.all().delete()
    Topic.objects.all().delete()
    Schema.objects.all().delete()
    Guard.objects.all().delete()

    applied = applyconfig(out)

    assert rows() == before
    assert "0 updated, 0 unchanged, 0 deleted" in applied
    assert "0 created, 0 updated" in applyconfig(out)


def test_export_leaves_defaults_out(db: None) -> None:
    Route.objects.create(path="/plain/{topic}", topic="${params.topic}")
    assert exportconfig() == "routes:\n- path: /plain/{topic}\n  topic: ${params.topic}\n"


def test_empty_file_is_nothing_to_do(db: None, tmp_yaml: Any) -> None:
    assert applyconfig(tmp_yaml("")).endswith("0 created, 0 updated, 0 unchanged, 0 deleted; applied\n")


def test_unknown_section(db: None, tmp_yaml: Any) -> None:
    known = r"\(known: clusters, guards, pipelines, routes, "
    with pytest.raises(CommandError, match=r"config.yaml:1:1: sinks: unknown section " + known):
        applyconfig(tmp_yaml("sinks: []\n"))


def test_missing_file(db: None, tmp_path: Path) -> None:
    with pytest.raises(CommandError, match=r"nothing\.yaml: cannot read"):
        applyconfig(tmp_path / "nothing.yaml")


class _Pipelines(ModelSection):
    """A stand-in for the pipeline app's section: items are kept in a list."""

    name = "pipelines"
    label = "pipeline"
    key = "name"
    order = 50
    model = Topic  # unused: normalize/rows/write are overridden
    fields = ()
    store: dict[str, dict[str, Any]] = {}

    def normalize(self, item: Any, path: Any, document: Any) -> dict[str, Any]:
        return dict(item)

    def rows(self) -> dict[str, dict[str, Any]]:
        return dict(self.store)

    def write(self, form: dict[str, Any]) -> None:
        self.store[form["name"]] = form


def test_a_registered_section_handles_its_items(db: None, monkeypatch: pytest.MonkeyPatch) -> None:
    section = _Pipelines()
    monkeypatch.setitem(SECTIONS, "pipelines", section)
    out = applyconfig(FIXTURES / "pipelines.yaml")
    assert "created pipeline scores" in out.splitlines()
    assert section.store["scores"]["sink"] == "events"
    assert "unchanged pipeline scores" in applyconfig(FIXTURES / "pipelines.yaml")


def test_a_section_of_an_app_not_installed(db: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(SECTIONS, "pipelines")
    path = FIXTURES / "pipelines.yaml"
    with pytest.raises(CommandError) as raised:
        applyconfig(path)
    assert str(raised.value).startswith(f"{path}:2:1: pipelines: pipelines need the pipeline app")


def test_plan_orders_sections_whatever_the_file_order(tmp_yaml: Any) -> None:
    text = "routes: [{path: /a, topic: a}]\ntopics: [{name: a}]\nguards: []\n"
    plan = config_plan(document_load(text, "x.yaml"))
    assert [(item.section.name, item.key) for item in plan] == [("topics", "a"), ("routes", "/a")]


@pytest.mark.services
async def test_spec_example_route_streams_through_the_gateway(gateway: Any, kafka: Any, stream_db: None) -> None:
    """The SPEC 6 route as applied: guarded (query token), each user sees own keys with tag blue."""
    from asgiref.sync import sync_to_async

    await sync_to_async(applyconfig)(SPEC_EXAMPLE)
    key = rsa_key("example")  # the example's kid, with a private half the test holds
    await sync_to_async(guard_upsert)(name="authn_jwt", keys=[key.jwk()])
    token = mint(key, iss="https://auth.example.com", aud="https://api.example.com", scope="proxy:stream", sub="ann")
    topic = kafka.topic()
    async with httpx.AsyncClient(base_url=gateway.url, timeout=30.0) as client:
        refused = await client.get(f"/events/{topic}")
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == 'Bearer realm="authn_jwt"'
        async with client.stream("GET", f"/events/{topic}", params={"access_token": token}) as response:
            assert response.status_code == 200
            parser, events = EventParser(), []
            chunks = response.aiter_raw()
            while not events:  # the start checkpoint
                events += parser.feed(await anext(chunks))
            kafka.produce(topic, "other user", key="bob", headers={"tag": "blue"})
            kafka.produce(topic, "other tag", key="ann", headers={"tag": "red"})
            kafka.produce(topic, "mine", key="ann", headers={"tag": "blue"})
            while not any(e.has_data for e in events):
                events += parser.feed(await anext(chunks))
    assert [e.data for e in events if e.has_data] == ["mine"]


def test_a_where_error_names_its_position_in_the_expression(db: None) -> None:
    error = applyconfig_refused(BROKEN / "bad_where.yaml", "--check")
    assert error.endswith("found the end at position 51."), error


def test_where_and_client_filter_round_trip(db: None, tmp_yaml: Any) -> None:
    path = tmp_yaml(
        "topics:\n  - name: scores\n"
        "routes:\n"
        "  - path: /scores/{league}\n    topic: scores\n"
        "    where: value.league == ${params.league} and value.goals > 2\n    client_filter: true\n"
    )
    applyconfig(path)
    route = Route.objects.get(path="/scores/{league}")
    assert route.where == "value.league == ${params.league} and value.goals > 2"
    assert route.client_filter
    assert "0 created, 0 updated, 2 unchanged" in applyconfig(path)


def test_route_compression_applies_and_exports_nested(db: None, tmp_yaml: Any) -> None:
    text = "routes:\n  - path: /cz\n    topic: t\n    compression: {enabled: true, min_bytes: 128}\n"
    applyconfig(tmp_yaml(text))
    route = Route.objects.get(path="/cz")
    assert (route.compression, route.compression_min_bytes) == (True, 128)
    exported = exportconfig()
    assert "compression:" in exported
    assert "min_bytes: 128" in exported


def test_route_conflation_applies_and_exports_nested(db: None, tmp_yaml: Any) -> None:
    text = "routes:\n  - path: /prices\n    topic: t\n    conflate: {by: key, max_rate: 5}\n"
    applyconfig(tmp_yaml(text))
    route = Route.objects.get(path="/prices")
    assert (route.conflate, route.conflate_max_rate) == ("key", 5)
    exported = exportconfig()
    assert "conflate:" in exported
    assert "by: key" in exported
    assert "max_rate: 5" in exported
    assert "0 created, 0 updated, 1 unchanged" in applyconfig(tmp_yaml(text))


def test_a_rate_without_conflation_is_refused_at_its_line(db: None, tmp_yaml: Any) -> None:
    error = applyconfig_refused(
        tmp_yaml("routes:\n  - path: /p\n    topic: t\n    conflate: {max_rate: 5}\n"), "--check"
    )
    assert "routes[0].conflate.max_rate" in error
    assert "A rate needs conflation" in error

"""Import of Zilla's zilla.yaml: the seeds' two examples, applied and then streamed through the gateway."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from django.core.management.base import CommandError

from common.config.document import document_load
from guards.models import Guard
from streams.config.loading import document_kind
from streams.config.zilla import zilla_translate
from streams.models import Route, Topic
from tests.support.config_commands import FIXTURES, applyconfig, rows
from tests.support.sse_client import EventParser

KAFKA_EXAMPLE = FIXTURES / "zilla.sse.kafka.yaml"
PROXY_EXAMPLE = FIXTURES / "zilla.sse.proxy.jwt.yaml"
WAIT = 30.0


def translate(path: Any) -> Any:
    return zilla_translate(document_load(path.read_text(), str(path)))


def test_both_examples_are_detected_as_zilla() -> None:
    for path in (KAFKA_EXAMPLE, PROXY_EXAMPLE):
        assert document_kind(document_load(path.read_text(), str(path)).data) == "zilla"


def test_sse_kafka_example_translation() -> None:
    translation = translate(KAFKA_EXAMPLE)

    assert translation.document.data == {
        # The kafka client binding's servers: a cluster, which the cache server's bootstrap topics live on.
        "clusters": [{"name": "south_kafka_client", "bootstrap_servers": "kafka:29092"}],
        "topics": [{"name": "events", "cluster": "south_kafka_client"}],
        "routes": [
            {
                # The http server sends only :path /events on to the sse server: /{topic} serves that alone.
                "path": "/events",
                "kind": "sse-kafka",
                "topic": "events",
                "cors": {"allow_origins": ["*"], "allow_credentials": False},
            }
        ],
    }
    skipped = dict(translation.skipped)
    assert set(skipped) == {
        "name",
        "vaults",
        "telemetry",
        "bindings.north_tcp_server",
        "bindings.north_tls_server",
        "bindings.north_http_server",
        "bindings.east_http_filesystem_mapping",
        "bindings.east_filesystem_server",
        "bindings.north_kafka_cache_client",
        "bindings.south_kafka_cache_server",
        "bindings.south_tcp_client",
        "bindings.north_http_server.routes[0].when[0].headers.:scheme",
        "bindings.north_http_server.routes[0].when[0].headers.:authority",
        "bindings.north_http_server.routes[0].when[1].headers.:scheme",
        "bindings.north_http_server.routes[0].when[1].headers.:authority",
    }
    assert "bootstrap servers" in skipped["bindings.south_tcp_client"]


def test_sse_proxy_jwt_example_translation() -> None:
    translation = translate(PROXY_EXAMPLE)
    data = translation.document.data

    (guard,) = data["guards"]
    assert guard["name"] == "authn_jwt"
    assert (guard["issuer"], guard["audience"], guard["challenge"]) == (
        "https://auth.example.com",
        "https://api.example.com",
        10,
    )
    assert [key["kid"] for key in guard["keys"]] == ["example", "example_ec"]
    assert guard["credentials"] == {
        "header": "Bearer {credentials}",
        "header_name": "authorization",
        "query": "access_token",
    }
    assert data["routes"] == [
        {
            "path": "/events",
            "kind": "sse-proxy",
            "upstream": "http://sse-server:8001/events",
            "guard": "authn_jwt",
            "roles": ["proxy:stream"],
            "cors": {"allow_origins": ["*"], "allow_credentials": False},
        }
    ]
    assert {where for where, _ in translation.skipped} == {
        "name",
        "vaults",
        "telemetry",
        "bindings.north_tcp_server",
        "bindings.north_tls_server",
        "bindings.north_http_server",
        "bindings.east_http_filesystem_mapping",
        "bindings.east_filesystem_server",
    }


@pytest.mark.services
def test_proxy_example_applies_with_its_guard(db: None) -> None:
    out = applyconfig(PROXY_EXAMPLE)

    assert out.splitlines()[:2] == ["created guard authn_jwt", "created route /events"]
    assert "skipped vaults: TLS keys and certificates: runstreams --tls-cert/--tls-key" in out.splitlines()
    assert out.splitlines()[-1] == (
        f"{PROXY_EXAMPLE} (zilla import): 2 created, 0 updated, 0 unchanged, 0 deleted; applied"
    )
    guard = Guard.objects.get(name="authn_jwt")
    assert guard.algorithms == ["RS256", "ES256"]
    assert guard.query_param == "access_token"
    # Zilla's example writes n in standard base64; the guard keeps the base64url RFC 7518 asks for.
    assert guard.keys[0]["n"].startswith(
        "qqEu50hX-43Bx4W1UYWnAVKwFm-vDbP0kuIOSLVNa-HKQdHTf-3Sei5UCnkskn796izA29D0DdCy3ET9oaKRHIJy"
    )
    assert not guard.keys[0]["n"].endswith("=")
    assert len(guard.policy().keys) == 2
    route = Route.objects.get(path="/events")
    assert (route.kind, route.upstream, route.guard, route.roles) == (
        "sse-proxy",
        "http://sse-server:8001/events",
        guard,
        ["proxy:stream"],
    )

    before = rows()
    again = applyconfig(PROXY_EXAMPLE)
    assert again.splitlines()[-1].endswith("0 created, 0 updated, 2 unchanged, 0 deleted; applied")
    assert rows() == before


def test_kafka_example_applies_twice_unchanged(db: None) -> None:
    first = applyconfig(KAFKA_EXAMPLE)
    assert first.splitlines()[:3] == [
        "created cluster south_kafka_client",
        "created topic events",
        "created route /events",
    ]
    before = rows()
    assert "0 created, 0 updated, 3 unchanged" in applyconfig(KAFKA_EXAMPLE, "--check")
    assert "0 created, 0 updated, 3 unchanged" in applyconfig(KAFKA_EXAMPLE)
    assert rows() == before
    assert Topic.objects.get(name="events").cache_max_messages == 10_000


HTTP_IN_FRONT = """\
  http_server:
    type: http
    kind: server
    routes:
{routes}
  sse_server:
    type: sse
    kind: server
    exit: sse_kafka
  sse_kafka:
    type: sse-kafka
    kind: proxy
    routes:
      - when:
          - path: /{{topic}}
        exit: kafka_cache_client
        with:
          topic: ${{params.topic}}
"""


def test_http_route_without_a_path_condition_keeps_the_general_route() -> None:
    routes = "      - exit: sse_server"
    translation = zilla_translate(document_load(_zilla(HTTP_IN_FRONT.format(routes=routes)), "z.yaml"))
    assert [(r["path"], r["topic"]) for r in translation.document.data["routes"]] == [("/{topic}", "${params.topic}")]


def test_http_path_and_method_conditions_carry_over() -> None:
    routes = """\
      - when:
          - headers:
              :path: /scores
              :method: GET
          - headers:
              :path: /news
          - headers:
              :path: /uploads
              :method: POST
          - headers:
              :path: /a/b
        exit: sse_server"""
    translation = zilla_translate(document_load(_zilla(HTTP_IN_FRONT.format(routes=routes)), "z.yaml"))
    assert [(r["path"], r["topic"]) for r in translation.document.data["routes"]] == [
        ("/scores", "scores"),
        ("/news", "news"),
    ]
    skipped = dict(translation.skipped)
    assert "POST is not served" in skipped["bindings.http_server.routes[0].when[2].headers.:method"]
    assert "/a/b does not reach" in skipped["bindings.http_server.routes[0].when[3].headers.:path"]


def test_kafka_client_with_sasl_and_tls_becomes_a_cluster() -> None:
    bindings = """\
  cache_server:
    type: kafka
    kind: cache_server
    options:
      bootstrap: [orders]
    exit: kafka_client
  kafka_client:
    type: kafka
    kind: client
    options:
      servers: [b1.example.com:9096, b2.example.com:9096]
      sasl:
        mechanism: scram-sha-512
        username: sluice
        password: ${{env.KAFKA_PASSWORD}}
    exit: tls_client
  tls_client:
    type: tls
    kind: client
    exit: tcp_client
  tcp_client:
    type: tcp
    kind: client
  plain_client:
    type: kafka
    kind: client
    options:
      servers: [k:9092]
      sasl:
        mechanism: plain
        username: u
        password: written-out
"""
    translation = zilla_translate(document_load(_zilla(bindings), "z.yaml"))
    data = translation.document.data
    assert data["clusters"] == [
        {
            "name": "kafka_client",
            "bootstrap_servers": "b1.example.com:9096,b2.example.com:9096",
            "properties": {
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": "sluice",
                "sasl.password": "${env.KAFKA_PASSWORD}",
                "security.protocol": "SASL_SSL",
            },
        },
        {
            "name": "plain_client",
            "bootstrap_servers": "k:9092",
            "properties": {
                "sasl.mechanism": "PLAIN",
                "sasl.username": "u",
                "sasl.password": "${env.PLAIN_CLIENT_SASL_PASSWORD}",
                "security.protocol": "SASL_PLAINTEXT",
            },
        },
    ]
    assert data["topics"] == [{"name": "orders", "cluster": "kafka_client"}]
    skipped = dict(translation.skipped)
    assert "set PLAIN_CLIENT_SASL_PASSWORD" in skipped["bindings.plain_client.options.sasl.password"]
    assert "written-out" not in str(translation.skipped)


def _zilla(bindings: str, guards: str = "") -> str:
    return f"name: test\n{guards}bindings:\n{bindings}"


KAFKA_ROUTES = """\
  sse_server:
    type: sse
    kind: server
    options:
      retry: 5000
    exit: sse_kafka
  sse_kafka:
    type: sse-kafka
    kind: proxy
    routes:
      - when:
          - path: /items/{id}
        guarded:
          jwt1: [read:items]
        exit: kafka_cache_client
        with:
          topic: items-snapshots
          filters:
            - key: ${params.id}
            - headers:
                owner: ${guarded['jwt1'].identity}
          event:
            id: '["${base64(key)}","${etag}"]'
"""
GUARD = """\
guards:
  jwt1:
    type: jwt
    options:
      issuer: https://auth.example.com
      keys: https://auth.example.com/.well-known/jwks.json
      roles: scope
"""


def test_filters_event_id_and_route_guard(db: None, tmp_yaml: Any) -> None:
    path = tmp_yaml(_zilla(KAFKA_ROUTES, GUARD))
    out = applyconfig(path)

    assert "skipped guards.jwt1.options.roles: no Sluice equivalent" in out.splitlines()
    route = Route.objects.get(path="/items/{id}")
    assert (route.topic, route.event_id, route.roles, route.retry_ms) == (
        "items-snapshots",
        "key",
        ["read:items"],
        5000,
    )
    assert route.guard is not None
    assert route.guard.jwks_url == "https://auth.example.com/.well-known/jwks.json"
    assert [(f.key, f.headers) for f in route.filters.all()] == [
        ("${params.id}", {}),
        ("", {"owner": "${identity}"}),
    ]


def test_route_without_path_is_reported_as_skipped(db: None, tmp_yaml: Any) -> None:
    bindings = KAFKA_ROUTES.replace(
        "      - when:\n          - path: /items/{id}\n        guarded:", "      - guarded:"
    )
    out = applyconfig(tmp_yaml(_zilla(bindings, GUARD)))
    assert "skipped bindings.sse_kafka.routes[0]: a route without when.path: every Sluice route has a path" in out
    assert not Route.objects.exists()


def test_unknown_event_id_form_is_an_error_at_its_line(db: None, tmp_yaml: Any) -> None:
    path = tmp_yaml(_zilla(KAFKA_ROUTES.replace('\'["${base64(key)}","${etag}"]\'', "${offset}"), GUARD))
    with pytest.raises(CommandError) as raised:
        applyconfig(path, "--check")
    assert str(raised.value).startswith(f"{path}:32:13: bindings.sse_kafka.routes[0].with.event.id: use ${{etag}} or")


def test_model_errors_point_at_the_zilla_line(db: None, tmp_yaml: Any) -> None:
    path = tmp_yaml(_zilla(KAFKA_ROUTES.replace("topic: items-snapshots", "topic: ${params.nope}"), GUARD))
    with pytest.raises(CommandError) as raised:
        applyconfig(path, "--check")
    assert str(raised.value) == (
        f"{path}:26:11: bindings.sse_kafka.routes[0].with.topic:"
        " ${params.nope} is not a parameter of the path /items/{id}."
    )


async def test_imported_proxy_route_streams_through_the_gateway(
    gateway: Any, stream_db: None, upstream_sse: Any
) -> None:
    """The sse proxy + jwt example imported, then served: its guard and roles hold, events come through.

    Two things only are changed after the import: the upstream (``sse-server:8001`` is not
    on this machine) and the guard's keys (the example publishes no private key to sign with).
    Path, kind, guard, roles, credentials and challenge stay as imported.
    """
    from asgiref.sync import sync_to_async

    from tests.support.tokens import mint as token_mint
    from tests.support.tokens import rsa_key

    await sync_to_async(applyconfig)(PROXY_EXAMPLE)

    def point_at_test_parts() -> None:
        route = Route.objects.get(path="/events")
        route.upstream = f"{upstream_sse.url}/events"
        route.save()
        guard = Guard.objects.get(name="authn_jwt")
        assert (guard.issuer, guard.audience) == ("https://auth.example.com", "https://api.example.com")
        guard.keys = [rsa_key().jwk()]
        guard.algorithms = ["RS256"]
        guard.save()

    await sync_to_async(point_at_test_parts)()
    claims = {"iss": "https://auth.example.com", "aud": "https://api.example.com"}
    async with httpx.AsyncClient(base_url=gateway.url, timeout=WAIT) as client:
        refused = await client.get("/events")
        assert refused.status_code == 401
        no_role = token_mint(scope="read:items", **claims)
        assert (await client.get("/events", params={"access_token": no_role})).status_code == 403
        token = token_mint(scope="proxy:stream", **claims)
        upstream_sse.publish(3)
        async with client.stream(
            "GET", "/events", params={"access_token": token}, headers={"last-event-id": "0"}
        ) as response:
            assert response.status_code == 200
            parser, events = EventParser(), []
            chunks = response.aiter_raw()
            while sum(e.has_data for e in events) < 3:
                events += parser.feed(await anext(chunks))
    assert [e.id for e in events if e.has_data] == ["1", "2", "3"]


ZILLA_MODELS = """\
name: formats
catalogs:
  registry:
    type: karapace-schema-registry
    options:
      url: https://${{env.SR_USER}}:${{env.SR_PASSWORD}}@registry.example.com
  local:
    type: inline
    options:
      subjects:
        scores-value:
          schema: '{"type": "record", "name": "Score", "fields": [{"name": "n", "type": "int"}]}'
  unused:
    type: filesystem
bindings:
  cache_server:
    type: kafka
    kind: cache_server
    options:
      bootstrap: [matches, scores]
      topics:
        - name: matches
          value: {model: avro, catalog: {registry: [{strategy: topic, version: latest}]}}
          key: {model: string}
        - name: scores
          value: {model: avro, catalog: {local: [{subject: scores-value}]}}
        - name: notes
          value: {model: protobuf, catalog: {local: [{subject: notes-value}]}}
"""


def test_topic_models_and_catalogs_become_formats(tmp_yaml: Any) -> None:
    path = tmp_yaml(ZILLA_MODELS)
    translation = translate(path)
    topics = {topic["name"]: topic for topic in translation.document.data["topics"]}
    assert topics["matches"] == {
        "name": "matches",
        "value": {"format": "avro"},
        "key": {"format": "text"},
        "registry": "https://${env.SR_USER}:${env.SR_PASSWORD}@registry.example.com",
    }
    assert topics["scores"] == {
        "name": "scores",
        "value": {
            "format": "avro-inline",
            "avro_schema": {"type": "record", "name": "Score", "fields": [{"name": "n", "type": "int"}]},
        },
    }
    assert "notes" not in topics
    skipped = dict(translation.skipped)
    assert "inline catalogs give avro" in skipped["bindings.cache_server.options.topics[2].value.catalog"]
    assert "not named by any kafka topic" in skipped["catalogs.unused"]


def test_topic_models_apply(db: None, tmp_yaml: Any) -> None:
    path = tmp_yaml(ZILLA_MODELS)
    applyconfig(path)
    matches = Topic.objects.get(name="matches")
    assert (matches.value_format, matches.key_format) == ("avro", "text")
    assert matches.registry == "https://${env.SR_USER}:${env.SR_PASSWORD}@registry.example.com"
    scores = Topic.objects.get(name="scores")
    assert scores.value_format == "avro-inline"
    assert scores.formats().value.inline_schema

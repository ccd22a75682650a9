"""GET /asyncapi.json: an AsyncAPI 3.0 document the reference parser accepts, and applyconfig takes back."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from django.core.management.base import CommandError
from django.test import Client

from guards.models import Guard
from pipeline.models import Pipeline
from streams.models import Route, Schema, Topic
from streams.services import route_upsert, schema_upsert, topic_upsert
from tests.support.config_commands import SPEC_EXAMPLE, applyconfig, rows

PARSER = Path(__file__).resolve().parent / "asyncapi-parser"
NODE = shutil.which("node")
SECRET = "an-hs256-secret-that-is-long-enough-for-tests"


def asyncapi_parser_install() -> None:
    """``npm ci`` the pinned parser on first use (CI does it up front; a fresh clone needs it here)."""
    if (PARSER / "node_modules" / "@asyncapi" / "parser").is_dir():
        return
    npm = shutil.which("npm")
    assert npm is not None, f"the AsyncAPI parser is not installed and npm is missing: npm ci --prefix {PARSER}"
    subprocess.run(
        [npm, "ci", "--prefix", str(PARSER), "--no-audit", "--no-fund"],
        capture_output=True,
        timeout=600,
        check=True,
    )


def asyncapi_validate(document: dict[str, Any]) -> dict[str, Any]:
    """Run @asyncapi/parser (``asyncapi-parser`` here, pinned by its package-lock.json) over ``document``."""
    asyncapi_parser_install()
    result = subprocess.run(
        [str(NODE), str(PARSER / "validate.mjs")],
        input=json.dumps(document),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.stdout, result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def asyncapi_get() -> dict[str, Any]:
    response = Client().get("/asyncapi.json")
    assert response.status_code == 200
    assert response["content-type"] == "application/json"
    document: dict[str, Any] = response.json()
    return document


@pytest.fixture
def configured(db: None) -> None:
    """The SPEC 6 example, a second guard (cookie + custom header, HS256), a route schema and a public route."""
    applyconfig(SPEC_EXAMPLE)
    Guard.objects.create(
        name="cookie_guard",
        algorithms=["HS256"],
        secret=SECRET,
        header_name="x-token",
        header_template="{credentials}",
        cookie_name="session",
    )
    schema_upsert(name="tick", json_schema={"type": "object", "properties": {"n": {"type": "integer"}}})
    topic_upsert(name="ticks", schema=Schema.objects.get(name="tick"))
    route_upsert(path="/ticks", topic="ticks", event_id="key", initial="earliest")
    route_upsert(
        path="/private/{tenant}/{topic}",
        topic="${params.topic}",
        schema=Schema.objects.get(name="score"),
        guard="cookie_guard",
        roles=["read"],
        filters=[{"headers": {"tenant": "${params.tenant}"}}],
    )
    route_upsert(path="/off", topic="off", enabled=False)


@pytest.mark.skipif(NODE is None, reason="node is not installed: the AsyncAPI parser runs on node")
@pytest.mark.services
def test_document_is_valid_asyncapi_3(configured: None) -> None:
    document = asyncapi_get()

    report = asyncapi_validate(document)

    assert report["valid"], report["errors"]
    assert document["asyncapi"] == "3.0.0"


@pytest.mark.skipif(NODE is None, reason="node is not installed: the AsyncAPI parser runs on node")
def test_document_without_routes_is_valid_asyncapi_3(db: None) -> None:
    document = asyncapi_get()
    assert document["channels"] == {}
    report = asyncapi_validate(document)
    assert report["valid"], report["errors"]


def test_one_channel_per_enabled_route(configured: None) -> None:
    document = asyncapi_get()
    channels = {cid: c for cid, c in document["channels"].items() if cid != "multiplexed"}

    assert {c["address"] for c in channels.values()} == {
        "/events/{topic}",
        "/upstream",
        "/ticks",
        "/private/{tenant}/{topic}",
    }
    private = channels["private-tenant-topic"]
    assert set(private["parameters"]) == {"tenant", "topic"}
    assert "parameters" not in channels["ticks"]


def test_the_multiplexed_endpoint_is_described(configured: None) -> None:
    document = asyncapi_get()
    mux = document["channels"]["multiplexed"]
    assert mux["address"] == "/streams"
    assert set(mux["messages"]) == {"member", "ended", "challenge"}  # a guarded route exists
    assert mux["messages"]["ended"]["payload"]["required"] == ["member", "reason"]
    assert document["operations"]["receive-multiplexed"]["channel"] == {"$ref": "#/channels/multiplexed"}
    assert "x-sluice" not in mux  # not a route: the import passes over it


def test_messages_and_payloads(configured: None) -> None:
    channels = asyncapi_get()["channels"]

    events = channels["events-topic"]["messages"]
    assert set(events) == {"message", "delete", "challenge"}  # its guard challenges 10 s before exp
    assert events["challenge"]["payload"]["properties"]["method"] == {"type": "string", "const": "POST"}
    assert events["message"]["payload"] == {"type": "string", "description": "The record's value, as UTF-8 text."}
    # Topic schema for a literal topic, route schema over it.
    assert channels["ticks"]["messages"]["message"]["payload"] == {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
    }
    assert channels["ticks"]["messages"]["message"]["contentType"] == "application/json"
    private = channels["private-tenant-topic"]["messages"]
    assert private["message"]["payload"]["required"] == ["match"]
    assert set(private) == {"message", "delete"}
    assert set(channels["upstream"]["messages"]) == {"message"}  # a proxy forwards events as they come


def test_security_schemes_follow_the_guards(configured: None) -> None:
    document = asyncapi_get()
    schemes = document["components"]["securitySchemes"]

    assert {k: {n: v for n, v in s.items() if n != "description"} for k, s in schemes.items()} == {
        "authn_jwt-header": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"},
        "authn_jwt-query": {"type": "httpApiKey", "name": "access_token", "in": "query"},
        "cookie_guard-header": {"type": "httpApiKey", "name": "x-token", "in": "header"},
        "cookie_guard-cookie": {"type": "httpApiKey", "name": "session", "in": "cookie"},
    }
    operations = document["operations"]
    assert operations["receive-events-topic"]["security"] == [
        {"$ref": "#/components/securitySchemes/authn_jwt-header"},
        {"$ref": "#/components/securitySchemes/authn_jwt-query"},
    ]
    assert "security" not in operations["receive-ticks"]
    assert operations["receive-ticks"]["channel"] == {"$ref": "#/channels/ticks"}


def test_secrets_are_never_published(configured: None) -> None:
    assert SECRET not in json.dumps(asyncapi_get())


@pytest.mark.services
def test_round_trip_into_an_empty_database(configured: None, tmp_path: Path) -> None:
    Route.objects.filter(path="/off").delete()  # disabled routes have no channel
    Guard.objects.filter(name="cookie_guard").update(algorithms=["ES256"], secret="", keys=_ec_keys())
    before = rows()
    exported = tmp_path / "asyncapi.json"
    exported.write_text(json.dumps(asyncapi_get(), indent=2))
    Pipeline.objects.all().delete()  # not part of an AsyncAPI document
    Route.objects.all().delete()
    Topic.objects.all().delete()
    Schema.objects.all().delete()
    Guard.objects.all().delete()

    out = applyconfig(exported)

    assert (
        out.splitlines()[-1] == f"{exported} (asyncapi import): 10 created, 0 updated, 0 unchanged, 0 deleted; applied"
    )
    assert rows() == before
    assert "0 created, 0 updated, 10 unchanged" in applyconfig(exported)


def _ec_keys() -> list[dict[str, str]]:
    return [
        {
            "kty": "EC",
            "crv": "P-256",
            "kid": "ec",
            "alg": "ES256",
            "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
            "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0",
        }
    ]


def test_channels_without_sluice_extension_are_skipped(db: None, tmp_yaml: Any) -> None:
    path = tmp_yaml(
        "asyncapi: 3.0.0\ninfo: {title: t, version: '1'}\n"
        "channels:\n  other: {address: /other}\n"
        "  mine:\n    address: /mine\n    x-sluice: {path: /mine, topic: mine}\n"
    )
    out = applyconfig(path)
    assert "skipped channels.other: no x-sluice route: not a channel Sluice can serve" in out.splitlines()
    assert list(Route.objects.values_list("path", flat=True)) == ["/mine"]


def test_asyncapi_errors_point_into_the_document(db: None, tmp_yaml: Any) -> None:
    path = tmp_yaml(
        "asyncapi: 3.0.0\ninfo: {title: t, version: '1'}\n"
        "channels:\n  mine:\n    address: /mine\n    x-sluice:\n      path: /mine\n      topic: ${params.x}\n"
    )
    with pytest.raises(CommandError) as raised:
        applyconfig(path, "--check")
    assert str(raised.value) == (
        f"{path}:8:7: channels.mine.x-sluice.topic: ${{params.x}} is not a parameter of the path /mine."
    )


def test_asyncapi_2_is_refused(db: None, tmp_yaml: Any) -> None:
    with pytest.raises(CommandError, match=r"config\.yaml:1:1: asyncapi: only AsyncAPI 3 documents"):
        applyconfig(tmp_yaml("asyncapi: 2.6.0\ninfo: {title: t, version: '1'}\nchannels: {}\n"))


def test_decoded_payloads_are_described(db: None) -> None:
    from streams.services import route_upsert, topic_upsert

    schema = {"type": "record", "name": "Reading", "fields": [{"name": "celsius", "type": "double"}]}
    topic_upsert(name="readings", value_format="avro-inline", value_avro_schema=schema)
    topic_upsert(name="orders", value_format="avro", registry="http://127.0.0.1:9")  # nothing answers there
    route_upsert(path="/readings", topic="readings")
    route_upsert(path="/orders", topic="orders")
    document = asyncapi_get()
    channels = document["channels"].values()
    messages = {channel["address"]: channel["messages"].get("message") for channel in channels}
    assert messages["/readings"]["contentType"] == "application/json"
    assert messages["/readings"]["payload"]["properties"] == {"celsius": {"type": "number"}}
    assert messages["/orders"]["payload"]["x-sluice-format"] == "avro"
    assert "orders-value" in messages["/orders"]["payload"]["description"]
    report = asyncapi_validate(document)
    assert report["valid"], report


def test_routes_that_take_a_client_filter_say_so(configured: None) -> None:
    route_upsert(path="/scores", topic="scores", where="value.goals > ${query.min}", client_filter=True)
    document = asyncapi_get()
    operation = next(op for op in document["operations"].values() if op["summary"].startswith("Open /scores "))
    query = operation["bindings"]["http"]["query"]
    assert set(query["properties"]) == {"where", "min"}
    assert query["required"] == ["min"]
    assert query["properties"]["where"]["maxLength"] == 512
    others = [op for op in document["operations"].values() if not op["summary"].startswith("Open /scores ")]
    assert all("bindings" not in op for op in others)
    channel = next(ch for ch in document["channels"].values() if ch["address"] == "/scores")
    assert channel["x-sluice"]["where"] == "value.goals > ${query.min}"
    assert channel["x-sluice"]["client_filter"] is True
    if NODE is not None:
        report = asyncapi_validate(document)
        assert report["valid"], report["errors"]


def test_a_conflated_route_says_what_its_streams_receive(configured: None) -> None:
    route_upsert(path="/ticks", topic="ticks", conflate="key", conflate_max_rate=5)
    document = asyncapi_get()
    channel = next(ch for ch in document["channels"].values() if ch["address"] == "/ticks")
    assert channel["x-sluice"]["conflate"] == {"by": "key", "max_rate": 5}
    assert channel["description"].startswith("Conflated by key: at most 5 writes a second")
    others = [ch for ch in document["channels"].values() if ch["address"] != "/ticks"]
    assert all("conflate" not in ch.get("x-sluice", {}) for ch in others)
    if NODE is not None:
        report = asyncapi_validate(document)
        assert report["valid"], report["errors"]

"""Value filters end to end: a real gateway and broker (and registry), records read as a browser reads them."""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest

from streams.core.ids import progress_decode
from tests.streams.edge.test_wire import QUIET, WAIT, Stream, error_body, open_stream
from tests.support.schema_registry import RegistryServer, registry_running
from tests.support.tokens import guard_fields, mint


@pytest.fixture
async def client(gateway: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=gateway.url, timeout=httpx.Timeout(WAIT)) as http:
        yield http


@pytest.fixture
def guard(stream_db: None) -> Callable[..., str]:
    from guards.services import guard_upsert

    def make(**overrides: Any) -> str:
        name = f"g-{uuid.uuid4().hex[:8]}"
        guard_upsert(name=name, **guard_fields(**overrides))
        return name

    return make


@pytest.fixture(scope="module")
def registry() -> Iterator[RegistryServer]:
    with registry_running() as server:
        yield server


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def match(n: int, league: str, tenant: str, home: int) -> str:
    return json.dumps({"n": n, "match": {"league": league, "tenant": tenant, "score": {"home": home, "away": 0}}})


async def test_json_nested_fields_with_path_and_claim_placeholders(client, kafka, route, guard) -> None:
    topic = kafka.topic()
    route(
        path="/f/json/{topic}/{league}",
        topic="${params.topic}",
        guard=guard(attributes={"tenant": "org"}),
        where="value.match.league == ${params.league} and value.match.tenant == ${claims.tenant} "
        "and value.match.score.home > 2",
        heartbeat_seconds=QUIET,
    )
    records = [
        match(0, "EU", "acme", 3),  # passes
        match(1, "US", "acme", 5),  # another league
        match(2, "EU", "other", 4),  # another tenant
        match(3, "EU", "acme", 1),  # too few goals
        match(4, "EU", "acme", 7),  # passes
    ]
    async with open_stream(client, f"/f/json/{topic}/EU", headers=bearer(mint(org="acme"))) as stream:
        await stream.started()
        for value in records:
            kafka.produce(topic, value, key="m")
        await stream.read_messages(2)
    assert [json.loads(data)["n"] for data in stream.data] == [0, 4]
    assert progress_decode(stream.messages[-1].id) == {0: 5}


async def test_a_client_filter_narrows_and_cannot_widen(client, kafka, route) -> None:
    topic = kafka.topic()
    route(
        path="/f/client/{topic}",
        topic="${params.topic}",
        where='value.match.tenant == "acme"',
        client_filter=True,
        initial="earliest",
        heartbeat_seconds=QUIET,
    )
    for n, (tenant, home) in enumerate([("acme", 1), ("other", 9), ("acme", 4), ("other", 2), ("acme", 6)]):
        kafka.produce(topic, match(n, "EU", tenant, home))
    path = f"/f/client/{topic}"
    async with open_stream(client, path, params={"where": "value.match.score.home > 3"}) as narrow:
        await narrow.read_messages(2)
    assert [json.loads(data)["n"] for data in narrow.data] == [2, 4]
    widen = 'value.match.tenant == "other" or true'
    async with open_stream(client, path, params={"where": widen}) as wide:
        await wide.read_messages(3)
    assert [json.loads(data)["n"] for data in wide.data] == [0, 2, 4]
    bad = error_body(await client.get(path, params={"where": "value.match.score.home >"}), 400, "invalid_filter")
    assert bad["position"] == 25
    assert "position 25" in bad["detail"]
    sneaky = error_body(await client.get(path, params={"where": "value.x == ${params.topic}"}), 400, "invalid_filter")
    assert sneaky["position"] == 12


async def test_a_route_without_client_filters_refuses_where(client, kafka, route) -> None:
    topic = kafka.topic()
    route(path="/f/closed/{topic}", topic="${params.topic}", where="value.n > 1")
    body = error_body(await client.get(f"/f/closed/{topic}", params={"where": "true"}), 400, "invalid_filter")
    assert "takes no client filter" in body["detail"]


async def test_lossless_resume_across_random_cuts(client, kafka, route) -> None:
    topic = kafka.topic(partitions=3)
    route(
        path="/f/resume/{topic}",
        topic="${params.topic}",
        where="value.keep and value.n >= 0",
        initial="earliest",
        heartbeat_seconds=QUIET,
    )
    rng = random.Random(31)
    keep = set()
    for n in range(300):
        wanted = rng.random() < 0.4
        keep.update([n] if wanted else [])
        kafka.produce(topic, json.dumps({"n": n, "keep": wanted}), key=f"k{n % 7}", partition=n % 3, flush=False)
    kafka.producer.flush()
    got: list[int] = []
    last: str | None = None
    for _ in range(20):  # each cut keeps what the client saw before it: a random number of events
        headers = {"Last-Event-ID": last} if last else None
        async with open_stream(client, f"/f/resume/{topic}", headers=headers) as stream:
            seen = (await stream.read_messages(1))[: rng.randint(1, len(keep) // 25)]
        got += [json.loads(event.data)["n"] for event in seen]
        last = seen[-1].id
    headers = {"Last-Event-ID": last} if last else None
    async with open_stream(client, f"/f/resume/{topic}", headers=headers) as rest:
        await rest.read_messages(len(keep) - len(got))
    got += [json.loads(data)["n"] for data in rest.data]
    assert len(got) == len(set(got))
    assert set(got) == keep


async def test_a_snapshot_with_a_filter_gives_the_matching_state_per_key(client, kafka, route) -> None:
    topic = kafka.topic()
    route(
        path="/f/snap/{topic}",
        topic="${params.topic}",
        initial="snapshot",
        where="value.goals > 2",
        heartbeat_seconds=1,
    )
    kafka.produce(topic, '{"m":"a","goals":3}', key="a")  # a matched, then did not
    kafka.produce(topic, '{"m":"b","goals":1}', key="b")
    kafka.produce(topic, '{"m":"a","goals":0}', key="a")
    kafka.produce(topic, '{"m":"b","goals":4}', key="b")  # b's state matches now
    kafka.produce(topic, '{"m":"c","goals":5}', key="c")
    async with open_stream(client, f"/f/snap/{topic}") as stream:
        await stream.read_messages(2)
        kafka.produce(topic, '{"m":"a","goals":9}', key="a")  # then live, filtered too
        kafka.produce(topic, '{"m":"d","goals":0}', key="d")
        kafka.produce(topic, '{"m":"e","goals":3}', key="e")
        await stream.read_messages(4)
    assert [json.loads(data)["m"] for data in stream.data] == ["b", "c", "a", "e"]


def serializer(kind: str, registry: RegistryServer, schema: Any) -> Any:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    registry_client = SchemaRegistryClient({"url": registry.registry.url})
    if kind == "avro":
        inner = AvroSerializer(registry_client, json.dumps(schema))
    else:
        inner = ProtobufSerializer(schema, registry_client, {"use.deprecated.format": False})

    def serialize(topic: str, value: Any) -> bytes:
        return inner(value, SerializationContext(topic, MessageField.VALUE))

    return serialize


TEAM_AVRO = {
    "type": "record",
    "name": "Fixture",
    "fields": [
        {"name": "id", "type": "string"},
        {
            "name": "home",
            "type": {
                "type": "record",
                "name": "Side",
                "fields": [{"name": "name", "type": "string"}, {"name": "goals", "type": "int"}],
            },
        },
    ],
}


@pytest.mark.services
async def test_avro_nested_fields_with_a_path_placeholder(client, kafka, route, registry) -> None:
    from streams.services import topic_upsert

    topic = kafka.topic()
    topic_upsert(name=topic, value_format="avro", registry=registry.registry.url)
    route(
        path="/f/avro/{topic}/{team}",
        topic="${params.topic}",
        where='value.home.name == "${params.team}" and value.home.goals >= 2',
        heartbeat_seconds=QUIET,
    )
    serialize = serializer("avro", registry, TEAM_AVRO)
    async with open_stream(client, f"/f/avro/{topic}/Lions") as stream:
        await stream.started()
        for n, (name, goals) in enumerate([("Lions", 1), ("Bears", 3), ("Lions", 2), ("Lions", 5)]):
            kafka.produce(topic, serialize(topic, {"id": f"m{n}", "home": {"name": name, "goals": goals}}))
        await stream.read_messages(2)
    assert [json.loads(data)["id"] for data in stream.data] == ["m2", "m3"]


@pytest.mark.services
async def test_protobuf_nested_fields_with_a_claim_placeholder(client, kafka, route, registry, guard) -> None:
    from streams.services import topic_upsert
    from tests.support.protobuf_messages import Match

    topic = kafka.topic()
    topic_upsert(name=topic, value_format="protobuf", registry=registry.registry.url)
    route(
        path="/f/proto/{topic}",
        topic="${params.topic}",
        guard=guard(attributes={"team": "team"}),
        where='value.home.name == ${claims.team} and value.home.goals > 1 and value.status == "LIVE"',
        heartbeat_seconds=QUIET,
    )
    serialize = serializer("protobuf", registry, Match)
    messages = []
    for n, (name, goals, status) in enumerate(
        [
            ("Lions", 2, Match.LIVE),
            ("Lions", 3, Match.FINISHED),
            ("Bears", 4, Match.LIVE),
            ("Lions", 1, Match.LIVE),
            ("Lions", 6, Match.LIVE),
        ]
    ):
        message = Match(id=f"m{n}", status=status)
        message.home.name, message.home.goals = name, goals
        messages.append(message)
    async with open_stream(client, f"/f/proto/{topic}", headers=bearer(mint(team="Lions"))) as stream:
        await stream.started()
        for message in messages:
            kafka.produce(topic, serialize(topic, message))
        await stream.read_messages(2)
    assert [json.loads(data)["id"] for data in stream.data] == ["m0", "m4"]


async def test_multiplexed_members_honour_their_filters(client, kafka, route) -> None:
    topic, tag = kafka.topic(), uuid.uuid4().hex[:6]
    route(path=f"/f/mx/{tag}/big", topic=topic, where="value.match.score.home > 3", client_filter=True)
    route(path=f"/f/mx/{tag}/eu", topic=topic, where='value.match.league == "EU"')
    query = httpx.QueryParams([("s", f"big:/f/mx/{tag}/big"), ("s", f"eu:/f/mx/{tag}/eu")])
    refused = await client.get("/streams", params=query.add("where", "true"))
    assert error_body(refused, 400, "invalid_filter")["member"] == "big"
    async with client.stream("GET", "/streams", params=query) as response:
        assert response.status_code == 200
        stream = Stream(response)
        await stream.started()
        for n, (league, home) in enumerate([("US", 5), ("EU", 1), ("EU", 4), ("US", 0)]):
            kafka.produce(topic, match(n, league, "acme", home))
        await stream.read_messages(4)
    got = sorted((event.type, json.loads(event.data)["n"]) for event in stream.messages)
    assert got == [("big", 0), ("big", 2), ("eu", 1), ("eu", 2)]

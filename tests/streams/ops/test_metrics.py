"""``/metrics`` of a real gateway: valid Prometheus text whose counters move as events flow, and the access log."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from streams.edge.authorization.reauthorization import CHALLENGE_CONTENT_TYPE
from tests.streams.edge.test_wire import WAIT, open_stream
from tests.support.polling import condition_wait, condition_wait_async
from tests.support.tokens import guard_fields, mint

pytestmark = pytest.mark.services


@pytest.fixture
async def client(gateway: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=gateway.url, timeout=httpx.Timeout(WAIT)) as http:
        yield http


async def scrape(client: httpx.AsyncClient) -> dict[str, list[tuple[dict[str, str], float]]]:
    """``{sample name: [(labels, value), ...]}``, parsed by prometheus-client's own parser."""
    response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((dict(sample.labels), float(sample.value)))
    return samples


def value(samples: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str) -> float:
    return sum(v for found, v in samples.get(name, []) if all(found.get(k) == x for k, x in labels.items()))


async def test_counters_move_as_events_flow(client, gateway, kafka, route) -> None:
    topic = kafka.topic(partitions=2)
    path = f"/m/flow/{uuid.uuid4().hex[:8]}"
    route(path=path, topic=topic, filters=[{"headers": {"tag": "blue"}}])
    before = await scrape(client)
    assert value(before, "sluice_kafka_consumers") >= 0
    async with open_stream(client, path, params={"access_token": "not-logged"}) as stream:
        await stream.started()
        samples = await scrape(client)
        assert value(samples, "sluice_streams_open", route=path, topic=topic) == 1
        for n in range(6):
            kafka.produce(topic, f"e{n}", partition=n % 2, headers={"tag": "blue" if n % 3 else "red"}, flush=False)
        kafka.flush()
        await stream.read_messages(4)
        sent = sum(len(e.data) for e in stream.messages)

        async def moved() -> dict[str, list[tuple[dict[str, str], float]]] | None:
            now = await scrape(client)
            labels = {"route": path, "topic": topic}
            ok = (
                value(now, "sluice_events_delivered_total", **labels) == 4
                and value(now, "sluice_events_dropped_total", reason="filter", **labels) == 2
                and value(now, "sluice_records_total", topic=topic) == 6
                and len([s for s in now.get("sluice_kafka_consumer_lag", []) if s[0]["topic"] == topic]) == 2
            )
            return now if ok else None

        now = await condition_wait_async(moved, within=WAIT, what="delivered and dropped counts")
        assert value(now, "sluice_bytes_delivered_total", route=path, topic=topic) > sent
        assert value(now, "sluice_kafka_consumer_lag", topic=topic) == 0  # level with the topic's end
    after = await condition_wait_async(
        lambda: _closed(client, path, topic), within=WAIT, what="the stream's gauge to drop"
    )
    assert value(after, "sluice_streams_open", route=path, topic=topic) == 0

    # One JSON line at open and one at close, without the query string.
    def access_lines() -> list[dict[str, Any]]:
        lines = [line.split("sluice.access: ", 1)[1] for line in gateway.output if "sluice.access: " in line]
        return [entry for entry in map(json.loads, lines) if entry["route"] == path]

    entries = condition_wait(lambda: len(access_lines()) >= 2 and access_lines(), within=WAIT, what="access log")
    opened, closed = entries
    assert (opened["event"], closed["event"]) == ("open", "close")
    assert (closed["path"], closed["status"], closed["events"]) == (path, 200, 4)
    assert closed["bytes"] > sent
    assert closed["duration"] >= 0
    assert closed["client"].startswith("127.0.0.1:")
    assert not any("not-logged" in line for line in gateway.output)


async def _closed(client: httpx.AsyncClient, path: str, topic: str) -> Any:
    now = await scrape(client)
    return now if value(now, "sluice_streams_open", route=path, topic=topic) == 0 else None


async def test_refusals_and_challenges_counted(client, kafka, route, stream_db) -> None:
    from guards.services import guard_upsert

    name = f"g-{uuid.uuid4().hex[:8]}"
    guard_upsert(name=name, **guard_fields(challenge=1))
    path = f"/m/guarded/{uuid.uuid4().hex[:8]}"
    route(path=path, topic=kafka.topic(), guard=name, roles=["read:items"], heartbeat_seconds=3600)
    assert (await client.get(path)).status_code == 401
    assert (await client.get(path, headers={"authorization": "Bearer x.y.z"})).status_code == 401
    assert (await client.get(path, headers={"authorization": f"Bearer {mint(scope='other')}"})).status_code == 403
    token = mint(exp=int(time.time()) + 3)
    async with open_stream(client, path, headers={"authorization": f"Bearer {token}"}) as stream:
        await stream.read_until(lambda s: any(e.type == "challenge" for e in s.events))
        answer = await client.post(
            path,
            headers={"content-type": CHALLENGE_CONTENT_TYPE, "authorization": f"Bearer {mint()}"},
        )
        assert answer.status_code == 204
    samples = await scrape(client)
    assert value(samples, "sluice_admission_refusals_total", route=path, reason="unauthorized") == 1
    assert value(samples, "sluice_admission_refusals_total", route=path, reason="insufficient_roles") == 1
    assert value(samples, "sluice_admission_refusals_total", route=path) == 3
    assert value(samples, "sluice_challenges_sent_total", route=path) == 1
    assert value(samples, "sluice_challenges_answered_total", route=path, result="accepted") == 1


async def test_delivery_lag_and_fetch_lag_are_exported(client, kafka, route) -> None:
    topic = kafka.topic()
    path = f"/m/lag/{uuid.uuid4().hex[:8]}"
    route(path=path, topic=topic)
    async with open_stream(client, path) as stream:
        await stream.started()
        # Timestamps set by the producer (CreateTime): one 5 s in the past, so the histogram's sum shows it.
        kafka.produce(topic, "late", timestamp=int(time.time() * 1000) - 5000)
        await stream.read_messages(1)

        async def observed() -> dict[str, list[tuple[dict[str, str], float]]] | None:
            now = await scrape(client)
            return now if value(now, "sluice_delivery_lag_seconds_count", route=path, topic=topic) >= 1 else None

        now = await condition_wait_async(observed, within=WAIT, what="the delivery lag to be observed")
    labels = {"route": path, "topic": topic}
    assert value(now, "sluice_delivery_lag_seconds_sum", **labels) >= 5.0
    assert value(now, "sluice_delivery_lag_seconds_bucket", le="+Inf", **labels) == 1
    assert value(now, "sluice_delivery_lag_seconds_bucket", le="5.0", **labels) == 0
    assert [labels for labels, _ in now["sluice_fetch_lag_records"]] == [{"cluster": "default"}]
    assert value(now, "sluice_fetch_lag_records", cluster="default") >= 0
    assert value(now, "sluice_fetch_lag_seconds", cluster="default") >= 0

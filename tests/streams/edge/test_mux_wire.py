"""Several routes in one stream (``/streams``), end to end: a real gateway, a real broker, bytes as sent."""

from __future__ import annotations

import asyncio
import functools
import json
import random
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from streams.core.ids import progress_from_bytes
from streams.core.mux.ids import composite_decode
from streams.edge.authorization.reauthorization import CHALLENGE_CONTENT_TYPE
from tests.streams.edge.test_wire import QUIET, WAIT, Stream, error_body, open_stream
from tests.support.metrics_scrape import metric_wait, metrics_parse
from tests.support.raw_stream import small_window_stream
from tests.support.tokens import guard_fields, mint
from tests.support.upstream_server import event_fields

pytestmark = pytest.mark.services


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


def members(*values: str) -> httpx.QueryParams:
    return httpx.QueryParams([("s", value) for value in values])


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def positions(event_id: str, count: int) -> list[dict[int, int]]:
    """The progress of each (Kafka) member in a composite id."""
    return [progress_from_bytes(part) if part else {} for part in composite_decode(event_id, count)]


async def test_members_are_labelled_their_data_untouched_and_one_id_resumes_them_all(
    client: httpx.AsyncClient, kafka: Any, route: Any
) -> None:
    scores, notes = kafka.topic(partitions=2), kafka.topic()
    tag = uuid.uuid4().hex[:6]
    route(path=f"/mx/{tag}/scores", topic=scores, initial="earliest", heartbeat_seconds=QUIET)
    route(path=f"/mx/{tag}/notes/{{kind}}", topic=notes, initial="earliest", heartbeat_seconds=QUIET)
    kafka.produce(scores, '{"home": 1,\n "away": 0}', key="m1", partition=1)
    kafka.produce(notes, "été ✓", key="n1")
    kafka.produce(scores, None, key="m1", partition=1)  # a tombstone: a delete event
    query = members(f"scores:/mx/{tag}/scores", f"/mx/{tag}/notes/any")
    async with open_stream(client, "/streams", params=query) as stream:
        events = await stream.read_messages(3)
        assert stream.raw.startswith(b"retry: 2000\nid: ")
    by_member = {(e.type, e.data) for e in events}
    assert by_member == {("scores", '{"home": 1,\n "away": 0}'), ("1", "été ✓"), ("scores.delete", "bTE=")}
    last = events[-1].id
    assert last is not None
    assert positions(last, 2) == [{0: 0, 1: 2}, {0: 1}]

    # Resume from the first event: exactly what came after it, for both members, and the new records.
    first = events[0]
    assert first.id is not None
    kafka.produce(notes, "later", key="n2")
    kafka.produce(scores, "goal", key="m2", partition=0)
    async with open_stream(client, "/streams", params=query, headers={"last-event-id": first.id}) as stream:
        assert await stream.started() == first.id
        resumed = await stream.read_messages(4)
    assert sorted((e.type, e.data) for e in resumed) == sorted(
        [(e.type, e.data) for e in events[1:]] + [("1", "later"), ("scores", "goal")]
    )


async def test_a_proxy_member_beside_a_kafka_member(
    client: httpx.AsyncClient, kafka: Any, route: Any, upstream_sse: Any
) -> None:
    topic, tag = kafka.topic(), uuid.uuid4().hex[:6]
    route(path=f"/mx/{tag}/k", topic=topic, initial="earliest", heartbeat_seconds=QUIET)
    events_url = f"{upstream_sse.url}/events"
    route(path=f"/mx/{tag}/up", kind="sse-proxy", upstream=events_url, topic="", heartbeat_seconds=QUIET)
    query = members(f"k:/mx/{tag}/k", f"up:/mx/{tag}/up")
    kafka.produce(topic, "from kafka")
    async with open_stream(client, "/streams", params=query) as stream:
        await stream.read_data("from kafka")
        upstream_sse.publish(4)  # events 1 to 4
        await stream.read_until(lambda s: len(s.messages) >= 5)
    upstream = [(e.type, e.data) for e in stream.messages if e.type.startswith("up")]
    assert upstream == [relabelled("up", n) for n in range(1, 5)]
    second = next(e for e in stream.messages if e.data == "event 2")
    assert second.id is not None
    assert composite_decode(second.id, 2)[1] == b"2"
    # The upstream is asked from the proxy member's part; the Kafka member from its own.
    async with open_stream(client, "/streams", params=query, headers={"last-event-id": second.id}) as stream:
        await stream.read_until(lambda s: len(s.messages) >= 2)
    assert [(e.type, e.data) for e in stream.messages] == [relabelled("up", 3), relabelled("up", 4)]
    assert "2" in upstream_sse.log()


def relabelled(alias: str, n: int) -> tuple[str, str]:
    """Upstream event ``n`` as the multiplexed stream carries it: (event name, data)."""
    _, kind, data = event_fields(n)
    return (alias if kind == "message" else f"{alias}.{kind}", data)


@pytest.mark.parametrize(
    ("query", "status", "code", "member"),
    [
        ([], 400, "invalid_members", None),
        (members("/a", "bad alias:/b"), 400, "invalid_members", None),
        (members("ok:/mx-none/x"), 404, "unknown_route", "ok"),
        (members("/healthz"), 404, "unknown_route", "0"),
    ],
)
async def test_bad_member_lists_are_refused_with_json(
    client: httpx.AsyncClient, query: list[tuple[str, str]], status: int, code: str, member: str | None
) -> None:
    body = error_body(await client.get("/streams", params=query), status, code)
    assert body.get("member") == member


async def test_ids_that_are_not_this_streams_composite_are_400(
    client: httpx.AsyncClient, kafka: Any, route: Any
) -> None:
    topic, tag = kafka.topic(), uuid.uuid4().hex[:6]
    route(path=f"/mx/{tag}/a", topic=topic)
    query = members(f"/mx/{tag}/a", f"/mx/{tag}/a")
    # A single route's id, three positions for two members, a truncated part, not base64url.
    for bad in ("AQIAAg==", "AgAAAA", "AgIBAgIB", "!!"):
        response = await client.get("/streams", params=query, headers={"last-event-id": bad})
        assert "member" not in error_body(response, 400, "invalid_last_event_id")
    # A first member's part that is no Kafka progress.
    response = await client.get("/streams", params=query, headers={"last-event-id": "AgEAAA"})
    assert error_body(response, 400, "invalid_last_event_id")["member"] == "0"
    response = await client.put("/streams", params=query)
    assert error_body(response, 405, "method_not_allowed")
    assert response.headers["allow"] == "GET, HEAD"
    head = await client.head("/streams", params=query)
    assert head.status_code == 200
    assert head.headers["content-type"].startswith("text/event-stream")


async def test_every_guarded_member_must_admit_the_token(
    client: httpx.AsyncClient, kafka: Any, route: Any, guard: Callable[..., str]
) -> None:
    topic, tag, name = kafka.topic(), uuid.uuid4().hex[:6], guard()
    route(path=f"/mx/{tag}/public", topic=topic)
    route(path=f"/mx/{tag}/items", topic=topic, guard=name, roles=["read:items"])
    route(path=f"/mx/{tag}/admin", topic=topic, guard=name, roles=["admin"])
    query = members(f"p:/mx/{tag}/public", f"items:/mx/{tag}/items", f"adm:/mx/{tag}/admin")
    missing = error_body(await client.get("/streams", params=query), 401, "unauthorized")
    assert missing["member"] == "items"
    assert missing["detail"].startswith(f"member items (/mx/{tag}/items): ")
    forbidden = error_body(
        await client.get("/streams", params=query, headers=bearer(mint(scope="read:items"))), 403, "forbidden"
    )
    assert (forbidden["member"], forbidden["reason"]) == ("adm", "insufficient_roles")
    allowed = await client.head("/streams", params=query, headers=bearer(mint(scope="read:items admin")))
    assert allowed.status_code == 200


async def test_one_challenge_answer_extends_the_whole_stream(
    client: httpx.AsyncClient, kafka: Any, route: Any, guard: Callable[..., str]
) -> None:
    topic, other, tag = kafka.topic(), kafka.topic(), uuid.uuid4().hex[:6]
    name = guard(challenge=3)
    route(path=f"/mx/{tag}/a", topic=topic, guard=name, roles=["read:items"], heartbeat_seconds=1)
    route(path=f"/mx/{tag}/b", topic=other, guard=name, roles=["write:items"], heartbeat_seconds=1)
    route(path=f"/mx/{tag}/open", topic=other, heartbeat_seconds=1)
    query = members(f"a:/mx/{tag}/a", f"b:/mx/{tag}/b", f"o:/mx/{tag}/open")
    first_exp = int(time.time()) + 5
    async with open_stream(client, "/streams", params=query, headers=bearer(mint(exp=first_exp))) as stream:
        await stream.read_until(lambda s: any(e.type == "challenge" for e in s.events))
        challenge = next(e for e in stream.events if e.type == "challenge")
        assert json.loads(challenge.data) == {"method": "POST", "headers": {"content-type": CHALLENGE_CONTENT_TYPE}}
        # A token without write:items does not admit member b: refused, naming it.
        refused = await client.post(
            "/streams",
            params=query,
            headers={"content-type": CHALLENGE_CONTENT_TYPE, **bearer(mint(scope="read:items", exp=first_exp + 60))},
        )
        assert error_body(refused, 403, "forbidden")["member"] == "b"
        answer = await client.post(
            "/streams",
            params=query,
            headers={"content-type": CHALLENGE_CONTENT_TYPE, **bearer(mint(exp=first_exp + 4))},
        )
        assert answer.status_code == 204
        # Past the first exp, every member still delivers.
        await asyncio.sleep(max(0.0, first_exp + 1 - time.time()))
        kafka.produce(topic, "after the first exp")
        kafka.produce(other, "to b and o")
        await stream.read_until(lambda s: len(delivered(s)) >= 3)
        assert sorted(delivered(stream)) == [
            ("a", "after the first exp"),
            ("b", "to b and o"),
            ("o", "to b and o"),
        ]
        # Not answered again: the whole stream ends at the new exp, not before.
        ended = await stream_end(stream)
    assert ended >= first_exp + 4 - 1


def delivered(stream: Stream) -> list[tuple[str, str]]:
    """The members' events so far (not the stream's own challenges)."""
    return [(e.type, e.data) for e in stream.messages if e.type != "challenge"]


async def stream_end(stream: Stream) -> float:
    """Read until the server ends the response; when it did."""

    async def drain() -> None:
        async for chunk in stream._chunks:
            stream.raw += chunk
            stream.events += stream.parser.feed(chunk)

    await asyncio.wait_for(drain(), WAIT)
    return time.time()


async def test_a_multiplexed_stream_counts_once_per_address(
    gateway_factory: Callable[..., Any], kafka: Any, route: Any
) -> None:
    gateway = gateway_factory(SLUICE_MAX_STREAMS_PER_ADDRESS="1")
    topic, tag = kafka.topic(), uuid.uuid4().hex[:6]
    for letter in "abc":
        route(path=f"/mx/{tag}/{letter}", topic=topic, heartbeat_seconds=QUIET)
    query = members(*(f"{letter}:/mx/{tag}/{letter}" for letter in "abc"))
    async with (
        httpx.AsyncClient(base_url=gateway.url, timeout=httpx.Timeout(WAIT)) as http,
        open_stream(http, "/streams", params=query) as stream,
    ):
        await stream.started()
        error_body(await http.get(f"/mx/{tag}/a"), 429, "too_many_streams")
        text = (await http.get("/metrics")).text
        assert metrics_parse(text)["sluice_multiplexed_streams"] == 1
        assert metrics_parse(text)["sluice_multiplexed_members"] == 3
        for letter in "abc":  # each member counted under its own route
            assert f'route="/mx/{tag}/{letter}"' in text


# -- twenty cuts ----------------------------------------------------------------------------


def holds(count: int, stream: Stream) -> bool:
    return len(stream.messages) >= count


class Producer(threading.Thread):
    """Keyed records into three topics until stopped; remembers every one by topic."""

    def __init__(self, kafka: Any, topics: list[str]) -> None:
        super().__init__(daemon=True)
        self.kafka, self.topics = kafka, topics
        self.sent: dict[str, list[tuple[str, str]]] = defaultdict(list)
        self.halt = threading.Event()

    def run(self) -> None:
        rng = random.Random(7)
        n = 0
        while not self.halt.is_set():
            for topic in self.topics:
                key = f"k{rng.randrange(4)}"
                value = f"{topic[-6:]}-{n}"
                self.kafka.produce(topic, value, key=key, flush=False)
                self.sent[topic].append((key, value))
            n += 1
            if n % 10 == 0:
                self.kafka.flush()
            self.halt.wait(0.01)
        self.kafka.flush()


async def test_twenty_random_cuts_lose_and_repeat_nothing_for_any_member(
    client: httpx.AsyncClient, kafka: Any, route: Any
) -> None:
    topics = [kafka.topic(partitions=3) for _ in range(3)]
    tag = uuid.uuid4().hex[:6]
    route(path=f"/mx/{tag}/all/{{t}}", topic="${params.t}", initial="earliest", heartbeat_seconds=1)
    route(
        path=f"/mx/{tag}/key/{{t}}/{{k}}",
        topic="${params.t}",
        initial="earliest",
        heartbeat_seconds=1,
        filters=[{"key": "${params.k}"}],
    )
    query = members(f"a:/mx/{tag}/all/{topics[0]}", f"b:/mx/{tag}/all/{topics[1]}", f"c:/mx/{tag}/key/{topics[2]}/k1")
    producer = Producer(kafka, topics)
    producer.start()
    received: dict[str, list[str]] = defaultdict(list)
    rng = random.Random(20)
    last: str | None = None
    try:
        for _ in range(20):
            headers = {"last-event-id": last} if last else {}
            wanted = rng.randrange(1, 60)
            async with open_stream(client, "/streams", params=query, headers=headers) as stream:
                await stream.read_until(functools.partial(holds, wanted))
                # Cut at once, wherever the bytes stopped: what the client holds is what counts.
            for event in stream.messages:
                received[event.type].append(event.data)
            last = stream.events[-1].id
    finally:
        producer.halt.set()
        producer.join()
    expected = {
        "a": [value for _, value in producer.sent[topics[0]]],
        "b": [value for _, value in producer.sent[topics[1]]],
        "c": [value for key, value in producer.sent[topics[2]] if key == "k1"],
    }
    # Finish: one more resume reads up to the end of every member.
    async with open_stream(client, "/streams", params=query, headers={"last-event-id": last or ""}) as stream:

        def complete(s: Stream) -> bool:
            got = Counter(e.type for e in s.messages)
            return all(len(received[m]) + got[m] >= len(expected[m]) for m in expected)

        await stream.read_until(complete)
    for event in stream.messages:
        received[event.type].append(event.data)
    keys = {value: key for topic in topics for key, value in producer.sent[topic]}
    for member, values in expected.items():
        assert Counter(received[member]) == Counter(values), member  # each once: nothing lost, nothing twice
        assert_key_order(received[member], keys)


def assert_key_order(values: list[str], keys: dict[str, str]) -> None:
    """Records of one key (one partition) arrive in the order they were produced."""
    last: dict[str, int] = {}
    for value in values:
        key, number = keys[value], int(value.rsplit("-", 1)[1])
        assert number > last.get(key, -1), value
        last[key] = number


async def test_a_client_too_far_behind_is_cut_as_a_whole(
    gateway_factory: Callable[..., Any], kafka: Any, route: Any
) -> None:
    """The members share one pending-bytes bound: a client that stops reading loses the whole stream, once."""
    gateway = gateway_factory()
    from streams.services import topic_upsert

    busy, quiet, tag = kafka.topic(), kafka.topic(), uuid.uuid4().hex[:6]
    # A stalled stream first catches up from the cache at its own pace; it is cut once the cache has moved on.
    topic_upsert(name=busy, cache_max_bytes=512 * 1024)
    route(path=f"/mx/{tag}/busy", topic=busy, heartbeat_seconds=QUIET, max_pending_bytes=64 * 1024)
    route(path=f"/mx/{tag}/quiet", topic=quiet, heartbeat_seconds=QUIET, max_pending_bytes=32 * 1024)
    query = members(f"busy:/mx/{tag}/busy", f"quiet:/mx/{tag}/quiet")
    slow = await asyncio.to_thread(StalledClient, gateway.port, f"/streams?{query}")
    async with httpx.AsyncClient(base_url=gateway.url, timeout=httpx.Timeout(WAIT)) as http:
        await metric_wait(http, "sluice_multiplexed_streams", None, lambda v: v == 1, within=WAIT)
        filler = "x" * 8192
        # 19 MiB: more than the kernel's socket buffers take, 300 times the larger member's bound.
        for n in range(2400):
            kafka.produce(busy, f"{n}:{filler}", flush=False)
        kafka.flush()
        await metric_wait(http, "sluice_multiplexed_streams", None, lambda v: v == 0, within=WAIT)
        text = (await http.get("/metrics")).text
    how = await asyncio.wait_for(asyncio.to_thread(slow.wait_closed), timeout=WAIT)
    assert how in ("reset", "closed")
    cut = [line for line in text.splitlines() if line.startswith("sluice_slow_clients_cut_total")]
    assert any(f'topic="{busy}"' in line and line.endswith(" 1.0") for line in cut), cut
    assert not any(f'topic="{quiet}"' in line and not line.endswith(" 0.0") for line in cut), cut


class StalledClient:
    """A GET over a socket with a tiny receive buffer that reads the response head and then nothing."""

    def __init__(self, port: int, path: str) -> None:
        self.sock, head, _ = small_window_stream(port, path, WAIT)
        assert head.startswith(b"HTTP/1.1 200"), head

    def wait_closed(self) -> str:
        """Read (and drop) what is left until the gateway's reset or close."""
        try:
            while self.sock.recv(65536):
                pass
        except ConnectionResetError:
            return "reset"
        finally:
            self.sock.close()
        return "closed"

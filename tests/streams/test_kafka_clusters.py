"""Production Kafka through the real gateway: TLS, mutual TLS, refused SASL, two clusters, the log's edges.

TLS is real: Debian's stunnel4 terminates it in front of the embedded broker, which
advertises the stunnel port (see tests/support/kafka_tls.py). The gateway is
configured by environment variables alone, as a deployment would be.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from streams.core.ids import progress_decode, progress_encode
from streams.models import Cluster
from streams.server.broker import EmbeddedBroker, topic_ensure
from streams.services import route_upsert
from tests.conftest import Gateway, Kafka
from tests.streams.edge.test_wire import WAIT, error_body, open_stream
from tests.support.config_commands import applyconfig, exportconfig
from tests.support.kafka_tls import STUNNEL, Certificates, TLSBroker

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]
needs_stunnel = pytest.mark.skipif(STUNNEL is None, reason="stunnel4 is not installed (apt-get install stunnel4)")
TIMEOUT = 3  # SLUICE_KAFKA_TIMEOUT of these gateways


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return Certificates(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def tls_broker(certificates: Certificates) -> Iterator[TLSBroker]:
    broker = TLSBroker(certificates).start()
    yield broker
    broker.stop()


@pytest.fixture(scope="module")
def mtls_broker(certificates: Certificates) -> Iterator[TLSBroker]:
    broker = TLSBroker(certificates, mutual=True).start()
    yield broker
    broker.stop()


def produce(client: dict[str, str], topic: str, values: list[str], key: str | None = None) -> None:
    producer = Producer({**client, "linger.ms": 1, "log_level": 0})
    for value in values:
        producer.produce(topic, value.encode(), key=key.encode() if key else None)
    assert producer.flush(WAIT) == 0


def topic_make(client: dict[str, str], partitions: int = 1) -> str:
    name = f"t-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({**client, "log_level": 0})
    for future in admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)]).values():
        future.result(WAIT)
    return name


def kafka_environment(broker: TLSBroker, **extra: str) -> dict[str, str]:
    """The environment a deployment sets: bootstrap, protocol, CA (and the client pair for mutual TLS)."""
    environment = {
        "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap,
        "KAFKA_SECURITY_PROTOCOL": "SSL",
        "KAFKA_SSL_CA_LOCATION": str(broker.certificates.ca),
        "SLUICE_KAFKA_TIMEOUT": str(TIMEOUT),
    }
    if broker.mutual:
        cert, key = broker.certificates.pair("client")
        environment |= {"KAFKA_SSL_CERTIFICATE_LOCATION": str(cert), "KAFKA_SSL_KEY_LOCATION": str(key)}
    return environment | extra


async def stream_all(gateway: Gateway, topic: str, client: dict[str, str], count: int) -> list[str]:
    await sync_to_async(route_upsert)(path=f"/tls/{topic}", topic=topic, initial="earliest")
    produce(client, topic, [json.dumps({"n": n}) for n in range(count // 2)])
    async with (
        httpx.AsyncClient(base_url=gateway.url, timeout=WAIT) as http,
        open_stream(http, f"/tls/{topic}") as stream,
    ):
        await stream.read_messages(count // 2)
        produce(client, topic, [json.dumps({"n": n}) for n in range(count // 2, count)])
        await stream.read_messages(count)
        return stream.data


@needs_stunnel
@pytest.mark.parametrize("mutual", [False, True], ids=["tls", "mutual-tls"])
async def test_a_tls_kafka_configured_by_environment_alone_streams_every_record(
    gateway_factory: Callable[..., Gateway], tls_broker: TLSBroker, mtls_broker: TLSBroker, mutual: bool
) -> None:
    broker = mtls_broker if mutual else tls_broker
    topic = topic_make(broker.client())
    gateway = gateway_factory(**kafka_environment(broker))
    assert await stream_all(gateway, topic, broker.client(), 20) == [json.dumps({"n": n}) for n in range(20)]
    async with httpx.AsyncClient(base_url=gateway.url, timeout=WAIT) as http:
        ready = (await http.get("/readyz")).json()
    assert ready["checks"]["kafka:default"] == {"status": "ok"}


async def refused_stream(gateway: Gateway) -> tuple[dict[str, Any], float]:
    await sync_to_async(route_upsert)(path="/refused/{topic}", topic="${params.topic}")
    async with httpx.AsyncClient(base_url=gateway.url, timeout=WAIT) as http:
        started = time.monotonic()
        response = await http.get("/refused/anything")
        took = time.monotonic() - started
        return error_body(response, 503, "kafka_unavailable"), took


@needs_stunnel
@pytest.mark.parametrize(
    ("case", "cause", "words"),
    [
        ("wrong-ca", "tls", "certificate verify failed"),
        ("no-client-certificate", "tls", "certificate required"),
        ("plaintext-to-tls", "tls", "the listener may expect TLS"),
        ("sasl-refused", "authentication", "SASL"),
    ],
)
async def test_misconfigured_kafka_answers_503_with_its_cause_in_detail_readyz_and_one_log_line(
    gateway_factory: Callable[..., Gateway],
    tls_broker: TLSBroker,
    mtls_broker: TLSBroker,
    certificates: Certificates,
    case: str,
    cause: str,
    words: str,
) -> None:
    secret = f"pw-{uuid.uuid4().hex}"
    environment = {
        "wrong-ca": kafka_environment(tls_broker, KAFKA_SSL_CA_LOCATION=str(certificates.other_ca)),
        "no-client-certificate": kafka_environment(tls_broker, KAFKA_BOOTSTRAP_SERVERS=mtls_broker.bootstrap),
        "plaintext-to-tls": {"KAFKA_BOOTSTRAP_SERVERS": tls_broker.bootstrap, "SLUICE_KAFKA_TIMEOUT": str(TIMEOUT)},
        "sasl-refused": kafka_environment(
            tls_broker,
            KAFKA_SECURITY_PROTOCOL="SASL_SSL",
            KAFKA_SASL_MECHANISM="PLAIN",
            KAFKA_SASL_USERNAME="sluice",
            KAFKA_SASL_PASSWORD=secret,
        ),
    }[case]
    gateway = gateway_factory(**environment)
    for _ in range(3):
        body, took = await refused_stream(gateway)
        assert body["cause"] == cause, body
        assert f"({cause})" in body["detail"], body
        assert words in body["detail"], body
        assert took < TIMEOUT + 5
    async with httpx.AsyncClient(base_url=gateway.url, timeout=WAIT) as http:
        ready = await http.get("/readyz")
    assert ready.status_code == 503
    assert ready.json()["checks"]["kafka:default"]["cause"] == cause
    assert ready.json()["checks"]["database"] == {"status": "ok"}
    lines = [line for line in gateway.output if "Kafka cluster default: " in line and f"({cause})" in line]
    assert len(lines) == 1, lines  # once per cluster and cause, not per request
    assert not [line for line in gateway.output if secret in line]


async def test_routes_on_two_clusters_serve_at_once_and_secrets_stay_references(
    gateway_factory: Callable[..., Gateway], kafka: Kafka, tmp_path: Path
) -> None:
    other = EmbeddedBroker().start()
    secret = f"s3cret-{uuid.uuid4().hex}"
    try:
        here, there = kafka.topic(), f"t-{uuid.uuid4().hex[:10]}"
        topic_ensure(other.bootstrap, there)
        config = tmp_path / "clusters.yaml"
        config.write_text(
            f"""\
clusters:
  - name: second
    bootstrap_servers: ${{env.SECOND_KAFKA}}
    properties:
      client.id: sluice-second
      ssl.key.password: ${{env.SECOND_KEY_PASSWORD}}
topics:
  - name: {here}
  - name: {there}
    cluster: second
routes:
  - path: /here
    topic: {here}
  - path: /there
    topic: {there}
""",
            encoding="utf-8",
        )
        await sync_to_async(applyconfig)(config)
        exported = await sync_to_async(exportconfig)()
        assert "ssl.key.password: ${env.SECOND_KEY_PASSWORD}" in exported
        assert secret not in exported
        row = await sync_to_async(Cluster.objects.get)(name="second")
        assert secret not in json.dumps(row.properties)
        assert secret not in row.bootstrap_servers
        gateway = gateway_factory(SECOND_KAFKA=other.bootstrap, SECOND_KEY_PASSWORD=secret)
        async with (
            httpx.AsyncClient(base_url=gateway.url, timeout=WAIT) as http,
            open_stream(http, "/here") as first,
            open_stream(http, "/there") as second,
        ):
            await first.started()
            await second.started()
            kafka.produce(here, "from the first cluster")
            produce({"bootstrap.servers": other.bootstrap}, there, ["from the second cluster"])
            assert await first.read_data("from the first cluster") == ["from the first cluster"]
            assert await second.read_data("from the second cluster") == ["from the second cluster"]
            ready = (await http.get("/readyz")).json()
        assert ready["checks"]["kafka:second"] == {"status": "ok"}
        assert not [line for line in gateway.output if secret in line]
    finally:
        other.stop()


async def test_an_id_past_the_end_starts_at_the_end_and_misses_nothing_after(gateway: Gateway, kafka: Kafka) -> None:
    topic = kafka.topic(partitions=2)
    for n in range(10):
        kafka.produce(topic, f"old {n}", partition=n % 2)
    await sync_to_async(route_upsert)(path=f"/edge/{topic}", topic=topic)
    impossible = progress_encode({0: 1000, 1: 1000})
    async with (
        httpx.AsyncClient(base_url=gateway.url, timeout=WAIT) as http,
        open_stream(http, f"/edge/{topic}", headers={"last-event-id": impossible}) as stream,
    ):
        start = progress_decode(await stream.started())
        assert start == {0: 5, 1: 5}  # the truth: where the log ends, not the id's offsets
        for n in range(6):
            kafka.produce(topic, f"new {n}", partition=n % 2)
        await stream.read_messages(6)
    assert sorted(stream.data) == sorted(f"new {n}" for n in range(6))
    async with httpx.AsyncClient(base_url=gateway.url, timeout=WAIT) as http:
        metrics = (await http.get("/metrics")).text
    assert f'sluice_resumes_past_end_total{{topic="{topic}"}}' in metrics

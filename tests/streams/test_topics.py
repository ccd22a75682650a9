"""Configured topics in Kafka, against the real broker: their state in the admin, the API and the commands,
and creating them there when asked (never on save)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource
from django.core.management.base import CommandError
from django.test import Client

from streams import topics
from streams.clusters import default_cluster, worker_default_cluster
from streams.models import Cluster, Route, Topic
from streams.services import route_upsert, topic_upsert
from tests.conftest import Kafka, free_port
from tests.support.config_commands import applyconfig, exportconfig

pytestmark = [pytest.mark.django_db, pytest.mark.services]


@pytest.fixture
def local(kafka: Kafka) -> Cluster:
    """A configured cluster: the test broker."""
    return Cluster.objects.create(name="local", bootstrap_servers=kafka.bootstrap)


@pytest.fixture(autouse=True)
def answers_forgotten(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test reads Kafka afresh (the state is cached for a few seconds across pages)."""
    monkeypatch.setattr(topics, "_answers", topics._AnswerCache())


def unique(prefix: str = "made") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def broker_partitions(kafka: Kafka, name: str) -> int | None:
    metadata = AdminClient({"bootstrap.servers": kafka.bootstrap, "log_level": 0}).list_topics(timeout=5)
    found = metadata.topics.get(name)
    return len(found.partitions) if found is not None else None


def broker_config(kafka: Kafka, name: str) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap, "log_level": 0})
    (future,) = admin.describe_configs([ConfigResource("topic", name)], request_timeout=5).values()
    return {key: entry.value for key, entry in future.result(5).items()}


def consume_one(kafka: Kafka, name: str, partitions: int) -> bytes:
    consumer = Consumer(
        {"bootstrap.servers": kafka.bootstrap, "group.id": unique("g"), "enable.auto.commit": False, "log_level": 0}
    )
    consumer.assign([TopicPartition(name, p, 0) for p in range(partitions)])
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                return bytes(message.value())
        raise AssertionError(f"nothing read from {name}")
    finally:
        consumer.close()


def topic_form(name: str, cluster: Cluster, **overrides: str) -> dict[str, str]:
    data = {
        "name": name,
        "description": "",
        "cluster": str(cluster.pk),
        "value_format": "text",
        "key_format": "text",
        "registry": "",
        "value_avro_schema": "",
        "key_avro_schema": "",
        "partitions": "3",
        "replication_factor": "1",
        "configs": '{"retention.ms": 60000, "cleanup.policy": "delete"}',
        "cache_max_messages": "10000",
        "cache_max_bytes": "16777216",
        "cache_max_age_seconds": "3600",
    }
    data.update(overrides)
    return data


def create_action(client: Client, *rows: Topic) -> str:
    response = client.post(
        "/admin/streams/topic/",
        {"action": "kafka_create", "_selected_action": [str(row.pk) for row in rows]},
        follow=True,
    )
    assert response.status_code == 200
    page = str(response.content.decode())
    return page


def test_admin_topic_is_missing_until_the_action_creates_it(
    admin_client_logged_in: Client, kafka: Kafka, local: Cluster
) -> None:
    name = unique()
    response = admin_client_logged_in.post("/admin/streams/topic/add/", topic_form(name, local))
    assert response.status_code == 302, response.content.decode()[:2000]
    topic = Topic.objects.get(name=name)
    assert (topic.partitions, topic.configs) == (3, {"retention.ms": 60000, "cleanup.policy": "delete"})
    assert broker_partitions(kafka, name) is None  # saving creates nothing in Kafka

    page = admin_client_logged_in.get("/admin/streams/topic/").content.decode()
    assert "missing from cluster local" in page

    page = create_action(admin_client_logged_in, topic)
    assert f"Created topic {name} on cluster local in Kafka (3 partitions)" in page
    assert broker_partitions(kafka, name) == 3
    config = broker_config(kafka, name)
    assert (config["retention.ms"], config["cleanup.policy"]) == ("60000", "delete")

    page = admin_client_logged_in.get("/admin/streams/topic/").content.decode()
    assert "exists: 3 partitions, end offsets 0:0 1:0 2:0" in page
    detail = admin_client_logged_in.get(f"/admin/streams/topic/{topic.pk}/change/").content.decode()
    assert "exists: 3 partitions" in detail

    kafka.produce(name, "hello", partition=1)
    assert consume_one(kafka, name, 3) == b"hello"
    topics._answers.forget(local.spec())
    page = admin_client_logged_in.get("/admin/streams/topic/").content.decode()
    assert "end offsets 0:0 1:1 2:0" in page


def test_creating_a_topic_kafka_has_is_a_message(admin_client_logged_in: Client, kafka: Kafka, local: Cluster) -> None:
    name = kafka.topic(partitions=2)
    topic = topic_upsert(name=name, cluster=local, partitions=5)
    page = create_action(admin_client_logged_in, topic)
    assert f"Topic {name} on cluster local exists already in Kafka: left as it is" in page
    assert "errornote" not in page
    assert broker_partitions(kafka, name) == 2


def test_kafka_refusal_reaches_the_user_with_the_topic_and_the_reason(
    admin_client_logged_in: Client, local: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The embedded broker accepts any replication factor; a real cluster refuses one above its broker count.
    reason = "Replication factor: 3 larger than available brokers: 1"
    refusal = KafkaError(KafkaError.INVALID_REPLICATION_FACTOR, reason)

    class Refusing:
        def __init__(self, config: dict[str, Any]) -> None:
            pass

        def create_topics(self, new: list[Any], **kwargs: Any) -> dict[str, Any]:
            class Refused:
                def result(self, timeout: float | None = None) -> None:
                    raise KafkaException(refusal)

            return {new[0].topic: Refused()}

    monkeypatch.setattr(topics, "AdminClient", Refusing)
    topic = topic_upsert(name="shop.orders", cluster=local, replication_factor=3)
    page = create_action(admin_client_logged_in, topic)
    assert (
        "Kafka refused to create topic shop.orders on cluster local: "
        "Replication factor: 3 larger than available brokers: 1"
    ) in page
    response = admin_client_logged_in.post("/api/topics/shop.orders/create/")
    assert response.status_code == 400
    assert response.json()["error"] == "kafka_refused"
    assert "larger than available brokers" in response.json()["detail"]


def test_route_list_warns_of_a_topic_missing_from_kafka(
    admin_client_logged_in: Client, kafka: Kafka, local: Cluster
) -> None:
    present = kafka.topic()
    absent = unique("misspelt")
    topic_upsert(name=present, cluster=local)
    topic_upsert(name=absent, cluster=local)
    route_upsert(path="/present", topic=present)
    route_upsert(path="/absent", topic=absent)
    route_upsert(path="/any/{topic}", topic="${params.topic}")
    response = admin_client_logged_in.get("/admin/streams/route/")
    page = response.content.decode()
    warnings = [str(m) for m in response.context["messages"]]
    assert warnings == [
        f"Routes on a topic missing from Kafka: /absent ({absent} on cluster local). "
        'Create the topic (Topics, "Create in Kafka"), or correct the route\'s topic.'
    ]
    assert "\u26a0 missing from cluster local" in page
    assert "exists: 1 partition" in page
    assert "per request" in page


def test_a_route_saved_on_a_missing_topic_says_so(admin_client_logged_in: Client, kafka: Kafka) -> None:
    token = worker_default_cluster.set(default_cluster(kafka.bootstrap))  # as the stream router sets it
    try:
        from tests.streams.test_admin import route_form

        response = admin_client_logged_in.post(
            "/admin/streams/route/add/", route_form(path="/typo", topic="shop.ordres"), follow=True
        )
        assert Route.objects.filter(path="/typo").exists()
        saved = "Route /typo is saved, but its topic shop.ordres is missing from cluster default."
        assert saved in response.content.decode()
    finally:
        worker_default_cluster.reset(token)


def test_api_state_and_create(admin_client_logged_in: Client, kafka: Kafka, local: Cluster) -> None:
    api = admin_client_logged_in
    name = unique()
    created = api.post(
        "/api/topics/",
        {"name": name, "cluster": "local", "partitions": 2, "configs": {"retention.ms": 120000}},
        content_type="application/json",
    )
    assert created.status_code == 201, created.content
    state = api.get(f"/api/topics/{name}/kafka/").json()
    assert (state["state"], state["cluster"], state["partitions"]) == ("missing", "local", None)

    answer = api.post(f"/api/topics/{name}/create/")
    assert answer.status_code == 201, answer.content
    assert answer.json()["created"] is True
    assert broker_partitions(kafka, name) == 2
    assert broker_config(kafka, name)["retention.ms"] == "120000"
    kafka.produce(name, "one", partition=0)
    assert consume_one(kafka, name, 2) == b"one"

    state = api.get(f"/api/topics/{name}/kafka/").json()
    assert (state["state"], state["partitions"], state["end_offsets"]) == ("exists", 2, [1, 0])
    again = api.post(f"/api/topics/{name}/create/")
    assert again.status_code == 200
    assert again.json()["created"] is False
    assert "exists already" in again.json()["detail"]


def test_api_refuses_bad_topic_configs(admin_client_logged_in: Client) -> None:
    response = admin_client_logged_in.post(
        "/api/topics/", {"name": "t", "configs": {"Retention MS": 1}}, content_type="application/json"
    )
    assert response.status_code == 400
    assert "not a Kafka topic config name" in response.json()["configs"][0]


def test_unreachable_cluster_is_unknown_within_the_budget(
    admin_client_logged_in: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOPICS_TEST_PASSWORD", "s3cret-value")
    far = Cluster.objects.create(
        name="far",
        bootstrap_servers=f"127.0.0.1:{free_port()}",
        properties={
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "sluice",
            "sasl.password": "${env.TOPICS_TEST_PASSWORD}",
        },
    )
    unset = Cluster.objects.create(name="unset", bootstrap_servers="${env.TOPICS_TEST_NOT_SET}:9092")
    topic_upsert(name="far-away", cluster=far)
    topic_upsert(name="nowhere", cluster=unset)

    started = time.monotonic()
    page = admin_client_logged_in.get("/admin/streams/topic/").content.decode()
    took = time.monotonic() - started
    assert took < topics.STATE_SECONDS + 1.5, took
    assert "unknown (cluster far unreachable:" in page
    assert "unknown (cluster unset unreachable: cluster unset bootstrap names ${env.TOPICS_TEST_NOT_SET}" in page
    assert "s3cret-value" not in page

    started = time.monotonic()
    admin_client_logged_in.get("/admin/streams/topic/")
    assert time.monotonic() - started < 1.0  # the answer is reused for a few seconds

    state = admin_client_logged_in.get("/api/topics/far-away/kafka/").json()
    assert state["state"] == "unknown"
    assert "s3cret-value" not in str(state)


def test_applyconfig_creates_the_missing_topics(tmp_path: Path, kafka: Kafka) -> None:
    existing = kafka.topic()
    name = unique()
    path = tmp_path / "sluice.yaml"
    path.write_text(
        f"clusters:\n  - name: local\n    bootstrap_servers: {kafka.bootstrap}\n"
        f"topics:\n"
        f"  - name: {name}\n    cluster: local\n"
        f"    kafka: {{partitions: 2, configs: {{cleanup.policy: compact, retention.ms: 90000}}}}\n"
        f"  - name: {existing}\n    cluster: local\n"
    )
    checked = applyconfig(path, "--check", "--create-topics")
    assert f"would create topic {name} in Kafka (missing from cluster local)" in checked
    assert f"would leave topic {existing} in Kafka (exists: 1 partition" in checked

    out = applyconfig(path, "--create-topics")
    assert f"Created topic {name} on cluster local in Kafka (2 partitions)" in out
    assert f"Topic {existing} on cluster local exists already in Kafka: left as it is" in out
    assert broker_partitions(kafka, name) == 2
    assert broker_config(kafka, name)["cleanup.policy"] == "compact"

    exported = exportconfig("--kafka-state")
    assert "kafka:\n    partitions: 2\n    configs:\n" in exported
    # The configs' order is the database's (PostgreSQL's jsonb orders keys by length).
    assert "\n      cleanup.policy: compact\n" in exported
    assert "\n      retention.ms: 90000\n" in exported
    assert f"#   {name}: exists: 2 partitions, end offsets 0:0 1:0" in exported
    assert "# In Kafka" not in exportconfig()
    assert f"would leave topic {name} in Kafka (exists: 2 partitions" in applyconfig(path, "--check", "--create-topics")


def test_applyconfig_reports_what_kafka_refused(
    tmp_path: Path, local: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(topic: Topic, **kwargs: Any) -> Any:
        raise topics.TopicCreateError(f"Kafka refused to create topic {topic.name} on cluster local: no", "refused")

    monkeypatch.setattr("streams.config.kafka_topics.topic_create", refuse)
    path = tmp_path / "sluice.yaml"
    path.write_text("topics:\n  - name: refused-one\n    cluster: local\n")
    with pytest.raises(CommandError, match="Kafka refused to create topic refused-one on cluster local: no"):
        applyconfig(path, "--create-topics")
    assert Topic.objects.filter(name="refused-one").exists()  # the configuration is applied all the same

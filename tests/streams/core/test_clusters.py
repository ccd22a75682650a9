"""Clusters as plain data: property checks, secrets only by reference, references read at connect time."""

from __future__ import annotations

import pytest

from streams.core.clusters import (
    ClusterError,
    ClusterSpec,
    environment_properties,
    property_problem,
    property_secret,
)


@pytest.mark.parametrize(
    "name",
    ["sasl.password", "ssl.key.password", "sasl.oauthbearer.client.secret", "ssl.key.pem", "sasl.oauthbearer.config"],
)
def test_secret_properties_must_be_references(name: str) -> None:
    assert property_secret(name)
    assert "write it as ${env.NAME}" in (property_problem(name, "hunter2") or "")
    assert property_problem(name, "${env.KAFKA_SECRET}") is None


@pytest.mark.parametrize("name", ["security.protocol", "sasl.mechanism", "sasl.username", "ssl.ca.location"])
def test_plain_properties_take_values(name: str) -> None:
    assert not property_secret(name)
    assert property_problem(name, "value") is None


@pytest.mark.parametrize(
    ("name", "value", "problem"),
    [
        ("bootstrap.servers", "k:9092", "set by Sluice itself (give it as the cluster's bootstrap servers)"),
        ("group.id", "mine", "set by Sluice itself"),
        ("Security.Protocol", "SSL", "is not a librdkafka property name"),
        ("socket.timeout.ms", ["1"], "give a string or a number"),
        ("socket.keepalive.enable", True, "give a string or a number"),
    ],
)
def test_refused_properties(name: str, value: object, problem: str) -> None:
    assert problem in (property_problem(name, value) or "")


def test_references_are_read_at_connect_time_and_a_missing_one_is_named_not_shown() -> None:
    spec = ClusterSpec.of(
        "managed",
        "${env.BROKERS}",
        {"security.protocol": "SASL_SSL", "sasl.username": "sluice", "sasl.password": "${env.KAFKA_PASSWORD}"},
    )
    assert spec.client_config({"BROKERS": "b1:9093,b2:9093", "KAFKA_PASSWORD": "s3cret"}) == {
        "bootstrap.servers": "b1:9093,b2:9093",
        "sasl.password": "s3cret",
        "sasl.username": "sluice",
        "security.protocol": "SASL_SSL",
    }
    with pytest.raises(ClusterError) as raised:
        spec.client_config({"BROKERS": "b1:9093"})
    assert str(raised.value) == (
        "cluster managed property sasl.password names ${env.KAFKA_PASSWORD}, "
        "but KAFKA_PASSWORD is not set in Sluice's environment"
    )
    assert spec.redacted()["sasl.password"] == "${env.KAFKA_PASSWORD}"
    assert ClusterSpec.of("x", "k:1", {"sasl.password": "written-out"}).redacted()["sasl.password"] == "***"


def test_kafka_variables_are_librdkafka_properties_by_reference() -> None:
    environ = {
        "KAFKA_BOOTSTRAP_SERVERS": "b1:9093",
        "KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
        "KAFKA_SASL_PASSWORD": "s3cret",
        "KAFKA_SSL_CA_LOCATION": "/etc/kafka/ca.pem",
        "PATH": "/usr/bin",
    }
    properties = environment_properties(environ)
    assert properties == {
        "sasl.mechanism": "${env.KAFKA_SASL_MECHANISM}",
        "sasl.password": "${env.KAFKA_SASL_PASSWORD}",
        "security.protocol": "${env.KAFKA_SECURITY_PROTOCOL}",
        "ssl.ca.location": "${env.KAFKA_SSL_CA_LOCATION}",
    }
    spec = ClusterSpec.of("default", "${env.KAFKA_BOOTSTRAP_SERVERS}", properties)
    assert spec.client_config(environ)["sasl.password"] == "s3cret"
    assert "s3cret" not in repr(spec)

"""Kafka clusters in the admin, the REST API and configuration files: secrets only ever as ${env.NAME}."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.test import Client

from streams.models import Cluster, Topic
from streams.services import cluster_upsert, topic_upsert
from tests.support.config_commands import applyconfig, applyconfig_refused, exportconfig

pytestmark = [pytest.mark.django_db, pytest.mark.services]

SECRET = "n0t-in-any-row"
MANAGED = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.username": "sluice",
    "sasl.password": "${env.MANAGED_KAFKA_PASSWORD}",
}


def test_admin_form_refuses_a_written_out_secret(admin_client_logged_in: Client) -> None:
    form = {
        "name": "managed",
        "description": "",
        "bootstrap_servers": "b1.example.com:9093",
        "properties": json.dumps({"security.protocol": "SASL_SSL", "sasl.password": SECRET}),
    }
    response = admin_client_logged_in.post("/admin/streams/cluster/add/", form)
    assert response.status_code == 200
    assert "sasl.password is a secret: write it as ${env.NAME}" in response.content.decode()
    assert not Cluster.objects.exists()
    form["properties"] = '{"security.protocol": "SASL_SSL", "sasl.password": "${env.MANAGED_KAFKA_PASSWORD}"}'
    assert admin_client_logged_in.post("/admin/streams/cluster/add/", form).status_code == 302
    listing = admin_client_logged_in.get("/admin/streams/cluster/").content.decode()
    assert "SASL_SSL" in listing


def test_rest_api_takes_references_and_refuses_secrets(admin_client_logged_in: Client) -> None:
    refused = admin_client_logged_in.post(
        "/api/clusters/",
        {"name": "managed", "bootstrap_servers": "b1:9093", "properties": {"sasl.password": SECRET}},
        content_type="application/json",
    )
    assert refused.status_code == 400
    assert "sasl.password is a secret" in refused.json()["properties"][0]
    assert SECRET not in refused.content.decode()
    created = admin_client_logged_in.post(
        "/api/clusters/",
        {"name": "managed", "bootstrap_servers": "b1:9093", "properties": MANAGED},
        content_type="application/json",
    )
    assert created.status_code == 201, created.content
    assert created.json()["properties"]["sasl.password"] == "${env.MANAGED_KAFKA_PASSWORD}"
    topic = admin_client_logged_in.post(
        "/api/topics/", {"name": "orders", "cluster": "managed"}, content_type="application/json"
    )
    assert topic.status_code == 201, topic.content
    assert Topic.objects.get(name="orders").cluster == Cluster.objects.get(name="managed")
    in_use = admin_client_logged_in.delete("/api/clusters/managed/")
    assert in_use.status_code == 409


def test_the_environments_cluster_name_is_reserved() -> None:
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError, match="the cluster of the environment"):
        cluster_upsert(name="default", bootstrap_servers="k:9092")


def test_config_file_round_trip_keeps_references(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MANAGED_KAFKA_PASSWORD", SECRET)
    config = tmp_path / "clusters.yaml"
    config.write_text(
        """\
clusters:
  - name: managed
    bootstrap_servers: b1.example.com:9093,b2.example.com:9093
    properties:
      security.protocol: SASL_SSL
      sasl.mechanism: SCRAM-SHA-512
      sasl.username: sluice
      sasl.password: ${env.MANAGED_KAFKA_PASSWORD}
  - name: local
    bootstrap_servers: 127.0.0.1:9092
topics:
  - name: orders
    cluster: managed
  - name: audit
    cluster: local
""",
        encoding="utf-8",
    )
    report = applyconfig(config)
    assert report.splitlines()[:2] == ["created cluster managed", "created cluster local"]
    exported = exportconfig()
    assert "sasl.password: ${env.MANAGED_KAFKA_PASSWORD}" in exported
    assert SECRET not in exported
    assert Cluster.objects.get(name="managed").properties["sasl.password"] == "${env.MANAGED_KAFKA_PASSWORD}"
    assert "0 created, 0 updated, 4 unchanged" in applyconfig(config)
    again = tmp_path / "again.yaml"
    again.write_text(exported, encoding="utf-8")
    assert "0 created, 0 updated" in applyconfig(again)


def test_config_file_refuses_a_written_out_secret_at_its_line(tmp_path: Path) -> None:
    config = tmp_path / "clusters.yaml"
    config.write_text(
        "clusters:\n  - name: managed\n    bootstrap_servers: b1:9093\n"
        f"    properties:\n      sasl.password: {SECRET}\n",
        encoding="utf-8",
    )
    error = applyconfig_refused(config)
    assert error.startswith(f"{config}:4:5: clusters[0].properties: sasl.password is a secret")
    assert SECRET not in error
    assert not Cluster.objects.exists()


def test_topic_on_an_unknown_cluster_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "topics.yaml"
    config.write_text("topics:\n  - name: orders\n    cluster: nowhere\n", encoding="utf-8")
    assert "no cluster named 'nowhere'" in applyconfig_refused(config)
    topic_upsert(name="plain")
    assert Topic.objects.get(name="plain").cluster is None  # the environment's cluster

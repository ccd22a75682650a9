"""Clusters, schemas and topics: where records come from and what they must look like."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models

from common.models import NAME_CHARACTERS, Named
from streams.core.clusters import DEFAULT_CLUSTER, ClusterSpec
from streams.core.formats.spec import FORMATS, REGISTRY_FORMATS, TEXT, FormatError, RecordFormats
from streams.models.validators import (
    KAFKA_TOPIC_NAME,
    no_control,
    validate_cluster_properties,
    validate_registry,
    validate_topic_configs,
)

_FORMAT_CHOICES = list(FORMATS.items())
_REGISTRY_HELP = (
    "Confluent-compatible schema registry for avro, protobuf and jsonschema records, e.g. "
    "https://${env.SR_USER}:${env.SR_PASSWORD}@registry.example.com (the password only as ${env.NAME})."
)


class Schema(Named):
    """A JSON Schema that message values must satisfy (SPEC 5): inline, or a subject in a schema registry."""

    json_schema = models.JSONField(null=True, blank=True, help_text="Inline JSON Schema (draft 2020-12).")
    registry_url = models.URLField(blank=True, help_text="Confluent-compatible schema registry.")
    subject = models.CharField(max_length=255, blank=True, help_text="Subject in the registry.")
    version = models.PositiveIntegerField(null=True, blank=True, help_text="Blank: the latest version.")

    def clean(self) -> None:
        super().clean()
        inline = self.json_schema is not None
        registry = bool(self.registry_url or self.subject)
        if inline == registry:
            raise ValidationError("Give either an inline JSON Schema or a registry URL with a subject.")
        if registry and not (self.registry_url and self.subject):
            raise ValidationError({"subject": "A registry schema needs both the registry URL and the subject."})
        if inline and not isinstance(self.json_schema, (dict, bool)):
            raise ValidationError({"json_schema": "A JSON Schema is an object (or true/false)."})


class Cluster(Named):
    """A Kafka cluster topics live on: bootstrap servers and client properties (TLS, SASL, ...).

    Secret values are written as ``${env.NAME}`` and read from the environment when
    Sluice connects; a row never holds a secret itself. Topics without a cluster use
    the one the environment describes (``KAFKA_BOOTSTRAP_SERVERS`` and ``KAFKA_*``).
    """

    name = models.CharField(
        max_length=100,
        unique=True,
        validators=[NAME_CHARACTERS],
        help_text=f"How topics name it ({DEFAULT_CLUSTER!r} is the cluster of the environment).",
    )
    bootstrap_servers = models.CharField(
        max_length=500,
        validators=[no_control],
        help_text="host:port[,host:port...]; ${env.NAME} is read from the environment when Sluice connects.",
    )
    properties = models.JSONField(
        default=dict,
        blank=True,
        validators=[validate_cluster_properties],
        help_text=(
            'librdkafka properties, e.g. {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", '
            '"sasl.username": "sluice", "sasl.password": "${env.KAFKA_PASSWORD}"}. Secrets only as ${env.NAME}.'
        ),
    )
    registry = models.CharField(
        max_length=500,
        blank=True,
        validators=[validate_registry],
        help_text=_REGISTRY_HELP + " Topics may name their own.",
    )

    def clean(self) -> None:
        super().clean()
        if self.name == DEFAULT_CLUSTER:
            raise ValidationError(
                {"name": f"{DEFAULT_CLUSTER!r} is the cluster of the environment (KAFKA_BOOTSTRAP_SERVERS, KAFKA_*)."}
            )

    def spec(self) -> ClusterSpec:
        return ClusterSpec.of(self.name, self.bootstrap_servers, self.properties or {})


class Topic(Named):
    """A Kafka topic Sluice serves, with the bounds of its in-memory cache (SPEC 2.5)."""

    name = models.CharField(max_length=249, unique=True, validators=[KAFKA_TOPIC_NAME])
    schema = models.ForeignKey(
        Schema,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="topics",
        help_text="Values that do not validate are skipped and counted.",
    )
    cluster = models.ForeignKey(
        Cluster,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="topics",
        help_text="Blank: the cluster of the environment (KAFKA_BOOTSTRAP_SERVERS), or the embedded broker.",
    )
    value_format = models.CharField(
        max_length=20, choices=_FORMAT_CHOICES, default=TEXT, help_text="How values are encoded; they go out as JSON."
    )
    key_format = models.CharField(
        max_length=20,
        choices=_FORMAT_CHOICES,
        default=TEXT,
        help_text="How keys are encoded; key filters see them decoded.",
    )
    value_avro_schema = models.JSONField(
        null=True, blank=True, help_text="The Avro writer schema of values, for the avro-inline format."
    )
    key_avro_schema = models.JSONField(
        null=True, blank=True, help_text="The Avro writer schema of keys, for the avro-inline format."
    )
    registry = models.CharField(
        max_length=500,
        blank=True,
        validators=[validate_registry],
        help_text=_REGISTRY_HELP + " Blank: the cluster's.",
    )
    # How the topic is made in Kafka when someone asks Sluice to (never on save): streams.topics.
    partitions = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Partitions when Sluice creates the topic in Kafka. Blank: the broker's default (num.partitions).",
    )
    replication_factor = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Replicas when Sluice creates the topic. Blank: the broker's default (default.replication.factor).",
    )
    configs = models.JSONField(
        default=dict,
        blank=True,
        validators=[validate_topic_configs],
        help_text='Topic configs when Sluice creates it, e.g. {"cleanup.policy": "delete", "retention.ms": 604800000}.',
    )
    cache_max_messages = models.PositiveIntegerField(
        default=10_000, validators=[MinValueValidator(1)], help_text="Records kept in memory, all partitions together."
    )
    cache_max_bytes = models.PositiveBigIntegerField(
        default=16 * 1024 * 1024, validators=[MinValueValidator(1024)], help_text="Bytes kept in memory."
    )
    cache_max_age_seconds = models.PositiveIntegerField(
        default=3600, validators=[MinValueValidator(1)], help_text="Records older than this leave the cache."
    )

    def clean(self) -> None:
        super().clean()
        try:
            formats = self.formats()
        except FormatError as exc:
            if exc.field == "registry":
                return  # the field's own validator reports it
            raise ValidationError({exc.field: str(exc)}) from exc
        if formats.uses_registry and not formats.registry:
            needing = self.value_format if self.value_format in REGISTRY_FORMATS else self.key_format
            raise ValidationError(
                {"registry": f"The {needing} format reads schemas from a registry: give one here or on the cluster."}
            )

    def formats(self) -> RecordFormats:
        """How the topic's records decode; the registry is the topic's, else its cluster's."""
        registry = self.registry or (self.cluster.registry if self.cluster_id is not None and self.cluster else "")
        return RecordFormats.of(
            self.value_format,
            self.key_format,
            value_schema=self.value_avro_schema,
            key_schema=self.key_avro_schema,
            registry=registry,
        )

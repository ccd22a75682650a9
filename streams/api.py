"""REST endpoints for clusters, schemas, topics and routes (with their filters); writes go through ``services``."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.routers import DefaultRouter

from common.api import ConfigViewSet, ServiceSerializer, api_fields
from common.models import fields_read_only
from guards.models import Guard
from streams import services
from streams.models import Cluster, Route, RouteFilter, Schema, Topic
from streams.topics import TopicCreateError, topic_create, topic_rows_state

# How a failed creation answers: Kafka's refusal is the request's problem, no answer is the cluster's.
_CREATE_FAILED = {
    "refused": (status.HTTP_400_BAD_REQUEST, "kafka_refused"),
    "configuration": (status.HTTP_400_BAD_REQUEST, "cluster_configuration"),
    "unavailable": (status.HTTP_503_SERVICE_UNAVAILABLE, "kafka_unavailable"),
}


class ClusterSerializer(ServiceSerializer):
    """Secret properties are ``${env.NAME}`` references (a value written out is refused), so none is returned."""

    class Meta:
        model = Cluster
        fields = api_fields(Cluster)
        read_only_fields = fields_read_only(Cluster)

    def upsert(self, fields: dict[str, Any]) -> Cluster:
        return services.cluster_upsert(**fields)


class SchemaSerializer(ServiceSerializer):
    class Meta:
        model = Schema
        fields = api_fields(Schema)
        read_only_fields = fields_read_only(Schema)

    def upsert(self, fields: dict[str, Any]) -> Schema:
        return services.schema_upsert(**fields)


class TopicSerializer(ServiceSerializer):
    schema = serializers.SlugRelatedField(
        slug_field="name", queryset=Schema.objects.all(), allow_null=True, required=False
    )
    cluster = serializers.SlugRelatedField(
        slug_field="name", queryset=Cluster.objects.all(), allow_null=True, required=False
    )

    class Meta:
        model = Topic
        fields = api_fields(Topic)
        read_only_fields = fields_read_only(Topic)

    def upsert(self, fields: dict[str, Any]) -> Topic:
        return services.topic_upsert(**fields)


class RouteFilterSerializer(serializers.ModelSerializer):
    class Meta:
        model = RouteFilter
        fields = ["key", "headers"]


class RouteSerializer(ServiceSerializer):
    key = "path"
    filters = RouteFilterSerializer(many=True, required=False)
    schema = serializers.SlugRelatedField(
        slug_field="name", queryset=Schema.objects.all(), allow_null=True, required=False
    )
    guard = serializers.SlugRelatedField(
        slug_field="name", queryset=Guard.objects.all(), allow_null=True, required=False
    )
    # Lists of strings (the model checks each: an origin is scheme://host[:port] or "*").
    roles = serializers.ListField(
        child=serializers.CharField(), required=False, help_text="Roles a token must grant, all of them."
    )
    allow_origins = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text='CORS origins (scheme://host[:port], no path) or ["*"]; empty: SLUICE_CORS_ALLOW_ORIGINS.',
    )

    class Meta:
        model = Route
        fields = ("id", *api_fields(Route, key="path", after={"schema": "filters"}))
        read_only_fields = ("id", *fields_read_only(Route))
        # Uniqueness of the path is the service's (model's) check, reported as a field error.
        validators: list[Any] = []

    def upsert(self, fields: dict[str, Any]) -> Route:
        filters = fields.pop("filters", None)
        return services.route_upsert(
            filters=[services.RouteFilterSpec(**f) for f in filters] if filters is not None else None,
            **fields,
        )


class ClusterViewSet(ConfigViewSet):
    """Kafka clusters: bootstrap servers and librdkafka properties (TLS, SASL); secrets only as ${env.NAME}."""

    queryset = Cluster.objects.all()
    serializer_class = ClusterSerializer
    lookup_field = "name"
    lookup_value_regex = r"[A-Za-z0-9._-]+"

    def instance_delete(self, instance: Cluster) -> None:
        services.cluster_delete(cluster=instance)


class SchemaViewSet(ConfigViewSet):
    """Message schemas (SPEC 5): inline JSON Schema, or a subject in a schema registry."""

    queryset = Schema.objects.all()
    serializer_class = SchemaSerializer
    lookup_field = "name"

    def instance_delete(self, instance: Schema) -> None:
        services.schema_delete(schema=instance)


class TopicViewSet(ConfigViewSet):
    """Kafka topics Sluice serves: cache bounds and schema; their state in Kafka, and creating them there."""

    queryset = Topic.objects.select_related("schema", "cluster")
    serializer_class = TopicSerializer
    lookup_field = "name"
    lookup_value_regex = r"[A-Za-z0-9._-]+"

    def instance_delete(self, instance: Topic) -> None:
        services.topic_delete(topic=instance)

    @action(detail=True, methods=["get"], url_path="kafka")
    def kafka(self, request: Request, name: str | None = None) -> Response:
        """The topic in its cluster: ``exists``, ``missing`` or ``unknown`` (unreachable), partitions, end offsets."""
        topic = self.get_object()
        return Response(topic_rows_state([topic])[topic.name].as_json())

    @action(detail=True, methods=["post"], url_path="create")
    def create_in_kafka(self, request: Request, name: str | None = None) -> Response:
        """Create the topic in its cluster (201), or say that it exists already (200); Kafka's reason if it refuses."""
        topic = self.get_object()
        try:
            creation = topic_create(topic)
        except TopicCreateError as exc:
            code, error = _CREATE_FAILED[exc.cause]
            return Response({"error": error, "status": code, "detail": str(exc)}, status=code)
        answer = {"topic": topic.name, "cluster": creation.cluster, "created": creation.created}
        answer["detail"] = creation.message
        return Response(answer, status=status.HTTP_201_CREATED if creation.created else status.HTTP_200_OK)


class RouteViewSet(ConfigViewSet):
    """Stream routes, with their filters (a write with ``filters`` replaces them all)."""

    queryset = Route.objects.select_related("schema", "guard").prefetch_related("filters")
    serializer_class = RouteSerializer

    def instance_delete(self, instance: Route) -> None:
        services.route_delete(route=instance)


def api_register(router: DefaultRouter) -> None:
    router.register("clusters", ClusterViewSet)
    router.register("schemas", SchemaViewSet)
    router.register("topics", TopicViewSet)
    router.register("routes", RouteViewSet)

"""REST endpoints for data pipelines; writes go through ``services``, runs are read-only on the detail."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.routers import DefaultRouter

from common.api import ConfigViewSet, ServiceSerializer, api_fields
from common.models import fields_read_only
from streams.models import Schema

from . import services
from .models import PIPELINE_RUN_FIELDS, Pipeline, PipelineRun

# How many of a pipeline's runs its detail shows, newest first.
RECENT_RUNS = 10


class PipelineRunSerializer(serializers.ModelSerializer):
    class Meta:
        model = PipelineRun
        fields = ("id", *PIPELINE_RUN_FIELDS)
        read_only_fields = fields


class PipelineSerializer(ServiceSerializer):
    schema = serializers.SlugRelatedField(
        slug_field="name", queryset=Schema.objects.all(), allow_null=True, required=False
    )

    class Meta:
        model = Pipeline
        fields = api_fields(Pipeline)
        read_only_fields = fields_read_only(Pipeline)

    def upsert(self, fields: dict[str, Any]) -> Pipeline:
        return services.pipeline_upsert(**fields)


class PipelineDetailSerializer(PipelineSerializer):
    recent_runs = serializers.SerializerMethodField(help_text=f"The last {RECENT_RUNS} runs, newest first.")

    class Meta(PipelineSerializer.Meta):
        fields = (*PipelineSerializer.Meta.fields, "recent_runs")

    @extend_schema_field(PipelineRunSerializer(many=True))
    def get_recent_runs(self, pipeline: Pipeline) -> Any:
        runs = PipelineRun.objects.filter(pipeline=pipeline).order_by("-started", "-id")[:RECENT_RUNS]
        return PipelineRunSerializer(runs, many=True).data


class PipelineViewSet(ConfigViewSet):
    """Data pipelines: source, JSON Schema check, Spark SQL, sink and dead-letter topics (``runpipeline`` runs them).

    The detail also lists the pipeline's recent runs (read-only).
    """

    queryset = Pipeline.objects.select_related("schema")
    serializer_class = PipelineSerializer
    lookup_field = "name"
    lookup_value_regex = r"[A-Za-z0-9._-]+"

    def get_serializer_class(self) -> type[serializers.BaseSerializer[Any]]:
        if self.action == "retrieve":
            return PipelineDetailSerializer
        return PipelineSerializer

    def instance_delete(self, instance: Pipeline) -> None:
        services.pipeline_delete(pipeline=instance)


def api_register(router: DefaultRouter) -> None:
    router.register("pipelines", PipelineViewSet)

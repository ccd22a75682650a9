"""The configuration models share their bases, and every place that lists columns lists the model's."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.db import models

from common.api import api_fields
from common.config.section import SECTIONS
from common.models import Named, fields_editable, fields_read_only
from guards.api import GuardSerializer
from guards.models import Guard
from guards.services import GuardFields
from pipeline.api import PipelineSerializer
from pipeline.models import Pipeline
from pipeline.services import PipelineFields
from streams.api import ClusterSerializer, RouteSerializer, SchemaSerializer, TopicSerializer
from streams.models import Cluster, Route, Schema, Topic
from streams.services import ClusterFields, RouteFields, SchemaFields, TopicFields

NAMED = [Cluster, Schema, Topic, Guard, Pipeline]


@pytest.mark.parametrize("model", NAMED)
def test_a_named_model_is_listed_and_shown_by_name(model: type[Named]) -> None:
    assert model._meta.ordering == ["name"]
    assert str(model(name="scores")) == "scores"
    assert fields_read_only(model) == ("created", "updated")


def test_the_api_lists_the_columns() -> None:
    serializers = [ClusterSerializer, SchemaSerializer, TopicSerializer, GuardSerializer, PipelineSerializer]
    for serializer, model in zip(serializers, NAMED, strict=True):
        assert serializer.Meta.fields == api_fields(model)
        assert set(serializer().fields) == {*fields_editable(model), "created", "updated"}
    assert set(RouteSerializer().fields) == {"id", "filters", *fields_editable(Route), "created", "updated"}


@pytest.mark.parametrize("name", ["clusters", "schemas", "topics", "routes", "guards", "pipelines"])
def test_a_config_section_lists_the_columns(name: str) -> None:
    section = SECTIONS[name]
    columns = {spec.model for spec in section.fields} - {"filters"}
    assert columns == set(fields_editable(section.model, exclude=section.exclude))
    assert section.fields[0].key == section.key


@pytest.mark.parametrize("model", [*NAMED, Route])
def test_the_admin_shows_every_column(model: type[models.Model]) -> None:
    fieldsets = admin.site._registry[model].fieldsets or []
    shown = {name for _, options in fieldsets for name in options["fields"]}
    assert set(fields_editable(model)) <= shown


@pytest.mark.parametrize(
    ("fields", "model", "key"),
    [
        (ClusterFields, Cluster, "name"),
        (SchemaFields, Schema, "name"),
        (TopicFields, Topic, "name"),
        (RouteFields, Route, "path"),
        (GuardFields, Guard, "name"),
        (PipelineFields, Pipeline, "name"),
    ],
)
def test_a_service_takes_every_column(fields: type, model: type[models.Model], key: str) -> None:
    assert set(fields.__annotations__) == set(fields_editable(model, exclude=[key]))

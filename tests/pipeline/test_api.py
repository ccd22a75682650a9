"""The REST API for pipelines: staff only, validated like the admin, runs on the detail, OpenAPI described."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from pipeline.models import Pipeline, PipelineRun
from pipeline.services import pipeline_run_finish, pipeline_run_start
from streams.models import Schema

pytestmark = [pytest.mark.django_db]

SCORE = {"type": "object", "required": ["match"], "properties": {"match": {"type": "string"}}}
BODY = {"name": "scores", "source_topic": "raw-scores", "json_schema": SCORE, "sink_topic": "scores"}


@pytest.fixture
def api(admin_client_logged_in: Client) -> Client:
    return admin_client_logged_in


def post(client: Client, url: str, body: dict[str, Any], **extra: Any) -> Any:
    return client.post(url, body, content_type="application/json", **extra)


@pytest.mark.services
def test_pipeline_list_create_update_delete(api: Client) -> None:
    assert api.get("/api/pipelines/").json()["results"] == []
    created = post(api, "/api/pipelines/", BODY)
    assert created.status_code == 201, created.content
    assert created.json()["source_kind"] == "kafka"
    assert created.json()["sql"] == "SELECT * FROM input"
    assert [p["name"] for p in api.get("/api/pipelines/").json()["results"]] == ["scores"]
    assert post(api, "/api/pipelines/", BODY).status_code == 400  # exists already

    Schema.objects.create(name="score", json_schema=SCORE)
    patched = api.patch(
        "/api/pipelines/scores/",
        {"schema": "score", "json_schema": None, "key_field": "match", "header_fields": {"tag": "league"}},
        content_type="application/json",
    )
    assert patched.status_code == 200, patched.content
    pipeline = Pipeline.objects.get(name="scores")
    assert (pipeline.schema, pipeline.json_schema) == (Schema.objects.get(name="score"), None)
    assert (pipeline.key_field, pipeline.header_fields) == ("match", {"tag": "league"})
    files = {**BODY, "schema": None, "source_kind": "files", "source_topic": "", "source_files": "/data/*.csv"}
    files["source_format"] = "csv"
    put = api.put("/api/pipelines/scores/", files, content_type="application/json")
    assert put.status_code == 200, put.content
    pipeline.refresh_from_db()
    assert (pipeline.source_kind, pipeline.source_files, pipeline.source_format) == ("files", "/data/*.csv", "csv")

    assert api.delete("/api/pipelines/scores/").status_code == 204
    assert not Pipeline.objects.exists()


def test_detail_lists_the_last_ten_runs(api: Client) -> None:
    post(api, "/api/pipelines/", BODY)
    pipeline = Pipeline.objects.get(name="scores")
    for index in range(12):
        run = pipeline_run_start(pipeline=pipeline, once=True)
        pipeline_run_finish(run=run, error="broker down" if index == 11 else "")

    detail = api.get("/api/pipelines/scores/").json()

    runs = detail["recent_runs"]
    assert len(runs) == 10
    newest = PipelineRun.objects.filter(pipeline=pipeline).order_by("-started", "-id")[:10]
    assert [run["id"] for run in runs] == [run.id for run in newest]
    assert (runs[0]["status"], runs[0]["error"]) == ("failed", "broker down")
    assert "recent_runs" not in api.get("/api/pipelines/").json()["results"][0]
    # Runs are not written through the API.
    api.patch("/api/pipelines/scores/", {"recent_runs": []}, content_type="application/json")
    assert PipelineRun.objects.filter(pipeline=pipeline).count() == 12
    assert api.delete("/api/pipelines/scores/").status_code == 204
    assert not PipelineRun.objects.exists()


def test_bad_source_is_a_field_error(api: Client) -> None:
    missing = post(api, "/api/pipelines/", {**BODY, "source_topic": ""})
    assert missing.status_code == 400
    assert "needs a topic" in missing.json()["source_topic"][0]
    both = post(api, "/api/pipelines/", {**BODY, "source_kind": "files"})
    assert both.status_code == 400
    assert set(both.json()) == {"source_files", "source_topic"}
    kind = post(api, "/api/pipelines/", {**BODY, "source_kind": "ftp"})
    assert kind.status_code == 400
    assert "source_kind" in kind.json()
    loop = post(api, "/api/pipelines/", {**BODY, "sink_topic": "raw-scores"})
    assert loop.status_code == 400
    assert "its own output" in loop.json()["sink_topic"][0]
    unknown = post(api, "/api/pipelines/", {**BODY, "json_schema": None, "schema": "nowhere"})
    assert unknown.status_code == 400
    assert "schema" in unknown.json()
    assert not Pipeline.objects.exists()


def test_a_schema_a_pipeline_uses_is_not_deleted(api: Client) -> None:
    Schema.objects.create(name="score", json_schema=SCORE)
    assert post(api, "/api/pipelines/", {**BODY, "json_schema": None, "schema": "score"}).status_code == 201
    conflict = api.delete("/api/schemas/score/")
    assert conflict.status_code == 409
    assert "scores" in conflict.json()["detail"]


def test_anonymous_gets_401_and_non_staff_403() -> None:
    anonymous = Client()
    assert anonymous.get("/api/pipelines/").status_code == 401
    assert post(anonymous, "/api/pipelines/", BODY).status_code == 401
    user = get_user_model().objects.create_user("bob", "bob@example.com", "pw-for-tests")
    member = Client()
    member.force_login(user)
    assert member.get("/api/pipelines/").status_code == 403
    assert post(member, "/api/pipelines/", BODY).status_code == 403
    assert not Pipeline.objects.exists()


def test_openapi_document(api: Client) -> None:
    response = api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    document = response.json()
    for url in ("/api/pipelines/", "/api/pipelines/{name}/"):
        assert url in document["paths"], sorted(document["paths"])
    detail = document["components"]["schemas"]["PipelineDetail"]
    assert detail["properties"]["recent_runs"]["type"] == "array"

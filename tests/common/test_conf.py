"""A key of ``settings.SLUICE`` that no installed app declares is an error naming it, not silently ignored."""

from __future__ import annotations

from typing import Any

import pytest
from django.apps import apps
from django.core.exceptions import ImproperlyConfigured

from common.conf import settings_check, settings_known
from streams.conf import streams_settings


def test_every_app_declares_its_keys() -> None:
    known = settings_known()
    assert {"KAFKA_TIMEOUT", "DEV_ISSUER", "SPARK_MASTER", "DEMO_PIPELINE"} <= known


def test_the_project_settings_pass() -> None:
    settings_check()


def test_an_unknown_key_is_named_when_settings_are_read(settings: Any) -> None:
    settings.SLUICE = {**settings.SLUICE, "KAFKA_TIMEOUTS": 3.0}
    with pytest.raises(ImproperlyConfigured, match=r"Unknown SLUICE setting 'KAFKA_TIMEOUTS'; known: .*KAFKA_TIMEOUT"):
        streams_settings.KAFKA_TIMEOUT  # noqa: B018


def test_an_unknown_key_stops_the_start(settings: Any) -> None:
    settings.SLUICE = {"FOO": 1}
    with pytest.raises(ImproperlyConfigured, match="Unknown SLUICE setting 'FOO'"):
        apps.get_app_config("common").ready()


def test_a_key_of_another_app_is_known_to_every_app(settings: Any) -> None:
    settings.SLUICE = {"SPARK_MASTER": "local[2]", "KAFKA_TIMEOUT": 2.0}
    assert streams_settings.KAFKA_TIMEOUT == 2.0

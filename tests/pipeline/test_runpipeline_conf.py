"""``runpipeline --conf KEY=VALUE``: Spark properties handed to the session as given."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError


def test_each_conf_pair_reaches_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}
    monkeypatch.setattr("pipeline.runner.pipeline_execute", lambda name, **options: seen.update(options))
    call_command("runpipeline", "scores", "--conf", "spark.executor.memory=2g", "--conf", "spark.a=x=y")
    assert seen["spark_conf"] == {"spark.executor.memory": "2g", "spark.a": "x=y"}


@pytest.mark.parametrize("pair", ["spark.executor.memory", "=2g"])
def test_a_conf_without_key_and_value_is_refused(pair: str) -> None:
    with pytest.raises(CommandError, match="--conf takes KEY=VALUE"):
        call_command("runpipeline", "scores", "--conf", pair)

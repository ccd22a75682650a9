"""The Dockerfile's two images: a gateway with neither Java nor Spark, a pipeline image with both."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tests.conftest import ROOT


@dataclass
class Stage:
    name: str
    parent: str
    instructions: list[str] = field(default_factory=list)


def dockerfile_stages() -> dict[str, Stage]:
    """The Dockerfile's stages by name, each with its instructions (continuation lines joined)."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    stages: dict[str, Stage] = {}
    current: Stage | None = None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        start = re.fullmatch(r"FROM\s+(\S+)(?:\s+AS\s+(\S+))?", line, flags=re.IGNORECASE)
        if start:
            current = Stage(name=start.group(2) or "", parent=start.group(1))
            stages[current.name] = current
        else:
            assert current is not None, f"an instruction before FROM: {line!r}"
            current.instructions.append(line)
    return stages


def lineage(stages: dict[str, Stage], name: str) -> list[Stage]:
    """``name``'s stage and the stages it is built on, down to the base image."""
    chain = [stages[name]]
    while chain[-1].parent in stages:
        chain.append(stages[chain[-1].parent])
    return chain


def instructions(stages: dict[str, Stage], name: str) -> str:
    return "\n".join(line for stage in lineage(stages, name) for line in stage.instructions)


def test_both_targets_exist_on_python_311_slim() -> None:
    stages = dockerfile_stages()
    assert {"gateway", "pipeline"} <= set(stages)
    for target in ("gateway", "pipeline"):
        assert lineage(stages, target)[-1].parent.startswith("python:3.11-slim")


def test_the_gateway_installs_the_gateway_requirements_and_no_java() -> None:
    stages = dockerfile_stages()
    gateway = instructions(stages, "gateway")
    assert re.search(r"pip install .*-r requirements-gateway\.txt", gateway)
    assert not re.search(r"-r requirements\.txt", gateway)
    assert "openjdk" not in gateway
    assert "pyspark" not in gateway
    assert "CMD" in gateway


def test_the_pipeline_adds_java_17_and_the_full_requirements() -> None:
    pipeline = instructions(dockerfile_stages(), "pipeline")
    assert "openjdk-17" in pipeline
    assert re.search(r"pip install .*-r requirements\.txt", pipeline)


def test_the_gateway_is_the_default_target() -> None:
    assert list(dockerfile_stages())[-1] == "gateway"


def test_no_image_allows_every_host() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert not re.search(r"ALLOWED_HOSTS\s*=\s*['\"]?\*", text)
    for stage in dockerfile_stages().values():
        assert not any(
            "ALLOWED_HOSTS" in line for line in stage.instructions if line.upper().startswith(("ENV", "ARG"))
        )


def test_the_images_leave_secrets_and_local_state_out() -> None:
    ignored = set((ROOT / ".dockerignore").read_text().split())
    assert {".env", ".git", ".venv", "db.sqlite3"} <= ignored


def test_no_image_migrates_when_it_starts() -> None:
    """Migrating is a one-off step per release (the compose `migrate` service, the Kubernetes Job)."""
    for target in ("gateway", "pipeline"):
        commands = [
            line
            for line in instructions(dockerfile_stages(), target).splitlines()
            if line.startswith(("CMD", "ENTRYPOINT"))
        ]
        assert commands, target
        assert not any("migrate" in line for line in commands), commands
        assert "runstreams" in commands[-1]
    assert "python manage.py migrate" in (ROOT / "Dockerfile").read_text()

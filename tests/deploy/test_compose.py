"""deploy/compose.yaml: valid against the Compose specification's JSON schema (offline, the copy
check-jsonschema ships), and the fleet it describes holds together.

Docker is not needed: the file is read with PyYAML (anchors and merge keys resolved as Compose does).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import ROOT

COMPOSE = ROOT / "deploy" / "compose.yaml"


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return loaded


def validate(path: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec", str(path)]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def test_the_file_is_valid_against_the_compose_specification() -> None:
    checked = validate(COMPOSE)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_schema_check_rejects_a_broken_file(tmp_path: Path) -> None:
    broken = tmp_path / "compose.yaml"
    broken.write_text(COMPOSE.read_text().replace("service_completed_successfully", "service_finished"))
    checked = validate(broken)
    assert checked.returncode != 0
    assert "depends_on" in checked.stdout + checked.stderr


def test_the_fleet_has_its_parts() -> None:
    services = compose()["services"]
    assert {"postgres", "redis", "migrate", "gateway", "nginx", "pipeline"} <= set(services)
    assert services["gateway"]["deploy"]["replicas"] >= 2
    assert services["gateway"]["build"]["target"] == "gateway"
    assert services["pipeline"]["build"]["target"] == "pipeline"
    assert services["pipeline"]["command"][2] == "runpipeline"


def test_migrations_run_once_before_the_gateways_and_the_pipeline() -> None:
    services = compose()["services"]
    assert services["migrate"]["command"][-2:] == ["migrate", "--noinput"]
    assert services["migrate"]["restart"] == "no"
    for name in ("gateway", "pipeline"):
        assert services[name]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
        assert "migrate" not in services[name]["command"]
    assert services["gateway"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert services["gateway"]["depends_on"]["redis"]["condition"] == "service_healthy"
    assert services["nginx"]["depends_on"]["gateway"]["condition"] == "service_healthy"


def test_secrets_hosts_and_kafka_come_from_the_environment() -> None:
    services = compose()["services"]
    for name in ("migrate", "gateway", "pipeline"):
        environment = services[name]["environment"]
        for variable in ("SECRET_KEY", "ALLOWED_HOSTS", "KAFKA_BOOTSTRAP_SERVERS"):
            # Required (${NAME:?...}): compose refuses to start without it.
            assert re.search(r"\$\{" + variable + r":\?", environment[variable]), (name, variable)
        assert environment["REDIS_URL"].startswith("redis://redis:")
        assert "@postgres:" in environment["DATABASE_URL"]
    assert not re.search(r"ALLOWED_HOSTS\s*[:=]\s*['\"]?\*", COMPOSE.read_text())


def test_nginx_serves_the_repository_file_in_front_of_the_gateways() -> None:
    nginx = compose()["services"]["nginx"]
    source, target = nginx["volumes"][0].split(":")[:2]
    assert (COMPOSE.parent / source).resolve() == ROOT / "deploy" / "nginx.conf"
    assert target == "/etc/nginx/templates/nginx.conf.template"
    assert nginx["environment"]["NGINX_ENVSUBST_OUTPUT_DIR"] == "/etc/nginx"
    assert "server gateway:8000" in nginx["environment"]["SLUICE_UPSTREAM_SERVERS"]
    # The gateways are reached through nginx only.
    assert "ports" not in compose()["services"]["gateway"]


def test_the_gateways_get_longer_to_stop_than_their_drain() -> None:
    gateway = compose()["services"]["gateway"]
    grace = int(gateway["stop_grace_period"].removesuffix("s"))
    assert grace > float(gateway["environment"]["SLUICE_SHUTDOWN_SECONDS"])

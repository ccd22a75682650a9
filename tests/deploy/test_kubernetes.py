"""deploy/kubernetes/: valid against the Kubernetes schemas (offline, kubernetes-validate), and consistent.

The validator bundles the schemas of each Kubernetes release; the files are checked strictly
(an unknown field is an error) against the newest release it knows and the oldest one supported here.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT

KUBERNETES = ROOT / "deploy" / "kubernetes"
# The oldest Kubernetes release the files are meant for (PodDisruptionBudget policy/v1 and
# HorizontalPodAutoscaler autoscaling/v2 are older still).
OLDEST = "1.29.0"


def manifest_files() -> list[Path]:
    return sorted(KUBERNETES.glob("*.yaml"))


def resources() -> dict[tuple[str, str], dict[str, Any]]:
    """Every resource in deploy/kubernetes/ by (kind, name)."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for path in manifest_files():
        for document in yaml.safe_load_all(path.read_text()):
            if document:
                found[(document["kind"], document["metadata"]["name"])] = document
    return found


def validate(*paths: Path, version: str | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "kubernetes_validate", "--strict", "--quiet"]
    if version:
        command += ["--kubernetes-version", version]
    return subprocess.run([*command, *map(str, paths)], capture_output=True, text=True, timeout=120, check=False)


def container(resource: dict[str, Any], name: str) -> dict[str, Any]:
    spec = resource["spec"]["template"]["spec"]
    return next(c for c in spec["containers"] + spec.get("initContainers", []) if c["name"] == name)


@pytest.mark.parametrize("version", [None, OLDEST], ids=["newest", "oldest"])
def test_every_manifest_is_valid_against_the_kubernetes_schemas(version: str | None) -> None:
    assert len(manifest_files()) >= 6
    checked = validate(*manifest_files(), version=version)
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["spec"].__setitem__("replicas", "three"), "spec.replicas: 'three' is not of type 'integer'"),
        (
            lambda d: d["spec"]["template"]["spec"].__setitem__("terminationGracePeriod", 45),
            "terminationGracePeriod",
        ),
    ],
    ids=["a field of the wrong type", "a misspelt field"],
)
def test_the_validator_rejects_a_broken_manifest(tmp_path: Path, mutate: Any, message: str) -> None:
    document = yaml.safe_load((KUBERNETES / "gateway-deployment.yaml").read_text())
    mutate(document)
    broken = tmp_path / "broken.yaml"
    broken.write_text(yaml.safe_dump(document))
    checked = validate(broken)
    assert checked.returncode != 0
    assert message in checked.stdout + checked.stderr


def test_the_gateway_is_probed_drained_and_unprivileged() -> None:
    found = resources()
    deployment = found[("Deployment", "sluice-gateway")]
    pod = deployment["spec"]["template"]["spec"]
    gateway = container(deployment, "gateway")
    assert gateway["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert gateway["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert "migrate" not in gateway["command"]
    # The grace period covers the preStop pause and the drain (SLUICE_SHUTDOWN_SECONDS), with a margin.
    pause = int(gateway["lifecycle"]["preStop"]["exec"]["command"][-1])
    shutdown = float(found[("ConfigMap", "sluice-settings")]["data"]["SLUICE_SHUTDOWN_SECONDS"])
    assert pause > 0
    assert pod["terminationGracePeriodSeconds"] > pause + shutdown
    # The drain window is taken within the shutdown time, leaving time for the last streams to end.
    assert float(found[("ConfigMap", "sluice-settings")]["data"]["SLUICE_DRAIN_SECONDS"]) <= shutdown - 1
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert gateway["securityContext"]["allowPrivilegeEscalation"] is False
    assert gateway["resources"]["requests"]
    assert gateway["resources"]["limits"]
    # ALLOWED_HOSTS: the public names and the pod's own address (probes and scrapes use it), never "*".
    environment = {e["name"]: e for e in gateway["env"]}
    assert "*" not in environment["ALLOWED_HOSTS"]["value"]
    assert "$(POD_IP)" in environment["ALLOWED_HOSTS"]["value"]


def test_migrations_run_once_in_a_job_and_gateways_wait_for_them() -> None:
    found = resources()
    job = found[("Job", "sluice-migrate")]
    assert container(job, "migrate")["command"][-2:] == ["migrate", "--noinput"]
    check = container(found[("Deployment", "sluice-gateway")], "migrations-applied")
    assert "--check" in check["command"]
    pipeline = found[("Deployment", "sluice-pipeline-orders")]
    assert "migrate" not in container(pipeline, "pipeline")["command"]


def test_the_service_pdb_and_autoscaler_select_the_gateways() -> None:
    found = resources()
    labels = found[("Deployment", "sluice-gateway")]["spec"]["template"]["metadata"]["labels"]
    assert found[("Service", "sluice-gateway")]["spec"]["selector"] == labels
    assert found[("PodDisruptionBudget", "sluice-gateway")]["spec"]["selector"]["matchLabels"] == labels
    hpa = found[("HorizontalPodAutoscaler", "sluice-gateway")]["spec"]
    assert hpa["scaleTargetRef"]["name"] == "sluice-gateway"
    metric = hpa["metrics"][0]["pods"]["metric"]["name"]
    # The gauge the gateways export under that name.
    assert re.search(rf'"{metric}"', (ROOT / "streams" / "ops" / "metrics.py").read_text())


def test_the_pipeline_is_its_own_single_driver_workload() -> None:
    pipeline = resources()[("Deployment", "sluice-pipeline-orders")]
    assert pipeline["spec"]["replicas"] == 1
    assert pipeline["spec"]["strategy"]["type"] == "Recreate"
    assert container(pipeline, "pipeline")["command"][2:4] == ["runpipeline", "orders"]
    assert "sluice-pipeline" in container(pipeline, "pipeline")["image"]

"""The gateway installs and runs without the Spark pipeline's packages (requirements-gateway.txt)."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import ROOT

# What only the pipeline needs (runpipeline, runstreams --demo's pipeline): never on the gateway's import path.
PIPELINE_ONLY = ("pyspark", "py4j", "pyarrow", "pandas", "numpy")
# A first line that makes importing any of them fail, as in an install from requirements-gateway.txt.
WITHOUT_PIPELINE_PACKAGES = f"import sys; sys.modules.update(dict.fromkeys({PIPELINE_ONLY!r}))\n"


def run_without_pipeline_packages(code: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLUICE_", "DJANGO_", "SECRET_KEY", "DEBUG"))}
    env.update(DEBUG="1", DJANGO_SETTINGS_MODULE="project.settings", PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_PIPELINE_PACKAGES + textwrap.dedent(code)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_blocker_blocks() -> None:
    done = run_without_pipeline_packages("import pyspark")
    assert done.returncode != 0
    assert "ModuleNotFoundError" in done.stderr or "ImportError" in done.stderr


def test_the_asgi_application_loads_without_pipeline_packages() -> None:
    done = run_without_pipeline_packages(
        """
        import project.asgi
        import project.urls
        from django.contrib import admin

        print(type(project.asgi.application).__name__, len(admin.site._registry))
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ProtocolTypeRouter")


@pytest.mark.parametrize("args", [["check"], ["runstreams", "--help"]])
def test_manage_py_runs_without_pipeline_packages(args: list[str]) -> None:
    done = run_without_pipeline_packages(
        f"""
        import runpy

        sys.argv = ["manage.py", *{args!r}]
        runpy.run_path("manage.py", run_name="__main__")
        """
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr


def test_no_gateway_package_imports_a_pipeline_package_anywhere() -> None:
    """Not at module level, not in a function: only pipeline/ (its Spark job) and demo/ may."""
    found = []
    for package in ("streams", "guards", "common", "project"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                found += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in PIPELINE_ONLY]
    assert not found


def pins(name: str) -> dict[str, str]:
    """The ``name==version`` lines of a requirements file, following its ``-r`` includes."""
    found: dict[str, str] = {}
    for line in (ROOT / name).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("-r "):
            found.update(pins(line[3:].strip()))
        elif line:
            match = re.fullmatch(r"([A-Za-z0-9_.\-]+)(\[[^\]]*\])?==(\S+)", line)
            assert match, f"{name}: not pinned: {line!r}"
            found[match.group(1).lower().replace("_", "-")] = match.group(3)
    return found


def test_the_gateway_requirements_are_the_full_set_less_the_pipeline() -> None:
    gateway, full = pins("requirements-gateway.txt"), pins("requirements.txt")
    assert not set(PIPELINE_ONLY) & set(gateway)
    assert set(PIPELINE_ONLY) <= set(full)
    assert {name: full[name] for name in gateway} == gateway  # the same pins
    assert "-r requirements-gateway.txt" in (ROOT / "requirements.txt").read_text()

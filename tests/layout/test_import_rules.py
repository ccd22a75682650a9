"""The import rules in pyproject.toml hold for the tree, and a deliberate violation of each kind is caught."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("bench", "project", "demo", "pipeline", "streams", "guards", "common")
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_tree_keeps_every_contract() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "broken" not in result.stdout.lower().replace("0 broken", "")


@pytest.fixture
def tree_copy(tmp_path: Path) -> Path:
    """The packages and pyproject.toml, copied, for a test to break."""
    for package in PACKAGES:
        if (ROOT / package).is_dir():
            shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


@pytest.mark.parametrize(
    ("module", "source", "contract"),
    [
        ("streams/core/violation.py", "import django.conf\n", "run without Django"),
        ("streams/fanout/violation.py", "from channels.layers import get_channel_layer\n", "run without Django"),
        ("streams/core/violation.py", "from streams.edge import app\n", "streams/ layers import downward"),
        ("streams/edge/violation.py", "from streams.server import flow\n", "streams/ layers import downward"),
        ("guards/violation.py", "import streams.models\n", "Apps import downward"),
        ("common/violation.py", "from project import urls\n", "Apps import downward"),
        ("streams/core/violation.py", "from bench.lib.paths import ROOT\n", "bench/ stands on top"),
    ],
)
def test_a_violation_breaks_its_contract(tree_copy: Path, module: str, source: str, contract: str) -> None:
    (tree_copy / module).write_text(source, encoding="utf-8")
    result = lint_imports(tree_copy)
    assert result.returncode != 0, result.stdout
    broken = result.stdout.partition("Broken contracts")[2]
    assert contract in broken, result.stdout
    assert module.replace("/", ".").removesuffix(".py") in broken

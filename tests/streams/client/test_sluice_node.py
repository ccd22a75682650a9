"""``sluice.js``'s own tests, which ship in its package: ``npm test`` in ``streams/static/sluice/``."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[3] / "streams" / "static" / "sluice"


def test_sluice_js_passes_its_node_tests() -> None:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are not installed")
    result = subprocess.run(
        ["npm", "test", "--silent"], cwd=PACKAGE, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "# fail 0" in result.stdout

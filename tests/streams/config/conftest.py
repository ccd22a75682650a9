"""Fixtures for the configuration-as-code tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def tmp_yaml(tmp_path: Path) -> Any:
    """Factory: ``tmp_yaml(text)`` writes a file and returns its path."""

    def write(text: str, name: str = "config.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return write

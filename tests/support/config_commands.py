"""The configuration commands run as a user would, and the rows they leave, for comparison."""

from __future__ import annotations

from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

FIXTURES = Path(__file__).resolve().parents[1] / "streams" / "config" / "fixtures"
# The configuration block of SPEC 6, its pipelines section included.
SPEC_EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "sluice.yaml"


def applyconfig(path: Path | str, *args: str) -> str:
    """``manage.py applyconfig`` and what it printed."""
    out = StringIO()
    call_command("applyconfig", str(path), *args, stdout=out)
    return out.getvalue()


def applyconfig_refused(path: Path | str, *args: str) -> str:
    """The error ``applyconfig`` refuses ``path`` with, which must be one line."""
    with pytest.raises(CommandError) as raised:
        applyconfig(path, *args)
    error = str(raised.value)
    assert len(error.splitlines()) == 1, error
    return error


def exportconfig(*args: str) -> str:
    out = StringIO()
    call_command("exportconfig", *args, stdout=out)
    return out.getvalue()


def rows() -> dict[str, list[dict[str, Any]]]:
    """Every configuration row, as comparable data (no ids or timestamps)."""
    from guards.models import Guard
    from streams.models import Route, RouteFilter, Schema, Topic

    skip = {"id", "created", "updated"}

    def plain(model: Any, **names: str) -> list[dict[str, Any]]:
        out = []
        for row in model.objects.all():
            values = {f.name: getattr(row, f.attname) for f in model._meta.concrete_fields if f.name not in skip}
            for fk, attribute in names.items():
                related = getattr(row, fk)
                values[fk] = getattr(related, attribute) if related is not None else None
            out.append(values)
        return sorted(out, key=repr)

    return {
        "guards": plain(Guard),
        "schemas": plain(Schema),
        "topics": plain(Topic, schema="name"),
        "routes": plain(Route, guard="name", schema="name"),
        "filters": plain(RouteFilter, route="path"),
    }

"""deploy/grafana/sluice.json: valid JSON, a Grafana dashboard whose queries name metrics Sluice exports."""

from __future__ import annotations

import json
import re

from tests.conftest import ROOT

DASHBOARD = ROOT / "deploy" / "grafana" / "sluice.json"
# What Prometheus adds to a family's name: counters' _total, histograms' _bucket, _sum and _count.
SUFFIXES = re.compile(r"_(total|bucket|sum|count)$")


def exported_names() -> set[str]:
    """The metric family names Sluice's code declares (``"sluice_..."`` in streams/), without suffixes."""
    names: set[str] = set()
    for path in (ROOT / "streams").rglob("*.py"):
        names.update(SUFFIXES.sub("", name) for name in re.findall(r"\"(sluice_[a-z0-9_]+)\"", path.read_text()))
    return names


def test_the_dashboard_is_valid_json_with_panels_and_queries() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "sluice"
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        assert panel["targets"], panel["title"]
        assert panel["datasource"]["uid"] == "${datasource}"


def test_every_query_names_metrics_sluice_exports() -> None:
    exported = exported_names()
    assert "sluice_delivery_lag_seconds" in exported
    used: set[str] = set()
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        for target in panel["targets"]:
            names = re.findall(r"\bsluice_[a-z0-9_]+", target["expr"])
            assert names, target["expr"]
            used.update(SUFFIXES.sub("", name) for name in names)
    assert used <= exported, sorted(used - exported)
    # What the dashboard is for: streams, deliveries, lag, refusals, drops, registry waits.
    for needed in (
        "sluice_streams_open",
        "sluice_events_delivered",
        "sluice_delivery_lag_seconds",
        "sluice_fetch_lag_seconds",
        "sluice_requests_refused",
        "sluice_events_dropped",
        "sluice_registry_waiting",
    ):
        assert needed in used, needed

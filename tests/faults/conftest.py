"""Fault scenarios: shared fixtures, and a summary of what each scenario checked at the end of the run."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tests.faults.harness import GROUPS, Verdict

CLIENTS = 100


@dataclass
class ScenarioResult:
    name: str
    clients: int
    produced: int
    verdict: Verdict
    max_recovery: float
    notes: str = ""


RESULTS: list[ScenarioResult] = []


@pytest.fixture
def fault_report() -> Callable[..., None]:
    """Record one scenario's outcome for the summary (and assert nothing was lost, doubled or reordered)."""

    def record(name: str, clients: int, produced: int, verdict: Verdict, max_recovery: float, notes: str = "") -> None:
        RESULTS.append(ScenarioResult(name, clients, produced, verdict, max_recovery, notes))

    return record


@pytest.fixture
def fault_paths(route: Any) -> Callable[[str, int], list[tuple[str, str | None]]]:
    """Factory: routes on ``topic`` (everything, and one per header group) and ``count`` client paths over them."""

    def make(topic: str, count: int = CLIENTS, **fields: Any) -> list[tuple[str, str | None]]:
        base = f"/faults/{uuid.uuid4().hex[:8]}"
        options = {"initial": "earliest", "heartbeat_seconds": 1, **fields}
        route(path=f"{base}/all", topic=topic, **options)
        route(path=f"{base}/g/{{group}}", topic=topic, filters=[{"headers": {"group": "${params.group}"}}], **options)
        paths: list[tuple[str, str | None]] = []
        for n in range(count):
            group = None if n % 2 == 0 else GROUPS[(n // 2) % 2]
            paths.append((f"{base}/all", None) if group is None else (f"{base}/g/{group}", group))
        return paths

    return make


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not RESULTS:
        return
    write = terminalreporter.write_line
    terminalreporter.section("fault scenarios")
    write(
        f"{'scenario':<44} {'clients':>7} {'produced':>8} {'checked':>9} {'lost':>5} {'dup':>4} {'order':>5}"
        f" {'max recovery':>12}"
    )
    for r in RESULTS:
        v = r.verdict
        write(
            f"{r.name:<44} {r.clients:>7} {r.produced:>8} {v.messages:>9} {v.lost:>5} {v.duplicated:>4}"
            f" {v.out_of_order:>5} {r.max_recovery:>11.2f}s  {r.notes}"
            + (f"; records the producer wrote twice, each delivered once: {v.written_twice}" if v.written_twice else "")
        )
    write(
        f"{len(RESULTS)} scenarios, {sum(r.verdict.messages for r in RESULTS)} messages checked, "
        f"{sum(r.verdict.lost for r in RESULTS)} lost, {sum(r.verdict.duplicated for r in RESULTS)} duplicated"
    )

"""Hypothesis profiles for the fuzz tests, and a count of what they tried, shown at the end of the run.

``ci`` (the default) keeps the run short; ``HYPOTHESIS_PROFILE=deep`` tries far more.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
settings.register_profile(
    "deep", max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# What the fuzz tests tried: inputs per parser, and for the HTTP tests requests sent and statuses seen.
TRIED: Counter[str] = Counter()
STATUSES: Counter[int] = Counter()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not TRIED:
        return
    terminalreporter.section("hostile input")
    for name, count in sorted(TRIED.items()):
        terminalreporter.write_line(f"{name:<40} {count:>7}")
    if STATUSES:
        seen = ", ".join(f"{status}: {count}" for status, count in sorted(STATUSES.items()))
        terminalreporter.write_line(f"{'statuses seen':<40} {seen}")
    terminalreporter.write_line(f"{'total inputs':<40} {sum(TRIED.values()):>7}")

"""A CI-sized guard on the fan-out's speed: Sluice against sse-starlette, measured in the same run.

Absolute numbers move with the machine and whatever else runs on it, so the
guard compares Sluice with a peer measured minutes apart on the same box:
deliveries per second of server CPU (how many events one core would deliver)
for 200 clients at 100 msg/s, Sluice's over sse-starlette's. It fails when that
ratio falls below half the one stored in ``bench/regression_baseline.json``, when
Sluice's median latency (Kafka produce to client receipt) in that run is more than
twice the stored one, or when Sluice loses an event.

A second guard keeps latency free of history: on one long-lived gateway and
broker (``bench/after_burst.py``), 100 clients x 50 msg/s after a burst of
1,000 x 100 msg/s and a quiet pause must have a p50 within 1.5x the fresh run's
+ 1 ms and a p99 within 2x the fresh run's (or 15 ms), the bounds stored in the
baseline.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
BASELINE = ROOT / "bench" / "regression_baseline.json"

pytestmark = pytest.mark.slow


def peers_available() -> str | None:
    """None if the peers' virtualenv exists or can be made; else why not."""
    sys.path.insert(0, str(ROOT))
    from bench.lib.servers import peers_venv

    try:
        peers_venv()
    except (subprocess.SubprocessError, OSError) as exc:
        return f"the peers' virtualenv (bench/.peers-venv) could not be created, offline? ({exc})"
    return None


def per_core(row: dict) -> float:
    """Deliveries per second of server CPU."""
    return row["deliveries_per_s"] / max(row["server_cpu"] / 100, 1e-6)


def _bench_json(tmp_path: Path, script: str, *args: str) -> Any:
    """Run ``bench/<script>`` with ``args`` and ``--json``; what it wrote there."""
    out = tmp_path / "result.json"
    subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *args, "--json", str(out)],
        cwd=ROOT,
        check=True,
        timeout=600,
    )
    return json.loads(out.read_text())


def test_sluice_keeps_its_lead_over_sse_starlette(tmp_path: Path) -> None:
    reason = peers_available()
    if reason is not None:
        pytest.skip(reason)
    baseline = json.loads(BASELINE.read_text())
    found = _bench_json(
        tmp_path,
        "compare.py",
        "--servers",
        "sluice,sse-starlette",
        "--scenarios",
        "fanout",
        "--fanout-clients",
        str(baseline["clients"]),
        "--duration",
        str(baseline["duration"]),
    )
    rows = {row["server"]: row for row in found}
    sluice, peer = rows["sluice"], rows["sse-starlette"]
    assert sluice["opened"] == baseline["clients"]
    assert sluice["lost"] == 0, f"Sluice lost {sluice['lost']} events"
    assert sluice["p50_ms"] <= 2 * baseline["p50_ms"], (
        f"Sluice's latency p50 is {sluice['p50_ms']:.1f} ms; the baseline is {baseline['p50_ms']:.1f} ms "
        "(fails above twice it)"
    )
    ratio = per_core(sluice) / per_core(peer)
    assert ratio >= baseline["ratio"] / 2, (
        f"Sluice delivers {ratio:.1f}x sse-starlette's events per CPU second; the baseline is "
        f"{baseline['ratio']:.1f}x (fails below half of it)"
    )


def test_latency_after_a_burst_is_the_fresh_latency(tmp_path: Path) -> None:
    """About a minute: 5 s fresh, a 10 s burst, 10 s quiet, 5 s after it, on one server and broker."""
    bounds = json.loads(BASELINE.read_text())["after_burst"]
    result = _bench_json(
        tmp_path,
        "after_burst.py",
        "--no-ramp",
        "--seconds",
        str(bounds["seconds"]),
        "--burst-seconds",
        str(bounds["burst_seconds"]),
        "--pause",
        str(bounds["pause"]),
    )
    assert all(step["lost"] == 0 for step in result["steps"]), result["steps"]
    fresh, after = result["verdict"]["fresh_p50"], result["verdict"]["after_p50"]
    fresh99, after99 = result["verdict"]["fresh_p99"], result["verdict"]["after_p99"]
    assert after <= bounds["p50_factor"] * fresh + bounds["p50_slack_ms"], (
        f"after the burst p50 {after:.1f} ms against {fresh:.1f} fresh "
        f"(fails above {bounds['p50_factor']}x + {bounds['p50_slack_ms']} ms)"
    )
    assert after99 <= max(bounds["p99_factor"] * fresh99, bounds["p99_floor_ms"]), (
        f"after the burst p99 {after99:.1f} ms against {fresh99:.1f} fresh "
        f"(fails above {bounds['p99_factor']}x or {bounds['p99_floor_ms']} ms)"
    )

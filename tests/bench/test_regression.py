"""A CI-sized guard on the fan-out's speed: Sluice against sse-starlette, measured in the same run.

Absolute numbers move with the machine and whatever else runs on it, so the
guard compares Sluice with a peer measured minutes apart on the same box:
deliveries per second of server CPU (how many events one core would deliver)
for 200 clients at 100 msg/s, Sluice's over sse-starlette's. It fails when that
ratio falls below half the one stored in ``bench/regression_baseline.json``, when
Sluice's median latency (Kafka produce to client receipt) in that run is more than
twice the stored one, or when Sluice loses an event.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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


def test_sluice_keeps_its_lead_over_sse_starlette(tmp_path: Path) -> None:
    reason = peers_available()
    if reason is not None:
        pytest.skip(reason)
    baseline = json.loads(BASELINE.read_text())
    out = tmp_path / "rows.json"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "compare.py"),
            "--servers",
            "sluice,sse-starlette",
            "--scenarios",
            "fanout",
            "--fanout-clients",
            str(baseline["clients"]),
            "--duration",
            str(baseline["duration"]),
            "--json",
            str(out),
        ],
        cwd=ROOT,
        check=True,
        timeout=600,
    )
    rows = {row["server"]: row for row in json.loads(out.read_text())}
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

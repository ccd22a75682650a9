"""The open-file limit ``runstreams`` raises at start: the soft limit up to the hard one, and the line it prints."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

from streams.server.descriptors import RESERVED_DESCRIPTORS, OpenFiles
from tests.conftest import Gateway

ROOT = Path(__file__).resolve().parents[3]
PROBE = (
    "import json, resource\n"
    "from streams.server.descriptors import open_files_raise\n"
    "found = open_files_raise()\n"
    "print(json.dumps([found.before, found.soft, resource.getrlimit(resource.RLIMIT_NOFILE)[0]]))\n"
)


def test_the_soft_limit_is_raised_to_the_hard_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    low = min(soft, 256)

    def lowered() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (low, hard))

    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, preexec_fn=lowered, capture_output=True, text=True, check=True
    )
    before, raised, now = json.loads(done.stdout)
    assert before == low
    expected = hard if hard != resource.RLIM_INFINITY else raised
    assert raised == now == expected
    assert raised > low or hard == low


def test_the_start_line_says_what_the_workers_hold() -> None:
    line = OpenFiles(before=1024, soft=20_000, hard=20_000).describe(workers=5)
    held = 20_000 - RESERVED_DESCRIPTORS
    assert line == (
        f"Open files: soft limit raised from 1,024 to 20,000 (hard limit 20,000): about {held:,} streams "
        f"per worker, {5 * held:,} with 5 workers"
    )


def test_a_low_hard_limit_says_how_to_raise_it() -> None:
    line = OpenFiles(before=1024, soft=1024, hard=1024).describe(workers=1)
    assert line.startswith("Open files: soft limit at 1,024 (hard limit 1,024): about 924 streams per worker;")
    assert "LimitNOFILE" in line


def test_the_gateway_runs_at_its_hard_limit_and_says_so(gateway: Gateway) -> None:
    assert gateway.process is not None
    limits = Path(f"/proc/{gateway.process.pid}/limits").read_text()
    soft, hard = next(line for line in limits.splitlines() if line.startswith("Max open files")).split()[3:5]
    assert soft == hard
    said = [line for line in gateway.output if line.startswith("Open files: soft limit")]
    assert len(said) == 1
    assert (f"{int(soft):,}" if soft.isdigit() else soft) in said[0]

"""Code run inside the gateway under measurement, with nothing in Sluice knowing about it.

A ``sitecustomize`` module on the gateway's ``PYTHONPATH`` (:func:`site_install`) sets
up what to measure and writes its findings to a file when sent a signal;
:func:`signal_answer` sends the signal and waits for the file.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from bench.lib.paths import ROOT


def site_install(tmp: Path, code: str, **environ: str) -> None:
    """Make ``code`` the ``sitecustomize`` of every Python started from now on (the gateway among them)."""
    site = tmp / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(code)
    os.environ["PYTHONPATH"] = os.pathsep.join([str(site), str(ROOT)])
    os.environ.update(environ)


def signal_answer(pid: int, signum: int, path: Path, timeout: float = 120.0) -> Path:
    """Send ``signum`` to ``pid`` and wait until it has written ``path`` (which it replaces whole)."""
    path.unlink(missing_ok=True)
    os.kill(pid, signum)
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"process {pid} wrote no {path.name} within {timeout:.0f} s")
        time.sleep(0.2)
    return path

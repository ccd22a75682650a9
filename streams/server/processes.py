"""Stopping child processes politely, then firmly."""

from __future__ import annotations

import signal
import subprocess
from typing import Any


def process_stop(process: subprocess.Popen[Any], *, timeout: float = 10.0, sig: int = signal.SIGTERM) -> None:
    """Send ``sig`` (SIGTERM by default), wait up to ``timeout`` seconds, then SIGKILL."""
    if process.poll() is not None:
        return
    process.send_signal(sig)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()

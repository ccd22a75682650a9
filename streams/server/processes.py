"""Stopping child processes politely, then firmly."""

from __future__ import annotations

import signal
import subprocess
from typing import Any


def die_with_parent() -> None:
    """In a child, before exec: get SIGTERM if the process that started it dies (Linux; else nothing)."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM)
    except OSError:
        pass


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

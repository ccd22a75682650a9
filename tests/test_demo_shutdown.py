"""Stopping ``runstreams --demo`` as an operator does: Ctrl-C (SIGINT to the terminal's process group) or SIGTERM.

It ends within ``SLUICE_SHUTDOWN_SECONDS`` + 1 s (6 s for the demo's defaults) and leaves no traceback in
its output nor in the files under ``var/``, the Spark pipeline's log included. Each run is the demo as a
user starts it: its own SQLite database, the embedded broker, the Spark pipeline once a batch is done.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import ROOT, free_port
from tests.support.polling import condition_wait

pytestmark = pytest.mark.slow

SHUTDOWN_SECONDS = 5.0  # the setting's default, given to the demo explicitly
DEMO_STOP_LIMIT = 6.0  # what the demo promises on Ctrl-C
SPARK_WAIT = 240.0  # a JVM, a session and a first batch, on a busy machine
FORBIDDEN = ("Traceback", "StackOverflowError", "KeyboardInterrupt")
VAR = ROOT / "var"


def demo_environment(tmp_path: Path, **given: str) -> dict[str, str]:
    """A user's shell: DEBUG=1, no Kafka (the embedded broker), a database of the run's own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLUICE_", "DJANGO_", "SECRET_KEY", "DEBUG"))}
    env.pop("KAFKA_BOOTSTRAP_SERVERS", None)
    env.pop("DATABASE_URL", None)
    env.update(
        {
            "DEBUG": "1",
            "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
            "SLUICE_DEV_ISSUER_KEY_FILE": str(tmp_path / "issuer.pem"),
            "SLUICE_SHUTDOWN_SECONDS": str(SHUTDOWN_SECONDS),
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(given)
    return env


def var_sizes() -> dict[Path, int]:
    return {path: path.stat().st_size for path in VAR.rglob("*") if path.is_file()} if VAR.exists() else {}


def var_written_since(sizes: dict[Path, int]) -> dict[Path, str]:
    """What each file under ``var/`` gained since ``sizes`` were taken (a new file: all of it)."""
    written = {}
    for path in VAR.rglob("*") if VAR.exists() else []:
        if path.is_file():
            with path.open("rb") as handle:
                handle.seek(sizes.get(path, 0))
                written[path] = handle.read().decode("utf-8", "replace")
    return written


@dataclass
class Demo:
    """``manage.py runstreams --demo`` in a session of its own, as a terminal runs it."""

    env: dict[str, str]
    process: subprocess.Popen[str] | None = None
    output: list[str] = field(default_factory=list)

    def start(self) -> Demo:
        self.process = subprocess.Popen(
            [sys.executable, "-u", "manage.py", "runstreams", "--demo", "--port", str(free_port())],
            cwd=ROOT,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        threading.Thread(target=self._pump, daemon=True).start()
        condition_wait(lambda: "listening on" in self.text or self.process.poll() is not None, within=120, what="demo")
        assert "listening on" in self.text, self.text
        return self

    def _pump(self) -> None:
        assert self.process is not None
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.output.append(line)

    @property
    def text(self) -> str:
        return "".join(self.output)

    def stop(self, sig: int, *, group: bool) -> float:
        """Send ``sig`` (to the whole process group: Ctrl-C); seconds until the demo exited."""
        assert self.process is not None
        started = time.monotonic()
        if group:
            os.killpg(self.process.pid, sig)
        else:
            self.process.send_signal(sig)
        try:
            self.process.wait(timeout=60)
        finally:
            if self.process.poll() is None:
                os.killpg(self.process.pid, signal.SIGKILL)
        return time.monotonic() - started


@pytest.fixture
def demo_run(tmp_path: Path) -> Iterator[Demo]:
    demo = Demo(demo_environment(tmp_path))
    yield demo
    if demo.process is not None and demo.process.poll() is None:
        os.killpg(demo.process.pid, signal.SIGKILL)


@pytest.mark.skipif(shutil.which("java") is None, reason="the demo's Spark pipeline needs java")
@pytest.mark.parametrize(("sig", "group"), [(signal.SIGINT, True), (signal.SIGTERM, False)], ids=["ctrl-c", "sigterm"])
def test_the_demo_stops_in_time_with_no_traceback_anywhere(demo_run: Demo, sig: int, group: bool) -> None:
    before = var_sizes()
    demo_run.start()
    log = VAR / "demo-pipeline.log"

    def batch_done() -> bool:
        assert demo_run.process is not None
        assert demo_run.process.poll() is None, demo_run.text
        return bool(re.search(r"^batch \d+: \d+ in", var_written_since(before).get(log, ""), re.MULTILINE))

    condition_wait(batch_done, within=SPARK_WAIT, what="the demo pipeline's first batch", interval=0.5)
    took = demo_run.stop(sig, group=group)
    assert demo_run.process is not None
    assert demo_run.process.returncode == 0, demo_run.text
    assert took <= min(SHUTDOWN_SECONDS + 1, DEMO_STOP_LIMIT), f"stopped in {took:.1f}s\n{demo_run.text}"
    for word in FORBIDDEN:
        assert word not in demo_run.text, demo_run.text
    written = var_written_since(before)
    assert written.get(log), "the pipeline's log got nothing"
    for path, text in written.items():
        for word in FORBIDDEN:
            assert word not in text, f"{word} in {path}:\n{text[-3000:]}"


def test_every_demo_start_says_how_to_set_the_admin_password(tmp_path: Path) -> None:
    from demo.seed import ADMIN_PASSWORD_HINT

    env = demo_environment(tmp_path, SLUICE_DEMO_PIPELINE="0")
    first = Demo(env).start()
    first.stop(signal.SIGINT, group=True)
    second = Demo(env).start()
    second.stop(signal.SIGINT, group=True)
    assert "Demo admin: user 'admin', password '" in first.text
    assert "password '" not in second.text
    for demo in (first, second):
        assert ADMIN_PASSWORD_HINT in demo.text
        assert "python manage.py changepassword admin" in demo.text
        assert "Traceback" not in demo.text

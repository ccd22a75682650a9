"""``manage.py`` as an operator meets it: a missing secret is one clear line and a failing exit."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT


def environment(**given: str) -> dict[str, str]:
    """This process's environment without Sluice's, Django's and the secret's variables, plus ``given``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLUICE_", "DJANGO_", "SECRET_KEY", "DEBUG"))}
    env.pop("KAFKA_BOOTSTRAP_SERVERS", None)
    env.update(given)
    return env


def manage(*args: str, timeout: float = 60, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=environment(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_a_command_without_secret_key_exits_with_one_line_naming_it() -> None:
    done = manage("check")
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("manage.py: ")
    assert "SECRET_KEY" in lines[0]
    assert "Traceback" not in done.stderr


def test_runstreams_help_needs_no_secret_key() -> None:
    done = manage("runstreams", "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: manage.py runstreams")
    assert "--port" in done.stdout


@pytest.mark.parametrize("args", [(), ("--help",), ("help",), ("help", "runstreams")])
def test_help_needs_no_secret_key(args: tuple[str, ...]) -> None:
    done = manage(*args)
    assert done.returncode == 0, done.stderr
    assert "runstreams" in done.stdout
    assert "Traceback" not in done.stderr

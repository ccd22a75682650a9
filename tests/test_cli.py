"""``manage.py`` as an operator meets it: a missing secret and a taken port are one clear line and a failing exit."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator

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


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A loopback port another socket listens on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


@pytest.mark.parametrize("extra", [(), ("--demo",), ("--workers", "2")])
def test_runstreams_on_a_taken_port_exits_non_zero_naming_port_before_starting_anything(
    taken_port: int, extra: tuple[str, ...]
) -> None:
    done = manage("runstreams", "--port", str(taken_port), *extra, timeout=30, DEBUG="1", SLUICE_DEMO_PIPELINE="0")
    assert done.returncode != 0
    assert f"127.0.0.1:{taken_port}" in done.stderr
    assert "--port" in done.stderr
    assert "Traceback" not in done.stderr
    assert "embedded broker" not in done.stdout  # nothing was started before the port was known to be free


def test_a_port_taken_after_the_check_still_fails_the_serve(taken_port: int) -> None:
    """The listen itself failing (the port taken between the check and the listen) raises, not a clean return."""
    code = textwrap.dedent(
        f"""
        import sys
        from streams.conf import streams_settings
        from streams.server.reactor import reactor_install

        reactor_install(streams_settings.EVENT_LOOP)
        import django

        django.setup()
        from streams.server.gateway import ListenError, ServeOptions, gateway_serve

        try:
            gateway_serve(ServeOptions(host="127.0.0.1", port={taken_port}), print)
        except ListenError as exc:
            sys.exit(f"ListenError: {{exc}}")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=environment(DEBUG="1", DJANGO_SETTINGS_MODULE="project.settings", PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"ListenError: cannot listen on 127.0.0.1:{taken_port}" in done.stderr

"""deploy/nginx.conf run as-is by the tests: its two placeholders filled, nginx in the foreground in a temp prefix.

Only ``${SLUICE_LISTEN}`` and ``${SLUICE_UPSTREAM_SERVERS}`` are replaced (what ``envsubst`` does when
given those two names); every other line of the file is the one deployments use.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
from pathlib import Path

import httpx

from streams.server.processes import process_stop
from tests.conftest import ROOT, free_port
from tests.support.polling import condition_wait

NGINX_CONF = ROOT / "deploy" / "nginx.conf"
PLACEHOLDERS = ("SLUICE_LISTEN", "SLUICE_UPSTREAM_SERVERS")
# The server parameters deploy/nginx.conf documents for each gateway.
SERVER_PARAMETERS = "max_fails=1 fail_timeout=5s"


def nginx_binary() -> str | None:
    """Debian's nginx (``nginx-light``), which is in /usr/sbin, off a non-root PATH."""
    return shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")


def nginx_config(listen: str, gateways: list[str]) -> str:
    """deploy/nginx.conf with its placeholders filled: ``listen`` and one server line per ``host:port``."""
    servers = " ".join(f"server {gateway} {SERVER_PARAMETERS};" for gateway in gateways)
    text = NGINX_CONF.read_text()
    for name, value in zip(PLACEHOLDERS, (listen, servers), strict=True):
        assert "${" + name + "}" in text, f"deploy/nginx.conf lost its placeholder {name}"
        text = text.replace("${" + name + "}", value)
    assert "${" not in text, "deploy/nginx.conf has a placeholder the tests do not fill"
    return text


class Nginx:
    """nginx in the foreground with deploy/nginx.conf, its prefix (pid, temp files) under ``directory``."""

    def __init__(self, directory: Path, gateways: list[str]) -> None:
        binary = nginx_binary()
        assert binary is not None, "nginx is not installed (Debian: apt-get install nginx-light)"
        self.binary = binary
        self.directory = directory
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.conf = directory / "nginx.conf"
        self.conf.write_text(nginx_config(f"127.0.0.1:{self.port}", gateways))
        # Workers may run as another user when the tests run as root: let them into the prefix.
        directory.chmod(0o755)
        self.process: subprocess.Popen[str] | None = None
        self.output: list[str] = []

    def command(self, *extra: str) -> list[str]:
        return [
            self.binary,
            "-e",
            "stderr",
            "-p",
            str(self.directory),
            "-c",
            str(self.conf),
            "-g",
            f"pid {self.directory / 'nginx.pid'};",
            *extra,
        ]

    def check(self) -> subprocess.CompletedProcess[str]:
        """``nginx -t``: the configuration parses and every file it names opens."""
        return subprocess.run(self.command("-t"), capture_output=True, text=True, timeout=30, check=False)

    def start(self, timeout: float = 20.0) -> Nginx:
        command = self.command()
        command[-1] += " daemon off;"
        self.process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        threading.Thread(target=self._pump, daemon=True).start()
        condition_wait(self._answers, within=timeout, what=lambda: "nginx to answer:\n" + "".join(self.output))
        return self

    def _pump(self) -> None:
        assert self.process is not None
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.output.append(line)

    def _answers(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError("nginx exited:\n" + "".join(self.output))
        try:
            return httpx.get(f"{self.url}/nginx-healthz", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    def stop(self) -> None:
        if self.process is not None:
            # SIGTERM: nginx's fast stop (SIGQUIT, the graceful one, would wait for the open streams).
            process_stop(self.process, timeout=15)
        self.process = None

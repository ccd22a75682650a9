"""The servers a comparison runs side by side: Sluice (daphne, uvicorn, workers), sse-starlette,
django-eventstream and Nchan, each started, fed and stopped the same way, and their publishers."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from bench.lib.paths import ROOT
from bench.lib.processes import Child, Gateway, free_port, producer_main
from bench.lib.procstats import self_cpu_seconds
from streams.server.processes import process_stop

PEERS_DIR = ROOT / "bench" / "peers"


PEERS_VENV = ROOT / "bench" / ".peers-venv"


# The peers, pinned: the versions the numbers in docs/benchmarks.md were taken with.
PEER_REQUIREMENTS = [
    "Django==5.2.19",
    "channels==4.3.2",
    "daphne==4.2.3",
    "django-eventstream==5.3.4",
    "sse-starlette==3.7.0",
    "uvicorn==0.54.0",
    "uvloop==0.23.0",
]


def peers_venv() -> Path:
    """The peers' virtualenv, created on first use; its python."""
    python = PEERS_VENV / "bin" / "python"
    marker = PEERS_VENV / "requirements.txt"
    wanted = "\n".join(PEER_REQUIREMENTS)
    if python.exists() and marker.exists() and marker.read_text() == wanted:
        return python
    subprocess.run([sys.executable, "-m", "venv", str(PEERS_VENV)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", *PEER_REQUIREMENTS], check=True, timeout=600)
    marker.write_text(wanted)
    return python


def wait_port(port: int, process: subprocess.Popen[bytes], log: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        if process.poll() is not None:
            break
        time.sleep(0.1)
    raise RuntimeError(f"server did not start on {port}:\n" + log.read_text("utf-8", "replace")[-3000:])


class Server:
    """One server under test: started, asked for a stream path, fed by its publisher, stopped."""

    name = ""
    ready_on_headers = True

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        if self.process is not None:
            process_stop(self.process, timeout=15)
        self.process = None

    def pids(self) -> list[int]:
        from bench.lib.procstats import process_tree

        assert self.process is not None
        return process_tree(self.process.pid)

    def path(self, key: str | None) -> str:
        raise NotImplementedError

    def publisher(self, rate: float, count: int, size: int, keys: int) -> Child:
        """A helper process that says "ready", waits for "go", publishes, and reports."""
        raise NotImplementedError

    def broker_connections(self) -> int | None:
        return None

    def _spawn(self, command: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> None:
        log_path = self.tmp / f"{self.name}.log"
        log = open(log_path, "wb")  # noqa: SIM115 - the child keeps writing to it
        self.process = subprocess.Popen(
            command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
        )
        log.close()
        wait_port(self.port, self.process, log_path)


def http_publisher_main(conn: Any, port: int, rate: float, count: int, size: int, keys: int) -> None:
    """Start a Python peer's in-process publisher over HTTP and wait until it says it is done."""
    import http.client

    conn.send("ready")
    if conn.recv() != "go":
        return

    def ask(method: str, path: str) -> dict[str, Any]:
        # A connection per request: a busy server may close an idle keep-alive one between polls.
        for attempt in range(5):
            client = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            try:
                client.request(method, path)
                return dict(json.loads(client.getresponse().read()))
            except (OSError, http.client.HTTPException):
                if attempt == 4:
                    raise
                time.sleep(0.2)
            finally:
                client.close()
        raise AssertionError("unreachable")

    ask("POST", f"/start?rate={rate}&count={count}&size={size}&keys={keys}")
    while True:
        time.sleep(0.1)
        status = ask("GET", "/status")
        if status["done"]:
            break
    conn.send({"seconds": status["seconds"], "failed": 0, "cpu": 0.0, "max_behind": status["max_behind"]})


def nchan_publisher_main(conn: Any, port: int, rate: float, count: int, size: int, keys: int) -> None:
    """POST every message to Nchan's publisher location, pipelined on one keep-alive connection."""
    from bench.lib.processes import payload_make

    sock = socket.create_connection(("127.0.0.1", port))
    answered = [0]

    def drain() -> None:
        with contextlib.suppress(OSError):
            while True:
                data = sock.recv(1 << 16)
                if not data:
                    return
                answered[0] += data.count(b"HTTP/1.1 20")

    threading.Thread(target=drain, daemon=True).start()
    conn.send("ready")
    if conn.recv() != "go":
        return
    cpu0 = self_cpu_seconds()
    start = time.perf_counter()
    behind = 0.0
    for seq in range(count):
        delay = start + seq / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        behind = max(behind, -delay)
        body = payload_make(seq, time.time_ns(), size)
        channel = f"k{seq % keys}" if keys else "all"
        sock.sendall(
            b"POST /pub/%s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n%s"
            % (channel.encode(), len(body), body)
        )
    seconds = time.perf_counter() - start
    deadline = time.monotonic() + 30
    while answered[0] < count and time.monotonic() < deadline:
        time.sleep(0.01)
    conn.send(
        {"seconds": seconds, "failed": count - answered[0], "cpu": self_cpu_seconds() - cpu0, "max_behind": behind}
    )
    sock.close()


class SluiceServer(Server):
    name = "sluice"
    ready_on_headers = False  # the preamble's checkpoint says the stream is live

    def __init__(
        self,
        tmp: Path,
        broker: Any = None,
        workers: int = 1,
        asgi_server: str = "daphne",
        value_format: str = "text",
        producer_linger_ms: float | None = None,
        partitions: int = 3,
        placed: bool = False,
    ) -> None:
        super().__init__(tmp)
        # The topic's partitions, and whether the producer leaves keyless records to librdkafka's
        # partitioner (sticky) rather than writing record n to partition n % partitions.
        self.partitions = partitions
        self.placed = placed
        # None: each start() starts its own embedded broker and stop() stops it, so every run begins
        # on an empty log (the embedded broker's cost per fetch grows with its log; Kafka's does not).
        self.broker = broker
        self.own_broker = broker is None
        # The producer's linger.ms; None: 0 up to 1,000 msg/s, 5 ms above (see publisher).
        self.producer_linger_ms = producer_linger_ms
        # "avro": the topic's values are Avro from a loopback schema registry, sent on as JSON.
        self.value_format = value_format
        self.registry: Any = None
        if value_format != "text":
            self.name = f"sluice-{value_format}"
        self.workers = workers
        self.asgi_server = asgi_server
        if workers > 1:
            self.name = f"sluice-{workers}w"
        if asgi_server != "daphne":
            self.name = f"sluice-{asgi_server}"
        self.topic = f"bench-compare-{uuid.uuid4().hex[:8]}"
        self.gateway: Gateway | None = None

    def start(self) -> None:
        from streams.server.broker import EmbeddedBroker, topic_ensure

        if self.own_broker:
            self.broker = EmbeddedBroker().start()
        topic_ensure(self.broker.bootstrap, self.topic, partitions=self.partitions)
        db = f"sqlite:///{self.tmp}/{self.name}.sqlite3"
        self.gateway = Gateway(db, self.broker.bootstrap, self.tmp / f"{self.name}.log", self.workers, self.asgi_server)
        self.gateway.manage("migrate", "--verbosity", "0")
        formats = ""
        if self.value_format != "text":
            from tests.support.schema_registry import FakeRegistry, RegistryServer

            self.registry = RegistryServer(FakeRegistry())
            self.registry.start()
            formats = (
                "from streams.services import topic_upsert; "
                f"topic_upsert(name={self.topic!r}, value_format={self.value_format!r}, "
                f"registry={self.registry.registry.url!r}); "
            )
        self.gateway.manage(
            "shell",
            "-c",
            formats + "from streams.services import route_upsert; "
            f"route_upsert(path='/bench/fanout', topic={self.topic!r}); "
            f"route_upsert(path='/bench/keyed/{{key}}', topic={self.topic!r}, "
            "filters=[{'key': '${params.key}'}]); " + self.routes_more(),
        )
        self.gateway.start()
        self.port = self.gateway.port
        self.process = self.gateway.process

    def stop(self) -> None:
        if self.gateway is not None:
            self.gateway.stop()
        if self.registry is not None:
            self.registry.stop()
            self.registry = None
        if self.own_broker and self.broker is not None:
            self.broker.stop()
            self.broker = None
        self.process = None

    def routes_more(self) -> str:
        """Python run after the routes above are made, before the gateway starts (a subclass's own routes)."""
        return ""

    def path(self, key: str | None) -> str:
        return "/bench/fanout" if key is None else f"/bench/keyed/{key}"

    def publisher(self, rate: float, count: int, size: int, keys: int) -> Child:
        registry = self.registry.registry.url if self.registry is not None else ""
        # The producer's linger.ms is in every latency measured: 0 up to 1,000 msg/s, as a
        # latency-minded application sets it (librdkafka then sends each record at once; 1 ms
        # adds about 1.3 ms to the p50 on the embedded broker: docs/benchmarks.md); 5 ms above, as
        # a throughput-minded one does (at the peak rates, small batches cost the embedded broker
        # more CPU than the machine has beside the gateway).
        linger_ms = self.producer_linger_ms
        if linger_ms is None:
            linger_ms = 0.0 if rate <= 1000 else 5.0
        return Child(
            producer_main,
            *(self.broker.bootstrap, self.topic, self.partitions, rate, count, size, linger_ms, keys, registry),
            *(False, False, self.placed),
        )

    def broker_connections(self) -> int:
        """TCP connections from the gateway's processes to the broker's port."""
        port = int(self.broker.bootstrap.rsplit(":", 1)[1])
        inodes: set[str] = set()
        for pid in self.pids():
            with contextlib.suppress(OSError):
                for fd in os.listdir(f"/proc/{pid}/fd"):
                    with contextlib.suppress(OSError):
                        target = os.readlink(f"/proc/{pid}/fd/{fd}")
                        if target.startswith("socket:["):
                            inodes.add(target[8:-1])
        count = 0
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            with contextlib.suppress(OSError), open(table) as handle:
                next(handle)
                for line in handle:
                    parts = line.split()
                    remote_port = int(parts[2].rsplit(":", 1)[1], 16)
                    if remote_port == port and parts[3] == "01" and parts[9] in inodes:
                        count += 1
        return count


class StarletteServer(Server):
    name = "sse-starlette"

    def start(self) -> None:
        python = peers_venv()
        self.port = free_port()
        self._spawn(
            [
                str(python),
                "-m",
                "uvicorn",
                "--app-dir",
                str(PEERS_DIR),
                "starlette_app:app",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--loop",
                "uvloop",
                "--http",
                "h11",
                "--log-level",
                "warning",
                "--no-access-log",
                "--timeout-keep-alive",
                "300",
                "--backlog",
                "4096",
            ]
        )

    def path(self, key: str | None) -> str:
        return f"/events/{key or 'all'}"

    def publisher(self, rate: float, count: int, size: int, keys: int) -> Child:
        return Child(http_publisher_main, self.port, rate, count, size, keys)


class EventstreamServer(Server):
    name = "django-eventstream"

    def start(self) -> None:
        python = peers_venv()
        self.port = free_port()
        env = dict(os.environ)
        env.pop("DJANGO_SETTINGS_MODULE", None)
        env["PYTHONPATH"] = str(PEERS_DIR)
        self._spawn(
            [
                str(python),
                "-m",
                "daphne",
                "-b",
                "127.0.0.1",
                "-p",
                str(self.port),
                "--verbosity",
                "0",
                "--application-close-timeout",
                "5",
                "eventstream_app:application",
            ],
            env=env,
            cwd=PEERS_DIR,
        )

    def path(self, key: str | None) -> str:
        return f"/events/{key or 'all'}"

    def publisher(self, rate: float, count: int, size: int, keys: int) -> Child:
        return Child(http_publisher_main, self.port, rate, count, size, keys)


NGINX_CONF = """
load_module /usr/lib/nginx/modules/ngx_nchan_module.so;
daemon off;
master_process on;
worker_processes 1;
worker_rlimit_nofile 65536;
pid {tmp}/nginx.pid;
error_log {tmp}/nginx-error.log warn;
events {{ worker_connections 30000; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    nchan_shared_memory_size 256M;
    keepalive_requests 100000000;
    keepalive_timeout 300s;
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        location ~ /sub/(\\w+)$ {{
            nchan_subscriber eventsource;
            nchan_channel_id $1;
            nchan_subscriber_first_message newest;
            nchan_message_buffer_length 100;
        }}
        location ~ /pub/(\\w+)$ {{
            nchan_publisher;
            nchan_channel_id $1;
            nchan_message_buffer_length 100;
            nchan_message_timeout 60s;
        }}
    }}
}}
"""


class NchanServer(Server):
    name = "nchan"

    def start(self) -> None:
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        if not Path(nginx).exists() or not Path("/usr/lib/nginx/modules/ngx_nchan_module.so").exists():
            raise RuntimeError("nginx with Nchan is not installed: apt-get install nginx-light libnginx-mod-nchan")
        self.port = free_port()
        conf = self.tmp / "nginx.conf"
        conf.write_text(NGINX_CONF.format(tmp=self.tmp, port=self.port))
        self._spawn([nginx, "-c", str(conf), "-p", str(self.tmp)])

    def path(self, key: str | None) -> str:
        return f"/sub/{key or 'all'}"

    def publisher(self, rate: float, count: int, size: int, keys: int) -> Child:
        return Child(nchan_publisher_main, self.port, rate, count, size, keys)

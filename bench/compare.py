"""Sluice against its peers, side by side: the same load client and scenarios against every server.

Starts every server it measures and stops it again, all on 127.0.0.1:

- **sluice**: ``manage.py runstreams`` (daphne) fed by Kafka (the embedded tansu broker) through a
  producer process, as in ``bench/fanout.py``; ``sluice-2w`` is ``runstreams --workers 2``;
  ``sluice-uvicorn`` is the same ASGI application under uvicorn (uvloop, httptools), one process.
- **sse-starlette**: sse-starlette on uvicorn (``bench/peers/starlette_app.py``), an asyncio.Queue
  per client and an in-process publisher.
- **django-eventstream**: django-eventstream on Django + Channels + daphne
  (``bench/peers/eventstream_app.py``), ``send_event`` called by an in-process publisher.
- **nchan**: Debian's nginx with libnginx-mod-nchan, one worker process; a publisher process POSTs
  each message to Nchan's publisher location (pipelined on one keep-alive connection).

Only Sluice reads Kafka, so only its latency includes a broker. The Python peers run from their
own virtualenv (``bench/.peers-venv``, created on first use with pinned versions); nginx and the
Nchan module come from Debian (``apt-get install nginx-light libnginx-mod-nchan``).

Scenarios (every client is the uvloop client of ``bench/fanout.py``):

- ``fanout``: 1,000 clients on one channel at 100 msg/s;
- ``peak``: 100 clients on one channel, the rate doubled from ``--peak-start`` until a step loses
  an event, disconnects a client or has p99 over 1 s; the best passing step is reported;
- ``idle``: 10,000 idle connections, server memory per connection (and Sluice's broker connections
  with 10 and with 10,000 clients);
- ``keyed``: 1,000 clients each with its own key (Sluice: a key filter from a path parameter;
  the peers: a channel per client), messages keyed round-robin;
- ``volume``: the keyed scenario's delivered volume without filters (``keyed-rate / 100`` clients
  on one channel at 100 msg/s), to compare the cost per delivery.

    python bench/compare.py --output docs/benchmarks.md
    python bench/compare.py --servers sluice,sse-starlette --scenarios fanout --duration 5   # a smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.fanout import (  # noqa: E402
    Child,
    Gateway,
    SseClient,
    Stats,
    fd_limit_raise,
    free_port,
    loadavg,
    machine_description,
    percentile,
    producer_main,
    self_cpu_seconds,
    system_busy_seconds,
    tree_cpu_seconds,
    tree_rss_bytes,
)
from streams.server.processes import process_stop  # noqa: E402

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
SECTION_BEGIN = "<!-- bench/compare.py{} results: begin -->"
SECTION_END = "<!-- bench/compare.py{} results: end -->"
SERVERS = ("sluice", "sluice-2w", "sluice-uvicorn", "sse-starlette", "django-eventstream", "nchan")
SCENARIOS = ("fanout", "peak", "idle", "keyed", "volume")


# -- servers -------------------------------------------------------------------------


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
        from bench.fanout import process_tree

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
    from bench.fanout import payload_make

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

    def __init__(self, tmp: Path, broker: Any, workers: int = 1, asgi_server: str = "daphne") -> None:
        super().__init__(tmp)
        self.broker = broker
        self.workers = workers
        self.asgi_server = asgi_server
        if workers > 1:
            self.name = f"sluice-{workers}w"
        if asgi_server != "daphne":
            self.name = f"sluice-{asgi_server}"
        self.topic = f"bench-compare-{uuid.uuid4().hex[:8]}"
        self.gateway: Gateway | None = None

    def start(self) -> None:
        from streams.server.broker import topic_ensure

        topic_ensure(self.broker.bootstrap, self.topic, partitions=3)
        db = f"sqlite:///{self.tmp}/{self.name}.sqlite3"
        self.gateway = Gateway(db, self.broker.bootstrap, self.tmp / f"{self.name}.log", self.workers, self.asgi_server)
        self.gateway.manage("migrate", "--verbosity", "0")
        self.gateway.manage(
            "shell",
            "-c",
            "from streams.services import route_upsert; "
            f"route_upsert(path='/bench/fanout', topic={self.topic!r}); "
            f"route_upsert(path='/bench/keyed/{{key}}', topic={self.topic!r}, "
            "filters=[{'key': '${params.key}'}])",
        )
        self.gateway.start()
        self.port = self.gateway.port
        self.process = self.gateway.process

    def stop(self) -> None:
        if self.gateway is not None:
            self.gateway.stop()
        self.process = None

    def path(self, key: str | None) -> str:
        return "/bench/fanout" if key is None else f"/bench/keyed/{key}"

    def publisher(self, rate: float, count: int, size: int, keys: int) -> Child:
        return Child(producer_main, self.broker.bootstrap, self.topic, 3, rate, count, size, 5.0, keys)

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


# -- one run ---------------------------------------------------------------------------


@dataclass
class Row:
    server: str
    scenario: str
    clients: int
    rate: float = 0.0
    keys: int = 0
    deliveries_per_s: float = 0.0
    expected_per_s: float = 0.0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    max_ms: float = 0.0
    lost: int = 0
    duplicates: int = 0
    disconnects: int = 0
    server_cpu: float = 0.0
    client_cpu: float = 0.0
    publisher_cpu: float = 0.0
    other_cpu: float = 0.0
    us_per_delivery: float = 0.0
    server_rss: int = 0
    rss_per_connection: float = 0.0
    opened: int = 0
    broker_connections: str = ""
    behind: float = 0.0
    note: str = ""
    steps: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return (
            self.opened == self.clients
            and self.lost == 0
            and self.disconnects == 0
            and self.p99_ms < 1000
            and self.behind < 0.5
        )


async def clients_open(
    server: Server, count: int, stats: Stats, expected: int, keys: int, first: int = 0, concurrency: int = 50
) -> list[SseClient]:
    loop = asyncio.get_running_loop()
    gate = asyncio.Semaphore(concurrency)
    opened: list[SseClient] = []

    async def one(index: int) -> None:
        key = f"k{index}" if keys else None
        request = (
            f"GET {server.path(key)} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nAccept: text/event-stream\r\n"
            "Cache-Control: no-cache\r\n\r\n"
        ).encode()
        async with gate:
            try:
                _, client = await loop.create_connection(
                    lambda: SseClient(request, stats, expected, server.ready_on_headers), "127.0.0.1", server.port
                )
                if keys:
                    client.want = len(range(index, expected, keys))
                await asyncio.wait_for(client.ready, timeout=30)
                opened.append(client)
            except (OSError, TimeoutError, ConnectionError) as exc:
                stats.disconnects += 0
                print(f"    stream {index} failed to open: {exc!r}", flush=True)

    await asyncio.gather(*(one(first + i) for i in range(count)))
    return opened


async def run_load(
    server: Server, scenario: str, clients: int, rate: float, duration: float, keys: int, drain: float
) -> Row:
    """Open ``clients`` streams, publish ``rate`` msg/s for ``duration`` s, wait for stragglers, measure."""
    row = Row(server.name, scenario, clients, rate, keys)
    count = max(1, round(rate * duration))
    stats = Stats()
    stats.seq_per_second = max(1, round(rate))
    stats.per_second = [[0, 0, 0] for _ in range(count // stats.seq_per_second + 1)]
    publisher = server.publisher(rate, count, 200, keys)
    opened: list[SseClient] = []
    try:
        await publisher.receive(60, "publisher start")
        opened += await clients_open(server, 1, stats, count, keys)
        await asyncio.sleep(0.5)
        rss_base = tree_rss_bytes(server.pids())
        opened += await asyncio.wait_for(clients_open(server, clients - 1, stats, count, keys, first=1), 300)
        row.opened = len(opened)
        await asyncio.sleep(2.0)
        pids = server.pids()
        row.server_rss = tree_rss_bytes(pids)
        row.rss_per_connection = (row.server_rss - rss_base) / max(1, len(opened) - 1)
        stats.measuring = True
        wall0 = time.monotonic()
        cpu0 = (tree_cpu_seconds(pids), self_cpu_seconds(), system_busy_seconds())
        go_ns = time.time_ns()
        publisher.conn.send("go")
        report = await publisher.receive(duration * 3 + 60, "publisher")
        pending = [c.done for c in opened if not c.done.done()]
        if pending:
            await asyncio.wait(pending, timeout=drain)
        wall = time.monotonic() - wall0
        cpu1 = (tree_cpu_seconds(pids), self_cpu_seconds(), system_busy_seconds())
        stats.measuring = False
        row.behind = report["max_behind"]
        row.server_cpu = 100 * (cpu1[0] - cpu0[0]) / wall
        row.client_cpu = 100 * (cpu1[1] - cpu0[1]) / wall
        row.publisher_cpu = 100 * report["cpu"] / wall
        busy = 100 * (cpu1[2] - cpu0[2]) / wall
        row.other_cpu = max(0.0, busy - row.server_cpu - row.client_cpu - row.publisher_cpu)
        span = (stats.last_ns - go_ns) / 1e9 if stats.last_ns else 0.0
        row.deliveries_per_s = stats.events / span if span > 0 else 0.0
        wanted = sum(c.want for c in opened) + (clients - len(opened)) * (count // max(1, keys or 1))
        row.expected_per_s = wanted / max(duration, 1e-9)
        row.us_per_delivery = (cpu1[0] - cpu0[0]) / stats.events * 1e6 if stats.events else 0.0
        total = sum(stats.hist)
        row.p50_ms = percentile(stats.hist, total, 0.50) if total else 0.0
        row.p99_ms = percentile(stats.hist, total, 0.99) if total else 0.0
        row.max_ms = stats.max_ns / 1e6
        row.lost = max(0, wanted - sum(c.unique for c in opened))
        row.duplicates = sum(c.duplicates for c in opened)
        row.disconnects = stats.disconnects
        return row
    finally:
        for client in opened:
            client.close()
        publisher.stop()


async def run_idle(server: Server, clients: int) -> Row:
    """``clients`` idle streams: server memory per connection (and Sluice's broker connections)."""
    row = Row(server.name, "idle", clients)
    stats = Stats()
    opened: list[SseClient] = []
    try:
        opened += await clients_open(server, 10, stats, 1, 0)
        await asyncio.sleep(1.0)
        rss_base = tree_rss_bytes(server.pids())
        with_ten = server.broker_connections()
        started = time.monotonic()
        rest = clients_open(server, clients - 10, stats, 1, 0, first=10, concurrency=100)
        opened += await asyncio.wait_for(rest, 600)
        row.opened = len(opened)
        await asyncio.sleep(3.0)
        row.server_rss = tree_rss_bytes(server.pids())
        row.rss_per_connection = (row.server_rss - rss_base) / max(1, len(opened) - 10)
        with_all = server.broker_connections()
        if with_ten is not None:
            row.broker_connections = f"{with_ten} -> {with_all}"
        row.note = f"opened in {time.monotonic() - started:.0f} s"
        return row
    finally:
        for client in opened:
            client.close()


async def run_server(server: Server, args: argparse.Namespace) -> list[Row]:
    rows: list[Row] = []
    print(f"== {server.name}", flush=True)
    server.start()
    try:
        for scenario in args.scenarios:
            if scenario == "fanout":
                row = await run_load(server, "fanout", args.fanout_clients, 100.0, args.duration, 0, args.drain)
            elif scenario == "keyed":
                row = await run_load(
                    server, "keyed", args.keyed_clients, args.keyed_rate, args.duration, args.keyed_clients, args.drain
                )
            elif scenario == "volume":
                clients = max(1, round(args.keyed_rate / 100))
                row = await run_load(server, "volume", clients, 100.0, args.duration, 0, args.drain)
            elif scenario == "idle":
                if server.name == "sluice-2w":  # the same memory per stream as one worker
                    continue
                row = await run_idle(server, args.idle_clients)
            else:
                row = await peak_search(server, args)
            print("  " + row_line(row), flush=True)
            rows.append(row)
            await asyncio.sleep(1.0)
    finally:
        server.stop()
    return rows


async def peak_search(server: Server, args: argparse.Namespace) -> Row:
    """Double the rate until a step fails; the best passing step, with every step listed."""
    best: Row | None = None
    steps: list[str] = []

    async def step(rate: float) -> Row:
        row = await run_load(server, "peak", args.peak_clients, rate, args.peak_duration, 0, args.drain)
        verdict = "ok" if row.passed else "fail"
        steps.append(f"{rate:g}: {row.deliveries_per_s:,.0f}/s p99 {row.p99_ms:.0f} ms lost {row.lost:,} {verdict}")
        print(f"    peak step {steps[-1]} (server {row.server_cpu:.0f} %)", flush=True)
        await asyncio.sleep(1.0)
        return row

    # The Python peers start lower: at 125 msg/s to 100 clients neither passed a step on a shared 2-core box.
    rate = args.peak_start if server.name.startswith(("sluice", "nchan")) else args.peak_start / 32
    failed: Row | None = None
    while rate <= args.peak_max:
        row = await step(rate)
        if not row.passed:
            failed = row
            break
        best = row
        rate *= 2
    if best is not None and failed is not None:
        between = await step(best.rate * 1.5)  # one step between the last pass and the first failure
        if between.passed:
            best = between
    best = best or failed
    assert best is not None
    best.steps = steps
    return best


# -- report ----------------------------------------------------------------------------


def mib(value: float) -> str:
    return f"{value / 2**20:.1f} MiB"


def row_line(r: Row) -> str:
    if r.scenario == "idle":
        return (
            f"{r.server} idle {r.opened}/{r.clients}: RSS {mib(r.server_rss)}, "
            f"{r.rss_per_connection / 1024:.1f} KiB/conn, broker {r.broker_connections or 'n/a'} ({r.note})"
        )
    return (
        f"{r.server} {r.scenario} {r.opened}/{r.clients} x {r.rate:g}: {r.deliveries_per_s:,.0f}/s "
        f"p50 {r.p50_ms:.1f} p99 {r.p99_ms:.1f} max {r.max_ms:.1f} ms lost {r.lost} cut {r.disconnects} "
        f"server {r.server_cpu:.0f} % ({r.us_per_delivery:.2f} us/delivery) client {r.client_cpu:.0f} % "
        f"other {r.other_cpu:.0f} %"
    )


def load_table(rows: list[Row], scenario: str) -> str:
    lines = [
        "| server | clients | rate (msg/s) | deliveries/s | p50 | p99 | max | lost | cut | server CPU | "
        "µs / delivery | client CPU | publisher CPU | other CPU | server RSS | RSS / connection |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        if r.scenario != scenario:
            continue
        lines.append(
            f"| {r.server} | {r.opened}/{r.clients} | {r.rate:g} | {r.deliveries_per_s:,.0f} | {r.p50_ms:.1f} ms | "
            f"{r.p99_ms:.1f} ms | {r.max_ms:.1f} ms | {r.lost:,} | {r.disconnects} | {r.server_cpu:.0f} % | "
            f"{r.us_per_delivery:.2f} | {r.client_cpu:.0f} % | {r.publisher_cpu:.0f} % | {r.other_cpu:.0f} % | "
            f"{mib(r.server_rss)} | {per_connection(r)} |"
        )
    return "\n".join(lines)


def per_connection(r: Row) -> str:
    """RSS per connection; n/a when the process gave memory back while the streams opened (after idle)."""
    return f"{r.rss_per_connection / 1024:.1f} KiB" if r.rss_per_connection >= 0 else "n/a"


def idle_table(rows: list[Row]) -> str:
    lines = [
        "| server | connections held | server RSS | RSS / connection | broker connections (10 -> all) | note |",
        "|---|---:|---:|---:|---|---|",
    ]
    for r in rows:
        if r.scenario == "idle":
            lines.append(
                f"| {r.server} | {r.opened:,}/{r.clients:,} | {mib(r.server_rss)} | "
                f"{per_connection(r)} | {r.broker_connections or 'n/a'} | {r.note} |"
            )
    return "\n".join(lines)


def section(rows: list[Row], args: argparse.Namespace, command: str, started: datetime, commit: str, load: str) -> str:
    parts = [
        SECTION_BEGIN.format(args.section),
        f"Run {started:%Y-%m-%d %H:%M} UTC at commit `{commit}` on {machine_description()}; "
        f"load average before -> after: {load}. CPU is % of ONE core (the machine has {os.cpu_count()} x 100 %); "
        "µs / delivery = server CPU time / events received by the clients; other CPU = the machine's busy "
        "time minus server, client and publisher (others' work, and for Sluice the broker and producer).",
        "",
        "```",
        command,
        "```",
    ]
    titles = {
        "fanout": f"### {args.fanout_clients:,} clients, one channel, 100 msg/s, {args.duration:g} s",
        "peak": f"### {args.peak_clients} clients, highest rate with nothing lost and p99 under 1 s "
        f"({args.peak_duration:g} s steps, rate doubled from {args.peak_start:g})",
        "keyed": f"### {args.keyed_clients:,} clients, each its own key, {args.keyed_rate:g} msg/s keyed round-robin, "
        f"{args.duration:g} s",
        "volume": f"### The same delivered volume without filters: {max(1, round(args.keyed_rate / 100))} clients "
        f"on one channel at 100 msg/s, {args.duration:g} s",
    }
    for scenario in args.scenarios:
        if scenario == "idle":
            parts += ["", f"### {args.idle_clients:,} idle connections", "", idle_table(rows)]
            continue
        parts += ["", titles[scenario], "", load_table(rows, scenario)]
        if scenario == "peak":
            parts += [""] + [f"- {r.server}: " + "; ".join(r.steps) for r in rows if r.scenario == "peak"]
    parts.append(SECTION_END.format(args.section))
    return "\n".join(parts)


def output_write(path: Path, text: str, name: str = "") -> None:
    """Replace the section marked for ``name`` in ``path`` (or append one)."""
    old = path.read_text() if path.exists() else "# Benchmarks\n"
    marks = SECTION_BEGIN.format(name), SECTION_END.format(name)
    begin, end = old.find(marks[0]), old.find(marks[1])
    if begin >= 0 and end > begin:
        new = old[:begin] + text + old[end + len(marks[1]) :]
    else:
        new = old.rstrip("\n") + "\n\n" + text + "\n"
    path.write_text(new)


# -- main --------------------------------------------------------------------------------


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--servers", default=",".join(SERVERS), help=f"Comma list of {', '.join(SERVERS)}.")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help=f"Comma list of {', '.join(SCENARIOS)}.")
    parser.add_argument("--duration", type=float, default=10.0, help="Seconds of publishing (fanout, keyed).")
    parser.add_argument("--drain", type=float, default=10.0, help="Seconds to wait for stragglers.")
    parser.add_argument("--fanout-clients", type=int, default=1000)
    parser.add_argument("--peak-clients", type=int, default=100)
    parser.add_argument(
        "--peak-start",
        type=float,
        default=1000.0,
        help="First rate of the peak search for Sluice and Nchan (msg/s); the Python peers start at 1/32 of it.",
    )
    parser.add_argument("--peak-max", type=float, default=64000.0)
    parser.add_argument("--peak-duration", type=float, default=5.0)
    parser.add_argument("--idle-clients", type=int, default=10000)
    parser.add_argument("--keyed-clients", type=int, default=1000)
    parser.add_argument("--keyed-rate", type=float, default=5000.0)
    parser.add_argument("--output", type=Path, help="Markdown file whose compare section is replaced (or appended).")
    parser.add_argument(
        "--section", default="", help="Name the output section (runs of different scenarios kept side by side)."
    )
    parser.add_argument("--json", type=Path, help="Also write every row as JSON (tests/bench/test_regression.py).")
    args = parser.parse_args(argv)
    args.section = f" {args.section}" if args.section else ""
    args.servers = [s for s in args.servers.split(",") if s]
    args.scenarios = [s for s in args.scenarios.split(",") if s]
    for name in args.servers:
        if name not in SERVERS:
            parser.error(f"unknown server {name}")
    for name in args.scenarios:
        if name not in SCENARIOS:
            parser.error(f"unknown scenario {name}")
    return args


async def main_async(args: argparse.Namespace) -> list[Row]:
    from streams.server.broker import EmbeddedBroker

    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="sluice-compare-") as tmp_name:
        tmp = Path(tmp_name)
        broker = None
        if any(name.startswith("sluice") for name in args.servers):
            broker = EmbeddedBroker().start()
        try:
            for name in args.servers:
                workdir = tmp / name
                workdir.mkdir()
                server: Server
                if name == "sluice":
                    server = SluiceServer(workdir, broker)
                elif name == "sluice-2w":
                    server = SluiceServer(workdir, broker, workers=2)
                elif name == "sluice-uvicorn":
                    server = SluiceServer(workdir, broker, asgi_server="uvicorn")
                elif name == "sse-starlette":
                    server = StarletteServer(workdir)
                elif name == "django-eventstream":
                    server = EventstreamServer(workdir)
                else:
                    server = NchanServer(workdir)
                try:
                    rows += await run_server(server, args)
                except Exception as exc:  # one server failing to start must not lose the others' rows
                    print(f"  {name} failed: {exc!r}", flush=True)
        finally:
            if broker is not None:
                broker.stop()
    return rows


def main(argv: list[str] | None = None) -> list[Row]:
    import uvloop

    args = arguments(argv)
    wanted = max(args.idle_clients, args.fanout_clients, args.keyed_clients) + 1024
    with contextlib.suppress(ValueError, OSError):  # root may raise the hard limit too (servers inherit it)
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard != resource.RLIM_INFINITY and hard < 2 * wanted:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, 2 * wanted))
    fd_limit_raise(wanted)
    command = shlex.join(["python", "bench/compare.py", *(sys.argv[1:] if argv is None else argv)])
    started = datetime.now(UTC)
    before = loadavg()
    print(f"{machine_description()}; load average {before}", flush=True)
    rows = uvloop.run(main_async(args))
    load = f"{before} -> {loadavg()}"
    text = section(rows, args, command, started, git_commit(), load)
    print()
    print(text)
    if args.output:
        output_write(args.output, text, args.section)
        print(f"\nwrote {args.output}")
    if args.json:
        args.json.write_text(json.dumps([asdict(row) for row in rows], indent=1))
    return rows


def git_commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


if __name__ == "__main__":
    main()

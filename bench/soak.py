"""Soak: a long run with streams coming and going, guarded streams re-authorized, routes reconfigured.

Starts the embedded broker, a gateway (``manage.py runstreams``) on a temporary
SQLite database and a producer process writing ``--rate`` messages a second over
``--topics`` topics, each with ``--keys`` keys (a key stays on one partition).
Every (topic, key) has a route with that key filter, and a guarded twin behind a
JWT guard; ``--streams`` clients each hold one stream, ``--guarded`` of them on
the guarded routes, with tokens that live ``--token-seconds`` and are renewed
by answering the challenge (a ``POST`` of a fresh token to the stream's URL).

Every second ``--churn`` streams close: as many open, a third of them fresh
clients, a third resuming (``Last-Event-ID``) a stream closed a moment ago (from
the topic's cache), a third one closed a while ago (from Kafka). Every
``--reconfigure-seconds`` a route's heartbeat and description change through the
admin API, so the gateway rebuilds its route table and holds every open stream
against it. A stream that ends unasked comes back with its last id, as an
``EventSource`` does.

Every message carries its (topic, key) sequence number and its production time:
each client checks that its sequence has no gap and no repeat across all its
sessions (the ledger), and records the delivery latency. RSS, descriptors,
threads, hubs and asyncio tasks come from the gateway's ``/metrics`` every
``--sample-seconds``. The run passes with nothing lost, nothing repeated, no
traceback, and RSS, descriptors, threads and hubs flat within ``--tolerance``
after ``--warmup-minutes``: the mean of the last third of the samples after the
warm-up against the mean of the first third.

    python bench/soak.py --minutes 30 --streams 2000 --churn 100 --rate 1000 \\
        --output-md soak.md --output-svg docs/images/soak.svg
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import re
import sys
import tempfile
import time
import uuid
from collections import deque
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.lib.processes import Gateway  # noqa: E402
from bench.lib.procstats import fd_limit_raise, loadavg, machine_description  # noqa: E402
from bench.lib.soakplot import soak_svg  # noqa: E402

PARTITIONS = 3
# A stream resumed "after a while" was closed this many seconds before (at random in between): with a
# topic's cache holding --cache-seconds of its records, the longest absences are read from Kafka.
OLD_AWAY = (5.0, 35.0)
ISSUER, AUDIENCE = "https://soak.issuer", "sluice-soak"
SECRET = "a-soak-secret-that-is-at-least-32-bytes-long"
STAFF, STAFF_PASSWORD = "soak-staff", "soak-staff-password"
SEQ_FIND = re.compile(rb'"s":(\d+),"ts":(\d+)').search
FLAT = ("rss", "fds", "threads", "hubs")
METRICS = {
    "rss": "sluice_rss_bytes",
    "fds": "sluice_open_fds",
    "threads": "sluice_threads",
    "hubs": "sluice_kafka_consumers",
    "tasks": "sluice_asyncio_tasks",
    "streams": "sluice_streams_open",
    "catch_ups_cache": "sluice_catch_ups_cache_total",
    "catch_ups_kafka": "sluice_catch_ups_kafka_total",
    "cut": "sluice_slow_clients_cut_total",
    "subscribers": "sluice_subscribers",
}


def route_path(topic: int, key: int, guarded: bool) -> str:
    return f"/soak/{'g' if guarded else 'p'}/t{topic}/k{key}"


def producer_main(
    bootstrap: str, topics: list[str], keys: int, rate: float, linger_ms: float, stop: Any, produced: Any
) -> None:
    """Message n goes to topic ``n % T`` with key ``(n // T) % K`` (on partition ``key % 3``), carrying the
    sequence number of its (topic, key) and its production time; ``produced`` ends as the count delivered."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": linger_ms, "log_level": 0})
    seqs = [[0] * keys for _ in topics]
    n = 0
    start = time.monotonic()
    while not stop.is_set():
        t, k = n % len(topics), (n // len(topics)) % keys
        value = b'{"s":%d,"ts":%d}' % (seqs[t][k], time.time_ns())
        while True:
            try:
                producer.produce(topics[t], value, key=b"k%d" % k, partition=k % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.01)
        seqs[t][k] += 1
        n += 1
        producer.poll(0)
        delay = start + n / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    if producer.flush(60) != 0:
        n = -1
    produced.value = n


def expected_count(produced: int, topics: int, keys: int, topic: int, key: int) -> int:
    """How many messages of ``produced`` went to (topic, key)."""
    slot = key * topics + topic
    cycle = topics * keys
    return produced // cycle + (1 if produced % cycle > slot else 0)


class Totals:
    """What every client adds to: the ledger, sessions, challenges, latencies of the current interval."""

    def __init__(self) -> None:
        self.events = self.lost = self.duplicated = 0
        self.sessions = self.unasked_ends = self.refused = 0
        self.statuses: dict[int, int] = {}
        self.challenges = self.answered = self.answer_failed = self.answers_resent = 0
        self.fresh = self.resumes_recent = self.resumes_old = 0
        self.latencies: list[float] = []  # of events delivered live, since the last sample
        self.replayed = 0  # events produced before the session that delivered them began (catch-ups)


class Client:
    """One browser: a logical stream over as many sessions (connections) as it takes."""

    def __init__(self, soak: Soak, number: int, topic: int, key: int, guarded: bool) -> None:
        self.soak, self.number, self.topic, self.key, self.guarded = soak, number, topic, key, guarded
        self.path = route_path(topic, key, guarded)
        self.last_id: str | None = None
        self.last_seq = -1
        self.open = False  # meant to be open (not parked)
        self.left_at = 0.0
        self.task: asyncio.Task[None] | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.session_began = 0  # ns; an event produced before it is a catch-up's, not a live delivery

    def token(self) -> str:
        import jwt

        now = int(time.time())
        claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": f"c{self.number}", "iat": now}
        claims |= {"exp": now + self.soak.args.token_seconds, "scope": "read:items"}
        return jwt.encode(claims, SECRET, algorithm="HS256")

    def start(self) -> None:
        self.open = True
        self.task = asyncio.ensure_future(self.run())

    def leave(self) -> None:
        self.open = False
        self.left_at = time.monotonic()
        if self.writer is not None:
            self.writer.close()
        if self.task is not None:
            self.task.cancel()

    async def run(self) -> None:
        totals = self.soak.totals
        while self.open:
            ended_by_server = False
            try:
                ended_by_server = await self.session()
            except (OSError, asyncio.IncompleteReadError, ValueError, asyncio.LimitOverrunError):
                ended_by_server = True
            finally:
                if self.writer is not None:
                    self.writer.close()
                    self.writer = None
            if self.open and ended_by_server:
                totals.unasked_ends += 1
            await asyncio.sleep(0.25 + random.random() * 0.5)

    async def session(self) -> bool:
        totals = self.soak.totals
        reader, self.writer = await asyncio.open_connection("127.0.0.1", self.soak.port, limit=1 << 20)
        head = f"GET {self.path} HTTP/1.1\r\nhost: 127.0.0.1\r\naccept: text/event-stream\r\n"
        if self.last_id is not None:
            head += f"last-event-id: {self.last_id}\r\n"
        if self.guarded:
            head += f"authorization: Bearer {self.token()}\r\n"
        self.writer.write((head + "\r\n").encode())
        status = int((await reader.readuntil(b"\r\n\r\n")).split(b" ", 2)[1])
        totals.statuses[status] = totals.statuses.get(status, 0) + 1
        if status != 200:
            totals.refused += 1
            await asyncio.sleep(1.0)
            return False
        totals.sessions += 1
        self.session_began = time.time_ns()
        buffer = b""
        while True:
            size = int((await reader.readuntil(b"\r\n"))[:-2], 16)
            if size == 0:
                return True
            buffer += (await reader.readexactly(size + 2))[:-2]
            *frames, buffer = buffer.split(b"\n\n")
            for frame in frames:
                self.frame(frame)

    def frame(self, frame: bytes) -> None:
        totals = self.soak.totals
        if b"event: challenge" in frame:
            totals.challenges += 1
            self.soak.background(self.answer())
            return
        found = SEQ_FIND(frame)
        if found is None:
            return
        for line in frame.split(b"\n"):
            if line.startswith(b"id: "):
                self.last_id = line[4:].decode()
        seq, produced_ns = int(found.group(1)), int(found.group(2))
        if produced_ns >= self.session_began:
            totals.latencies.append(time.time() - produced_ns / 1e9)
        else:
            totals.replayed += 1
        totals.events += 1
        if self.last_seq >= 0:
            if seq > self.last_seq + 1:
                totals.lost += seq - self.last_seq - 1
            elif seq <= self.last_seq:
                totals.duplicated += 1
                return
        self.last_seq = seq

    async def answer(self) -> None:
        """The challenge's answer: ``POST`` a fresh token to the stream's URL; sent again after a 503's
        ``retry-after`` (1 s), as ``sluice.js`` does, up to 3 times."""
        totals = self.soak.totals
        for attempt in range(3):
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", self.soak.port)
                writer.write(
                    f"POST {self.path} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {self.token()}\r\n"
                    "content-type: application/x-challenge-response\r\ncontent-length: 0\r\n"
                    "connection: close\r\n\r\n".encode()
                )
                status = int((await reader.readuntil(b"\r\n")).split(b" ", 2)[1])
                writer.close()
            except (OSError, asyncio.IncompleteReadError, ValueError):
                status = 0
            if status != 503:
                break
            totals.answers_resent += attempt < 2
            await asyncio.sleep(1.0)
        if status == 204:
            totals.answered += 1
        else:
            totals.answer_failed += 1


class Soak:
    def __init__(self, args: argparse.Namespace, port: int, route_ids: list[int]) -> None:
        self.args, self.port, self.route_ids = args, port, route_ids
        self.rng = random.Random(args.seed)
        self.totals = Totals()
        self.clients: list[Client] = []
        self.parked: deque[Client] = deque()
        self.samples: list[dict[str, float]] = []
        self.reconfigurations = 0
        self.reconfigure_failed = 0
        self.started = time.monotonic()
        self.numbered = 0
        self.end: dict[str, Any] = {}
        self.pending: set[asyncio.Future[None]] = set()  # challenge answers and reconfigurations under way

    def background(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self.pending.add(task)
        task.add_done_callback(self.pending.discard)

    def client_new(self) -> Client:
        topic = self.numbered % self.args.topics
        key = (self.numbered // self.args.topics) % self.args.keys
        guarded = self.rng.random() < self.args.guarded
        client = Client(self, self.numbered, topic, key, guarded)
        self.numbered += 1
        return client

    def arrival(self, kind: int) -> Client:
        """Fresh (0), a stream closed 0.5 to 2 s ago resumed (1), one closed 5 to 35 s ago resumed (2)."""
        now = time.monotonic()
        if kind == 1:
            for n in range(len(self.parked) - 1, -1, -1):
                away = now - self.parked[n].left_at
                if away > 2:
                    break
                if away >= 0.5:
                    client = self.parked[n]
                    del self.parked[n]
                    self.totals.resumes_recent += 1
                    return client
        if kind == 2:
            while self.parked and now - self.parked[0].left_at > OLD_AWAY[1]:
                self.parked.popleft()  # gone for good
            older = [n for n, c in enumerate(self.parked) if now - c.left_at >= OLD_AWAY[0]]
            if older:
                n = self.rng.choice(older)
                client = self.parked[n]
                del self.parked[n]
                self.totals.resumes_old += 1
                return client
        self.totals.fresh += 1
        return self.client_new()

    async def metrics(self) -> dict[str, float]:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        writer.write(b"GET /metrics HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n")
        body = await reader.read()
        writer.close()
        sums: dict[str, float] = {}
        for line in body.decode().split("\r\n\r\n", 1)[1].splitlines():
            if line.startswith("sluice_") and " " in line:
                name, value = line.rsplit(" ", 1)
                try:
                    sums[name.split("{")[0]] = sums.get(name.split("{")[0], 0.0) + float(value)
                except ValueError:
                    continue
        return {short: sums.get(long, 0.0) for short, long in METRICS.items()}

    async def sample(self) -> None:
        values = await self.metrics()
        latencies = sorted(self.totals.latencies)
        self.totals.latencies = []

        def pick(fraction: float) -> float:
            return latencies[min(len(latencies) - 1, int(len(latencies) * fraction))] * 1000 if latencies else 0.0

        values |= {"minute": (time.monotonic() - self.started) / 60, "p50": pick(0.5), "p99": pick(0.99)}
        values |= {"delivered": len(latencies), "clients": sum(c.open for c in self.clients)}
        self.samples.append(values)
        t = self.totals
        print(
            f"  {values['minute']:5.1f} min  streams {values['streams']:5.0f}  rss {values['rss'] / 2**20:6.1f} MiB  "
            f"fds {values['fds']:5.0f}  threads {values['threads']:3.0f}  hubs {values['hubs']:2.0f}  "
            f"tasks {values['tasks']:5.0f}  subscribers {values['subscribers']:5.0f}  "
            f"p50 {values['p50']:6.1f} ms  p99 {values['p99']:7.1f} ms  "
            f"events {t.events}  lost {t.lost}  dup {t.duplicated}  ends {t.unasked_ends}  "
            f"challenges {t.challenges}/{t.answered}/{t.answer_failed}  refused {t.refused}  replayed {t.replayed}  "
            f"catch-ups {values['catch_ups_cache']:.0f}/{values['catch_ups_kafka']:.0f}  cut {values['cut']:.0f}  "
            f"load {loadavg()}",
            flush=True,
        )

    async def reconfigure(self, http: Any) -> None:
        """Change one route's heartbeat and description through the admin API, as an operator would."""
        n = self.reconfigurations
        route = self.route_ids[n % len(self.route_ids)]
        try:
            token = await http.post("/api/token/", json={"username": STAFF, "password": STAFF_PASSWORD})
            response = await http.patch(
                f"/api/routes/{route}/",
                json={"heartbeat_seconds": 5 + n % 2, "description": f"reconfigured {n}"},
                headers={"authorization": f"Bearer {token.json()['access']}"},
            )
            ok = response.status_code == 200
        except Exception:  # counted and reported
            ok = False
        self.reconfigurations += 1
        self.reconfigure_failed += 0 if ok else 1

    async def run(self) -> None:
        import httpx

        args = self.args
        await self.sample()
        for _ in range(args.streams):
            client = self.client_new()
            self.clients.append(client)
            client.start()
            if len(self.clients) % 100 == 0:
                await asyncio.sleep(0.2)
        end = self.started + args.minutes * 60
        next_sample = time.monotonic() + args.sample_seconds
        next_reconfigure = time.monotonic() + args.reconfigure_seconds
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{self.port}", timeout=30) as http:
            while time.monotonic() < end:
                tick = time.monotonic()
                self.churn()
                if tick >= next_reconfigure:
                    self.background(self.reconfigure(http))
                    next_reconfigure += args.reconfigure_seconds
                if tick >= next_sample:
                    await self.sample()
                    next_sample += args.sample_seconds
                await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))

    def churn(self) -> None:
        self.rng.shuffle(self.clients)
        count = self.args.churn
        leaving, self.clients = self.clients[:count], self.clients[count:]
        for client in leaving:
            client.leave()
            self.parked.append(client)
        for n in range(count):
            client = self.arrival(n % 3)
            self.clients.append(client)
            client.start()

    async def finish(self, produced: int) -> tuple[int, int]:
        """Once production stopped: wait for the open clients to catch up; (open clients short, records short)."""
        wanted = {}
        for c in self.clients:
            wanted[c] = expected_count(produced, self.args.topics, self.args.keys, c.topic, c.key) - 1
        for _ in range(120):  # a minute at most
            if all(c.last_seq >= want for c, want in wanted.items() if c.last_seq >= 0):
                break
            await asyncio.sleep(0.5)
        short = [(c, want - c.last_seq) for c, want in wanted.items() if c.last_seq >= 0 and c.last_seq < want]
        for c in self.clients:
            c.leave()
        await asyncio.sleep(0.5)
        return len(short), sum(n for _, n in short)


def gateway_setup(gateway: Gateway, topics: list[str], args: argparse.Namespace) -> list[int]:
    """Topics, a guard, a route per (topic, key) and its guarded twin, a staff user; the routes' ids."""
    code = f"""
import json
from django.contrib.auth import get_user_model
from guards.services import guard_upsert
from streams.services import route_upsert, topic_upsert
get_user_model().objects.create_user({STAFF!r}, "soak@example.com", {STAFF_PASSWORD!r}, is_staff=True)
guard_upsert(name="soak", issuer={ISSUER!r}, audience={AUDIENCE!r}, algorithms=["HS256"], secret={SECRET!r},
             challenge={args.challenge_seconds})
ids = []
for t, topic in enumerate({topics!r}):
    topic_upsert(name=topic, cache_max_messages={int(args.rate / args.topics * args.cache_seconds)},
                 cache_max_bytes=256 * 1024 * 1024)
    for k in range({args.keys}):
        for guarded in (False, True):
            path = f"/soak/{{'g' if guarded else 'p'}}/t{{t}}/k{{k}}"
            extra = dict(guard="soak", roles=["read:items"]) if guarded else {{}}
            route = route_upsert(path=path, topic=topic, heartbeat_seconds=5, filters=[{{"key": f"k{{k}}"}}], **extra)
            ids.append(route.pk)
print(json.dumps(ids))
"""
    out = gateway.manage("shell", "-c", code)
    return list(json.loads(out.strip().splitlines()[-1]))


def flatness(samples: list[dict[str, float]], warmup: float) -> dict[str, tuple[float, float, float]]:
    """Per figure after the warm-up: (mean of the first third, mean of the last third, change in %)."""
    after = [s for s in samples if s["minute"] >= warmup]
    third = max(1, len(after) // 3)
    out = {}
    for name in FLAT:
        first = sum(s[name] for s in after[:third]) / third if after else 0.0
        last = sum(s[name] for s in after[-third:]) / third if after else 0.0
        out[name] = (first, last, (last - first) / first * 100 if first else 0.0)
    return out


def report(soak: Soak, args: argparse.Namespace, end: dict[str, Any]) -> tuple[str, bool]:
    t, samples = soak.totals, soak.samples
    lines = [
        "| minute | streams open | RSS (MiB) | descriptors | threads | hubs | asyncio tasks | events | p50 (ms) "
        "| p99 (ms) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in samples[1:]:
        lines.append(
            f"| {s['minute']:.1f} | {s['streams']:.0f} | {s['rss'] / 2**20:.1f} | {s['fds']:.0f} | {s['threads']:.0f} "
            f"| {s['hubs']:.0f} | {s['tasks']:.0f} | {s['delivered']:.0f} | {s['p50']:.1f} | {s['p99']:.1f} |"
        )
    flat = flatness(samples, args.warmup_minutes)
    after = [s for s in samples if s["minute"] >= args.warmup_minutes] or samples
    first, last = after[0], samples[-1]
    lines += ["", "| after the warm-up | first third (mean) | last third (mean) | change |", "|---|---:|---:|---:|"]
    units = {"rss": 2**20, "fds": 1, "threads": 1, "hubs": 1}
    labels = {"rss": "RSS (MiB)", "fds": "descriptors", "threads": "threads", "hubs": "hubs"}
    for name, (a, b, pct) in flat.items():
        lines.append(f"| {labels[name]} | {a / units[name]:.1f} | {b / units[name]:.1f} | {pct:+.1f} % |")
    status_text = ", ".join(f"{code}: {n}" for code, n in sorted(t.statuses.items()))
    lines += [
        "",
        f"{args.minutes:g} min, {args.streams} streams over {args.topics} topics x {args.keys} keys "
        f"({args.guarded:.0%} guarded, tokens of {args.token_seconds} s, challenge {args.challenge_seconds} s "
        f"before exp), {args.churn} streams closed and {args.churn} opened a second, {args.rate:g} msg/s, a route "
        f"reconfigured every {args.reconfigure_seconds:g} s. Messages produced {end['produced']}; events received "
        f"{t.events}; sessions {t.sessions} (fresh clients {t.fresh}, resumed after 0.5 to 2 s {t.resumes_recent}, "
        f"after 5 to 35 s {t.resumes_old}); responses by status {status_text}; challenges {t.challenges}, "
        f"answered 204 {t.answered} ({t.answers_resent} sent again after a 503), "
        f"answers refused {t.answer_failed}; streams ended unasked {t.unasked_ends}; "
        f"reconfigurations {soak.reconfigurations} ({soak.reconfigure_failed} failed); latency p50/p99 "
        f"{first['p50']:.1f}/{first['p99']:.1f} ms in the first sample after the warm-up, "
        f"{last['p50']:.1f}/{last['p99']:.1f} ms in the last; load average at the end {end['load']}.",
        "",
    ]
    checks = {
        "lost: 0": t.lost == 0 and end["short_records"] == 0,
        "duplicated: 0": t.duplicated == 0,
        "tracebacks in the gateway log: 0": end["tracebacks"] == 0,
        "every challenge answered with 204": t.answer_failed == 0 and (t.challenges > 0 or args.guarded == 0),
        "no stream ended unasked": t.unasked_ends == 0,
        "every reconfiguration applied": soak.reconfigure_failed == 0 and soak.reconfigurations > 0,
    }
    for name, (_, _, pct) in flat.items():
        checks[f"{labels[name]} flat within {args.tolerance:g} % after {args.warmup_minutes:g} min"] = (
            abs(pct) <= args.tolerance
        )
    lines.append(f"lost {t.lost} in sequence gaps, {end['short_records']} at the end ({end['short_clients']} clients)")
    lines.append("")
    lines += [f"- {'ok' if ok else 'FAILED'}: {name}" for name, ok in checks.items()]
    return "\n".join(lines) + "\n", all(checks.values())


def svg_write(soak: Soak, args: argparse.Namespace, path: Path) -> None:
    samples = soak.samples[1:]
    minutes = [s["minute"] for s in samples]
    panels = [
        ("RSS (MiB)", [("RSS", [s["rss"] / 2**20 for s in samples])]),
        ("open file descriptors", [("descriptors", [s["fds"] for s in samples])]),
        ("threads and hubs", [("threads", [s["threads"] for s in samples]), ("hubs", [s["hubs"] for s in samples])]),
        ("delivery latency (ms)", [("p50", [s["p50"] for s in samples]), ("p99", [s["p99"] for s in samples])]),
    ]
    caption = (
        f"{args.streams} streams, churn {args.churn}/s, {args.rate:g} msg/s, "
        f"reconfiguration every {args.reconfigure_seconds:g} s"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(soak_svg(minutes, panels, args.warmup_minutes, caption))


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--streams", "--open", type=int, default=2000, help="Streams open at a time.")
    parser.add_argument("--churn", type=int, default=100, help="Streams closed (and as many opened) a second.")
    parser.add_argument("--rate", type=float, default=1000.0, help="Messages produced a second, over every topic.")
    parser.add_argument("--topics", type=int, default=1)
    parser.add_argument(
        "--linger-ms",
        type=float,
        default=250.0,
        help="The producer's linger.ms: the embedded broker's memory storage slows with every record batch it holds.",
    )
    parser.add_argument("--keys", type=int, default=200, help="Keys per topic; a route per key.")
    parser.add_argument("--guarded", type=float, default=0.25, help="Share of the streams on guarded routes.")
    parser.add_argument("--token-seconds", type=int, default=20, help="Lifetime of the guarded streams' tokens.")
    parser.add_argument("--challenge-seconds", type=int, default=8, help="The guard's challenge, before exp.")
    parser.add_argument("--cache-seconds", type=float, default=40.0, help="A topic's cache holds this long.")
    parser.add_argument("--reconfigure-seconds", type=float, default=60.0)
    parser.add_argument("--sample-seconds", type=float, default=30.0)
    parser.add_argument("--warmup-minutes", type=float, default=3.0)
    parser.add_argument("--tolerance", type=float, default=5.0, help="Flat within this many per cent.")
    parser.add_argument("--output-md", type=Path, help="Write the table and the verdict here (Markdown).")
    parser.add_argument("--output-svg", type=Path, help="Write the plot here.")
    parser.add_argument("--gateway-log", type=Path, help="Keep the gateway's log here.")
    parser.add_argument("--seed", type=int, default=20261126)
    return parser.parse_args()


def main() -> None:
    args = arguments()
    fd_limit_raise(args.streams * 3 + 1024)
    print(f"{machine_description()}; load average {loadavg()}", flush=True)
    from streams.server.broker import EmbeddedBroker, topic_ensure

    ctx = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="sluice-soak-") as tmp:
        broker = EmbeddedBroker().start()
        gateway = Gateway(f"sqlite:///{tmp}/soak.sqlite3", broker.bootstrap, Path(tmp) / "gateway.log")
        stop, produced = ctx.Event(), ctx.Value("q", 0)
        soak: Soak | None = None
        producer = None
        try:
            topics = [f"soak-{uuid.uuid4().hex[:8]}-{n}" for n in range(args.topics)]
            for topic in topics:
                topic_ensure(broker.bootstrap, topic, partitions=PARTITIONS)
            gateway.manage("migrate", "--verbosity", "0")
            route_ids = gateway_setup(gateway, topics, args)
            gateway.start()
            producer = ctx.Process(
                target=producer_main,
                args=(broker.bootstrap, topics, args.keys, args.rate, args.linger_ms, stop, produced),
            )
            producer.start()
            soak = Soak(args, gateway.port, route_ids)
            asyncio.run(soak_main(soak, stop, producer, produced))
        finally:
            stop.set()
            if producer is not None:
                producer.join(90)
            gateway.stop()
            broker.stop()
            log_path = Path(tmp) / "gateway.log"
            log = log_path.read_text("utf-8", "replace") if log_path.exists() else ""
            if args.gateway_log:
                args.gateway_log.write_text(log)
    assert soak is not None
    soak.end["tracebacks"] = log.count("Traceback")
    if soak.end["tracebacks"]:
        print(log[log.index("Traceback") :][:4000])
    text, ok = report(soak, args, soak.end)
    print()
    print(text)
    if args.output_md:
        args.output_md.write_text(text)
    if args.output_svg:
        svg_write(soak, args, args.output_svg)
    sys.exit(0 if ok else 1)


async def soak_main(soak: Soak, stop: Any, producer: Any, produced: Any) -> None:
    await asyncio.sleep(2)
    await soak.run()
    await soak.sample()
    stop.set()
    await asyncio.to_thread(producer.join, 90)
    short_clients, short_records = await soak.finish(int(produced.value))
    soak.end = {
        "produced": int(produced.value),
        "short_clients": short_clients,
        "short_records": short_records,
        "load": loadavg(),
    }


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()

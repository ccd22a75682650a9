"""A reconnect storm: N streams that were reading one topic come back at once with their Last-Event-ID.

A node died: its clients reconnect to this gateway together, each naming the last event it saw and
(unless ``--public``) sending its own token (``--alg``: ES256 by default, RS256 or HS256). The
benchmark opens N streams, reads each to the same event, drops them all, produces a backlog they
missed, then reconnects all N at once. It reports the admissions per second (``200`` answered: token
verified, route matched, id parsed, resume planned), the mean and the peak second, the gateway's CPU
time per admission, and the time until every client is level (has read the last event produced).
Every stream stays open until all are level.

The load is split over ``--processes`` client processes (``bench/lib/stormload.py``, uvloop), each on its
own loopback source address 127.0.0.<2+k>: one process may hold 20,000 descriptors, one source address
some 28,000 ephemeral ports. A gateway worker holds one descriptor per stream, so 20,000 streams need
``--workers 2``.

    python bench/storm.py --clients 5000
    python bench/storm.py --clients 20000 --workers 2 --processes 4   # the full-scale target
    python bench/storm.py --clients 5000 --alg RS256                  # tokens of another algorithm
    python bench/storm.py --clients 5000 --verified-tokens 0          # every token verified (none remembered)
    python bench/storm.py --clients 5000 --profile /tmp/storm.txt     # py-spy of the worker(s), the storm only
    python bench/storm.py --clients 5000 --profile /tmp/storm.txt --native   # with C frames (OpenSSL, the kernel calls)

The first opens reach the same gateway: its workers remember the tokens they admitted
(``SLUICE_VERIFIED_TOKENS``), so in the storm a client that comes back to the worker that
admitted it skips the signature check, as a client reconnecting to the same gateway would.
``--verified-tokens 0`` verifies every token, as a gateway the clients never reached would.

The load average before the run is printed with the figures: on a loaded machine they are a floor.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
os.environ.setdefault("SLUICE_DEV", "1")

from bench.lib.processes import Child, Gateway  # noqa: E402
from bench.lib.procstats import fd_limit_raise, tree_cpu_seconds  # noqa: E402
from bench.lib.stormload import storm_client_main  # noqa: E402
from streams.server.broker import EmbeddedBroker, topic_ensure  # noqa: E402

TOPIC = "storm"
SETUP = """
from guards.services import guard_upsert
from streams.services import route_upsert
if {key!r}:
    key = {key!r}
    keys = [] if key["alg"] == "HS256" else [key]
    guard_upsert(name="storm", issuer="storm", audience="sluice", algorithms=[key["alg"]], keys=keys,
                 secret=key.get("secret", ""), roles_claim="scope")
    route_upsert(path="/storm/{{x}}", topic="storm", initial="earliest", guard="storm", roles=["storm:read"])
else:
    route_upsert(path="/storm/{{x}}", topic="storm", initial="earliest")
"""


def signing_key(alg: str) -> tuple[bytes, dict[str, str]]:
    """The clients' signing key (PEM, or the HS256 secret) and what the guard verifies with (a public JWK)."""
    import jwt
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    if alg == "HS256":
        secret = os.urandom(32).hex()
        return secret.encode(), {"alg": alg, "secret": secret}
    key = ec.generate_private_key(ec.SECP256R1()) if alg == "ES256" else rsa.generate_private_key(65537, 2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    jwk = jwt.get_algorithm_by_name(alg).to_jwk(key.public_key(), as_dict=True)
    return pem, {**jwk, "kid": "s1", "alg": alg}


def thread_cpu(pids: list[int]) -> dict[str, float]:
    """CPU seconds of the serving processes: their event-loop (main) threads, and their other threads."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            name = f"{pid} loop" if task.name == str(pid) else f"{pid} other"
            out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def profiler_start(pids: list[int], path: Path, native: bool) -> subprocess.Popen[bytes]:
    """py-spy on the serving processes (raw collapsed stacks; ``native``: with C frames) until SIGINT."""
    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or "py-spy"
    command = [spy, "record", "--rate", "250", "--format", "raw", "-o", str(path), *(["--native"] if native else [])]
    command += ["--subprocesses", "-p", str(pids[0])]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # py-spy attaches
    return process


async def storm(args: argparse.Namespace, gateway: Gateway, produce: object, pem: bytes | None) -> dict[str, float]:
    assert callable(produce)
    share = -(-args.clients // args.processes)
    children = [
        Child(
            storm_client_main,
            *(gateway.port, f"127.0.0.{2 + k}", k * share, min(share, args.clients - k * share)),
            *(args.before, args.backlog, pem, args.alg),
        )
        for k in range(args.processes)
        if k * share < args.clients
    ]
    opening = time.monotonic()
    for child in children:
        await child.receive(600, "storm client: the first opens")
    print(f"first opens: {args.clients} in {time.monotonic() - opening:.1f} s", file=sys.stderr)
    produce(args.before, args.backlog)
    pids = gateway.pids()
    profiler = profiler_start(pids, args.profile, args.native) if args.profile else None
    cpu0 = tree_cpu_seconds(pids)
    threads0 = thread_cpu(pids)
    started = time.monotonic()
    for child in children:
        child.conn.send("go")
    results = [await child.receive(600, "storm client: the storm") for child in children]
    cpu = tree_cpu_seconds(pids) - cpu0
    threads = {name: t - threads0.get(name, 0.0) for name, t in thread_cpu(pids).items()}
    busy = ", ".join(f"{name} {t:.2f}" for name, t in sorted(threads.items(), key=lambda x: -x[1]) if t >= 0.05)
    print(f"gateway CPU by thread (s): {busy}", file=sys.stderr)
    if profiler is not None:
        profiler.send_signal(signal.SIGINT)
        profiler.wait(60)
    for child in children:
        child.conn.send("close")
        child.stop()
    admitted = sorted(t - started for r in results for t in r["admitted"])
    connected = sorted(t - started for r in results for t in r["connected"])
    print(
        f"connected {connected[0]:.2f}-{connected[len(connected) // 2]:.2f}-{connected[-1]:.2f} s, "
        f"admitted {admitted[0]:.2f}-{admitted[len(admitted) // 2]:.2f}-{admitted[-1]:.2f} s; "
        f"client CPU {sum(r['cpu'] for r in results):.2f} s, gateway CPU {cpu:.2f} s",
        file=sys.stderr,
    )
    level = max(t - started for r in results for t in r["level"])
    per_second: dict[int, int] = {}
    for t in admitted:
        per_second[int(t)] = per_second.get(int(t), 0) + 1
    return {
        "admitted_in": admitted[-1],
        "first": admitted[0],
        "mean": len(admitted) / max(admitted[-1], 1e-3),
        "peak_second": max(per_second.values()),
        "level_in": level,
        "refused": sum(r["refused"] for r in results),
        "wrong_counts": sum(r["wrong_counts"] for r in results),
        "cpu_ms_per_admission": 1000 * cpu / len(admitted),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=5000)
    parser.add_argument("--workers", type=int, default=1, help="gateway worker processes")
    parser.add_argument("--processes", type=int, default=0, help="load client processes (default: one per 5,000)")
    parser.add_argument("--before", type=int, default=5, help="events every client reads before the node dies")
    parser.add_argument("--backlog", type=int, default=20, help="events produced while the clients are away")
    parser.add_argument("--public", action="store_true", help="no guard: the route is public, no token sent")
    parser.add_argument("--alg", default="ES256", choices=("ES256", "RS256", "HS256"), help="the tokens' algorithm")
    parser.add_argument("--admissions-per-second", type=float, default=0.0, help="SLUICE_ADMISSIONS_PER_SECOND")
    parser.add_argument(
        "--verified-tokens",
        type=int,
        help="SLUICE_VERIFIED_TOKENS of the gateway (unset: its default); 0 verifies every token, as a gateway "
        "the clients never reached before would (a node died)",
    )
    parser.add_argument("--loop", default="asyncio", help="SLUICE_EVENT_LOOP of the gateway: asyncio or uvloop")
    parser.add_argument("--profile", type=Path, help="py-spy the worker(s) during the storm into this file")
    parser.add_argument("--native", action="store_true", help="with --profile: C frames too (py-spy --native)")
    args = parser.parse_args()
    args.processes = args.processes or max(1, -(-args.clients // 5000))
    fd_limit_raise(1024)
    load = os.getloadavg()
    pem, jwk = (None, None) if args.public else signing_key(args.alg)
    broker = EmbeddedBroker().start()
    workdir = Path(tempfile.mkdtemp(prefix="sluice-storm-"))
    gateway = Gateway(f"sqlite:///{workdir / 'db.sqlite3'}", broker.bootstrap, workdir / "gateway.log", args.workers)
    gateway.env["SLUICE_ADMISSIONS_PER_SECOND"] = str(args.admissions_per_second)
    gateway.env["SLUICE_EVENT_LOOP"] = args.loop
    if args.verified_tokens is not None:
        gateway.env["SLUICE_VERIFIED_TOKENS"] = str(args.verified_tokens)
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap})

    def produce(start: int, count: int) -> None:
        for n in range(start, start + count):
            producer.produce(TOPIC, f'{{"seq":{n}}}'.encode())
        producer.flush(30)

    try:
        topic_ensure(broker.bootstrap, TOPIC, partitions=1)
        gateway.manage("migrate", "--verbosity", "0")
        gateway.manage("shell", "-c", SETUP.format(key=jwk))
        gateway.start()
        produce(0, args.before)
        result = asyncio.run(storm(args, gateway, produce, pem))
    finally:
        gateway.stop()
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    after = os.getloadavg()
    print(
        f"load average before the run: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, after: {after[0]:.2f} "
        f"{after[1]:.2f} {after[2]:.2f} on {os.cpu_count()} cores"
    )
    print(
        f"{args.clients} {'public' if args.public else args.alg + '-guarded'} streams reconnected with Last-Event-ID "
        "at once "
        f"({args.workers} worker(s) on {args.loop}, {args.processes} client processes, "
        f"SLUICE_VERIFIED_TOKENS {'default' if args.verified_tokens is None else args.verified_tokens}): "
        f"all admitted in {result['admitted_in']:.2f} s "
        f"(first {result['first']:.2f} s; mean {result['mean']:.0f}/s, peak second {result['peak_second']:.0f}), "
        f"every client level in {result['level_in']:.2f} s; gateway CPU {result['cpu_ms_per_admission']:.3f} ms "
        f"per admission; {result['refused']:.0f} retried, {result['wrong_counts']:.0f} with a wrong event count"
    )


if __name__ == "__main__":
    main()

"""Guard admission cost: what a JWT guard adds to opening a stream (issue goal: < 1 ms at p50, cached key).

Two measurements, both with the key already known (inline JWK, as a JWKS key is after its first fetch),
and each token checked as one the worker has not admitted before (``SLUICE_VERIFIED_TOKENS=0`` here:
one token is presented over and over, which a worker would otherwise take from its admitted tokens
without checking its signature again; ``bench/storm.py`` measures both):

1. In process: ``stream_admit`` (credentials -> signature and claims -> roles) per algorithm,
   against a public route's admission (no guard) as the baseline.
2. Over the wire: a real gateway (``runstreams``, embedded broker) and a client opening
   streams one after another, alternating between a public and an ES256-guarded route on the
   same topic; the time from sending the request to the end of the response headers.

    python bench/admission.py --iterations 5000 --opens 400 --output docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
os.environ.setdefault("SLUICE_DEV", "1")
os.environ.setdefault("SLUICE_VERIFIED_TOKENS", "0")

import django  # noqa: E402

django.setup()

import jwt  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec, rsa  # noqa: E402

from bench.lib.processes import Gateway  # noqa: E402
from bench.lib.procstats import machine_description  # noqa: E402
from bench.lib.report import output_write  # noqa: E402
from guards.policy import policy_compile  # noqa: E402
from streams.core.patterns import pattern_compile  # noqa: E402
from streams.core.routes import RouteSpec  # noqa: E402
from streams.core.templating import template_compile  # noqa: E402
from streams.edge.authorization.admission import stream_admit  # noqa: E402
from streams.server.broker import EmbeddedBroker, topic_ensure  # noqa: E402

SECTION_BEGIN = "<!-- bench/admission.py results: begin -->"
SECTION_END = "<!-- bench/admission.py results: end -->"
HMAC_SECRET = "a-benchmark-secret-of-at-least-32-bytes!"
ROLE = "bench:read"


def jwk_public(key: Any, kid: str, alg: str) -> dict[str, Any]:
    document = jwt.algorithms.get_default_algorithms()[alg].to_jwk(key.public_key(), as_dict=True)
    return {**document, "kid": kid, "alg": alg}


def claims(lifetime: int = 3600) -> dict[str, Any]:
    now = int(time.time())
    return {"sub": "bench", "scope": ROLE, "iss": "bench", "aud": "sluice", "iat": now, "exp": now + lifetime}


def keyed_cases() -> list[tuple[str, dict[str, Any], str]]:
    """(algorithm, guard policy fields, token) for each algorithm measured."""
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    return [
        (
            "RS256",
            {"algorithms": ["RS256"], "keys": [jwk_public(rsa_key, "r1", "RS256")]},
            jwt.encode(claims(), rsa_key, algorithm="RS256", headers={"kid": "r1"}),
        ),
        (
            "ES256",
            {"algorithms": ["ES256"], "keys": [jwk_public(ec_key, "e1", "ES256")]},
            jwt.encode(claims(), ec_key, algorithm="ES256", headers={"kid": "e1"}),
        ),
        ("HS256", {"algorithms": ["HS256"], "secret": HMAC_SECRET}, jwt.encode(claims(), HMAC_SECRET, "HS256")),
    ]


def route_spec(guard: Any) -> RouteSpec:
    return RouteSpec(
        id=1,
        pattern=pattern_compile("/bench/{x}"),
        topic=template_compile("bench"),
        filters=(),
        event_id="etag",
        initial="live",
        allow_since=False,
        binary="skip",
        retry_ms=2000,
        heartbeat_seconds=15,
        max_pending_bytes=1 << 20,
        guard=guard,
        roles=(ROLE,) if guard is not None else (),
    )


def quantiles(samples_ns: list[int]) -> tuple[float, float]:
    """p50 and p99 in microseconds."""
    ordered = sorted(samples_ns)
    return ordered[len(ordered) // 2] / 1000, ordered[int(len(ordered) * 0.99)] / 1000


async def admit_timings(route: RouteSpec, token: str | None, iterations: int) -> list[int]:
    headers = [(b"authorization", f"Bearer {token}".encode())] if token else []
    scope = {"type": "http", "path": "/bench/x", "headers": headers, "client": ("127.0.0.1", 1)}
    for _ in range(200):  # warm up (key objects, caches)
        await stream_admit(route, scope, {})
    samples = []
    for _ in range(iterations):
        started = time.perf_counter_ns()
        await stream_admit(route, scope, {})
        samples.append(time.perf_counter_ns() - started)
    return samples


def in_process(iterations: int) -> list[tuple[str, float, float]]:
    rows = [("none (public route)", *quantiles(asyncio.run(admit_timings(route_spec(None), None, iterations))))]
    for alg, fields, token in keyed_cases():
        policy = policy_compile(name=f"bench-{alg}", issuer="bench", audience="sluice", roles_claim="scope", **fields)
        rows.append((alg, *quantiles(asyncio.run(admit_timings(route_spec(policy), token, iterations)))))
    return rows


def open_once(port: int, path: str, authorization: str | None) -> int:
    """Nanoseconds from sending the request to the end of the response headers (status 200 required)."""
    request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
    if authorization:
        request += f"Authorization: {authorization}\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        started = time.perf_counter_ns()
        sock.sendall((request + "\r\n").encode())
        received = b""
        while b"\r\n\r\n" not in received:
            chunk = sock.recv(4096)
            if not chunk:
                raise RuntimeError(f"connection closed: {received!r}")
            received += chunk
        elapsed = time.perf_counter_ns() - started
    if not received.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"{path}: {received.splitlines()[0]!r}")
    return elapsed


SETUP = """
from guards.services import guard_upsert
from streams.services import route_upsert, topic_upsert
guard_upsert(name="bench", issuer="bench", audience="sluice", algorithms=["ES256"], keys=[{key}], roles_claim="scope")
topic_upsert(name="bench")
route_upsert(path="/bench/public/{{x}}", topic="bench")
route_upsert(path="/bench/guarded/{{x}}", topic="bench", guard="bench", roles=["{role}"])
"""


def over_the_wire(opens: int) -> tuple[tuple[float, float], tuple[float, float]]:
    ec_key = ec.generate_private_key(ec.SECP256R1())
    token = jwt.encode(claims(), ec_key, algorithm="ES256", headers={"kid": "e1"})
    broker = EmbeddedBroker().start()
    workdir = Path(tempfile.mkdtemp(prefix="sluice-admission-"))
    gateway = Gateway(f"sqlite:///{workdir / 'db.sqlite3'}", broker.bootstrap, workdir / "gateway.log")
    try:
        topic_ensure(broker.bootstrap, "bench", partitions=1)
        gateway.manage("migrate", "--verbosity", "0")
        gateway.manage("shell", "-c", SETUP.format(key=repr(jwk_public(ec_key, "e1", "ES256")), role=ROLE))
        gateway.start()
        public: list[int] = []
        guarded: list[int] = []
        for n in range(opens + 50):  # the first 50 of each warm up the route table and the hub
            p = open_once(gateway.port, f"/bench/public/{n}", None)
            g = open_once(gateway.port, f"/bench/guarded/{n}", f"Bearer {token}")
            if n >= 50:
                public.append(p)
                guarded.append(g)
        return quantiles(public), quantiles(guarded)
    finally:
        gateway.stop()
        broker.stop()
        subprocess.run(["rm", "-rf", str(workdir)], check=False)


def section(rows: list[tuple[str, float, float]], wire: Any, args: argparse.Namespace) -> str:
    (public_p50, public_p99), (guarded_p50, guarded_p99) = wire
    lines = [
        SECTION_BEGIN,
        "## Guard admission (`bench/admission.py`)",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {machine_description()}, with:",
        "",
        "```",
        f"python bench/admission.py --iterations {args.iterations} --opens {args.opens} --output docs/benchmarks.md",
        "```",
        "",
        f"In process: `stream_admit` on one route, {args.iterations} calls each, key already known "
        "(inline JWK; a JWKS key is the same once fetched), every token checked as new "
        f"(`SLUICE_VERIFIED_TOKENS={os.environ['SLUICE_VERIFIED_TOKENS']}`).",
        "",
        "| guard | p50 | p99 | added at p50 |",
        "|---|---:|---:|---:|",
    ]
    base = rows[0][1]
    for name, p50, p99 in rows:
        added = "" if name.startswith("none") else f"{p50 - base:.0f} µs"
        lines.append(f"| {name} | {p50:.0f} µs | {p99:.0f} µs | {added} |")
    lines += [
        "",
        f"Over the wire: {args.opens} stream opens on each route of a real gateway, alternating, one at a time; "
        "time from sending the request to the end of the response headers.",
        "",
        "| route | p50 | p99 |",
        "|---|---:|---:|",
        f"| public | {public_p50 / 1000:.2f} ms | {public_p99 / 1000:.2f} ms |",
        f"| ES256 guard, role required | {guarded_p50 / 1000:.2f} ms | {guarded_p99 / 1000:.2f} ms |",
        f"| added by the guard | {(guarded_p50 - public_p50) / 1000:.2f} ms | |",
        SECTION_END,
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=5000, help="admissions per algorithm, in process")
    parser.add_argument("--opens", type=int, default=400, help="stream opens per route, over the wire")
    parser.add_argument("--output", type=Path, help="write the results section into this Markdown file")
    args = parser.parse_args()
    rows = in_process(args.iterations)
    wire = over_the_wire(args.opens)
    text = section(rows, wire, args)
    print(text)
    if args.output:
        output_write(args.output, text, SECTION_BEGIN, SECTION_END)


if __name__ == "__main__":
    main()

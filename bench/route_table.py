"""What keeping the route table fresh costs a worker when the configuration does not change.

Two measurements on one database (a new SQLite file unless ``--database-url`` names an empty
one) holding ``--routes`` routes (half of them guarded and filtered by key, as the soak's):

1. In process: ``route_table()`` with a cache time of 0, so that every call renews the table
   as a worker does once every ``SLUICE_ROUTE_CACHE_SECONDS`` (1 s by default); the CPU of a
   renewal (its thread included) is the CPU a second it costs each worker.
2. A ``runstreams`` worker (default cache time) asked for a path no route serves four times a
   second for ``--seconds``: each request after the cache time renews the table. Its CPU from
   ``/proc/<pid>/stat``, against the same worker asked for a reserved endpoint (``/healthz``,
   which never reads the table) at the same rate.

    python bench/route_table.py --routes 400 --renewals 300 --seconds 30
    python bench/route_table.py --conn-max-age 600   # connections kept between renewals
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.lib.processes import Gateway  # noqa: E402
from bench.lib.procstats import loadavg, proc_cpu_seconds  # noqa: E402

SETUP = """
from guards.services import guard_upsert
from streams.services import route_upsert
guard_upsert(name="bench", issuer="bench", audience="sluice", algorithms=["HS256"], secret="s" * 40)
for n in range({pairs}):
    route_upsert(path=f"/bench/p/t{{n}}", topic=f"bench-{{n}}")
    route_upsert(path=f"/bench/g/t{{n}}", topic=f"bench-{{n}}", guard="bench", roles=["read"],
                 filters=[{{"key": f"k{{n}}"}}])
"""

RENEWALS = """
import asyncio, json, time
from streams.selectors import route_table

async def renewals(count):
    for _ in range(20):  # warm up: compiled templates, policies, the connection
        await route_table()
    started, cpu = time.perf_counter(), time.process_time()
    for _ in range(count):
        table = await route_table()
    return len(table.routes), (time.process_time() - cpu) / count, (time.perf_counter() - started) / count

routes, cpu, wall = asyncio.run(renewals({count}))
print(json.dumps({{"routes": routes, "cpu_ms": cpu * 1000, "wall_ms": wall * 1000}}))
"""


def worker_cpu(gateway: Gateway, path: str, seconds: float) -> float:
    """The worker's CPU, in % of a core, while ``path`` is asked for four times a second."""
    url = f"http://127.0.0.1:{gateway.port}{path}"
    with httpx.Client(timeout=10) as client:
        for _ in range(8):  # warm up: the first table read, Django's URL resolver
            client.get(url)
            time.sleep(0.25)
        cpu, started = proc_cpu_seconds(gateway.pid), time.monotonic()
        deadline = started + seconds
        while time.monotonic() < deadline:
            client.get(url)
            time.sleep(0.25)
        return (proc_cpu_seconds(gateway.pid) - cpu) / (time.monotonic() - started) * 100


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--routes", type=int, default=400)
    parser.add_argument("--renewals", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=30.0, help="Each worker measurement.")
    parser.add_argument("--database-url", default="", help="An empty database (default: a new SQLite file).")
    parser.add_argument(
        "--conn-max-age", type=int, default=0, help="DATABASE_URL's conn_max_age (0: a connection per renewal)."
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sluice-route-table-") as work:
        workdir = Path(work)
        # No broker is reached: no stream opens, and the admin's cluster checks are not asked for.
        database = args.database_url or f"sqlite:///{workdir / 'db.sqlite3'}"
        database += f"?conn_max_age={args.conn_max_age}"
        gateway = Gateway(database, "127.0.0.1:9", workdir / "gateway.log")
        gateway.manage("migrate", "--verbosity", "0")
        gateway.manage("shell", "-c", SETUP.format(pairs=args.routes // 2))
        gateway.env["SLUICE_ROUTE_CACHE_SECONDS"] = "0"
        renewal = json.loads(gateway.manage("shell", "-c", RENEWALS.format(count=args.renewals)).splitlines()[-1])
        del gateway.env["SLUICE_ROUTE_CACHE_SECONDS"]
        print(
            f"renewal of {renewal['routes']} routes, nothing changed: {renewal['cpu_ms']:.2f} ms CPU, "
            f"{renewal['wall_ms']:.2f} ms wall (load average {loadavg()})",
            flush=True,
        )
        gateway.start()
        try:
            reading = worker_cpu(gateway, "/bench/none", args.seconds)
            print(f"worker, 4 requests/s renewing the table: {reading:.2f} % of a core (load {loadavg()})", flush=True)
            reserved = worker_cpu(gateway, "/healthz", args.seconds)
            print(f"worker, 4 requests/s to /healthz (no table): {reserved:.2f} % of a core (load {loadavg()})")
        finally:
            gateway.stop()


if __name__ == "__main__":
    main()

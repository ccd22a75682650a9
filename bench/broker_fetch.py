"""The embedded broker alone under after_burst.py's ramp: one bare consumer's latency, fetches and the broker's CPU.

No gateway and no SSE client run: a producer process writes 200-byte records round-robin over 3 partitions
(``linger.ms`` 1, as in ``bench/after_burst.py``; ``--partitions`` and ``--placed`` as there) at 1,000,
2,000, 5,000, 10,000 and 20,000 msg/s, 5 s each, into one fresh embedded broker whose log grows from step
to step; one confluent-kafka consumer, with the settings given, reads them all from offset 0. Per step:
the records' latency from produce to consume (p50, p99, max), the broker process's CPU and the fetches'
round trip; once a second (``--trace``): librdkafka's fetch round trips (p50, p99), fetches, kB per fetch
and records per partition. What is left when these figures match the gateway's is the broker's::

    python bench/broker_fetch.py --wait 100
    python bench/broker_fetch.py --wait 300 --max-bytes 131072 --trace
    python bench/broker_fetch.py --wait 10 --partitions 12 --placed
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing as mp
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Consumer, Producer, TopicPartition

from bench.lib.processes import payload_make
from bench.lib.procstats import loadavg, proc_cpu_seconds
from streams.server.broker import EmbeddedBroker, topic_ensure

PARTITIONS = 3
STEPS = (1000, 2000, 5000, 10000, 20000)


def produce(bootstrap: str, topic: str, args: argparse.Namespace, steps: Any) -> None:
    """Write ``seconds`` of records at each rate; say each step's start, then the total.

    Record n goes to partition n % partitions (a batch per partition per linger), or with ``placed``
    where librdkafka's partitioner puts a keyless record (sticky: a batch's worth to one partition, then the next).
    """
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": args.linger_ms, "log_level": 0})
    where: dict[str, int] = {}
    rates, seconds = args.rates, args.seconds
    seq = 0
    for rate in rates:
        steps.put(("step", rate))
        start = time.perf_counter()
        for n in range(int(rate * seconds)):
            delay = start + n / rate - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            while True:
                try:
                    if not args.placed:
                        where = {"partition": seq % args.partitions}
                    producer.produce(topic, payload_make(seq, time.time_ns(), 200), **where)
                    break
                except BufferError:
                    producer.poll(0.001)
            seq += 1
            producer.poll(0)
        producer.flush()
        time.sleep(1.0)
    steps.put(("done", seq))


class Trace:
    """librdkafka's statistics, once a second: fetch round trips, fetches, bytes, records per partition."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.rows: list[tuple[float, float, float, int, int, int, tuple[int, ...]]] = []

    def note(self, text: str) -> None:
        stats = json.loads(text)
        broker = next(b for b in stats["brokers"].values() if b["nodeid"] >= 0)
        parts = stats["topics"].get(self.topic, {}).get("partitions", {})
        received = tuple(p.get("rxmsgs", 0) for k, p in sorted(parts.items()) if k != "-1")
        rtt = broker["rtt"]
        self.rows.append(
            (time.time(), rtt["p50"] / 1000, rtt["p99"] / 1000, rtt["cnt"], broker["rx"], broker["rxbytes"], received)
        )

    def lines(self) -> list[str]:
        out = []
        for before, row in zip(self.rows, self.rows[1:], strict=False):
            fetches = row[4] - before[4]
            per_partition = [a - b for a, b in zip(row[6], before[6], strict=False)]
            out.append(
                f"  t+{row[0] - self.rows[0][0]:.0f} s: rtt p50 {row[1]:.1f} p99 {row[2]:.1f} ms, {fetches} fetches, "
                f"{(row[5] - before[5]) / max(1, fetches) / 1024:.1f} kB/fetch, records per partition {per_partition}"
            )
        return out


def run(args: argparse.Namespace) -> None:
    broker = EmbeddedBroker().start()
    assert broker.process is not None
    try:
        topic = "ramp"
        topic_ensure(broker.bootstrap, topic, partitions=args.partitions)
        trace = Trace(topic)
        config: dict[str, Any] = {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "broker-fetch",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "log_level": 0,
            "fetch.wait.max.ms": args.wait,
            "queued.max.messages.kbytes": 32768,  # the gateway's
            "statistics.interval.ms": 1000,
            "stats_cb": trace.note,
        }
        if args.max_bytes:  # librdkafka wants message.max.bytes <= fetch.max.bytes
            config.update({"fetch.max.bytes": args.max_bytes, "message.max.bytes": args.max_bytes})
        consumer = Consumer(config)
        consumer.assign([TopicPartition(topic, p, 0) for p in range(args.partitions)])
        steps: Any = mp.Queue()
        producer = mp.Process(target=produce, args=(broker.bootstrap, topic, args, steps))
        producer.start()
        latencies: dict[int, list[float]] = {}
        cpu: list[tuple[int, float, float]] = []
        rate, produced, consumed, started = 0, -1, 0, time.monotonic()
        while consumed != produced and time.monotonic() - started < 600:
            while not steps.empty():
                kind, value = steps.get()
                if kind == "step":
                    rate = value
                    cpu.append((rate, proc_cpu_seconds(broker.process.pid), time.time()))
                else:
                    produced = value
            for message in consumer.consume(2000, 0.1):
                if message.error() is None:
                    value = message.value() or b""
                    sent = int(value[value.index(b'"ts":') + 5 : value.index(b',"pad"')])
                    latencies.setdefault(rate, []).append((time.time_ns() - sent) / 1e6)
                    consumed += 1
        cpu.append((0, proc_cpu_seconds(broker.process.pid), time.time()))
        producer.join()
        consumer.close()
    finally:
        broker.stop()
    shown = (
        f"fetch.wait.max.ms {args.wait}, fetch.max.bytes {args.max_bytes or 'default'}, "
        f"{args.partitions} partitions, {'placed by librdkafka' if args.placed else 'round-robin'}"
    )
    print(f"{shown}: {consumed:,} of {produced:,} records read")
    for (step, used, at), (_, used_next, at_next) in itertools.pairwise(cpu):
        values = sorted(latencies.get(step, [0.0]))
        n = len(values)
        trips = sorted(row[1] for row in trace.rows if at <= row[0] < at_next and row[3] > 0) or [0.0]
        print(
            f"  {step:>6} msg/s: p50 {values[n // 2]:.0f} ms, p99 {values[int(n * 0.99)]:.0f} ms, "
            f"max {values[-1]:.0f} ms; "
            f"broker CPU {100 * (used_next - used) / (at_next - at):.0f} %; "
            f"fetch round trip p50 {trips[len(trips) // 2]:.1f} ms (max of the seconds' {trips[-1]:.1f})"
        )
    if args.trace:
        print("\n".join(trace.lines()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wait", type=int, default=100, help="fetch.wait.max.ms of the consumer")
    parser.add_argument("--max-bytes", type=int, default=0, help="fetch.max.bytes (0: librdkafka's default)")
    parser.add_argument("--rates", default=",".join(map(str, STEPS)), help="comma list of msg/s, one step each")
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds per step")
    parser.add_argument("--linger-ms", type=float, default=1.0, help="the producer's linger.ms")
    parser.add_argument("--partitions", type=int, default=PARTITIONS, help="partitions of the topic")
    parser.add_argument(
        "--placed", action="store_true", help="leave keyless records to librdkafka's partitioner (sticky)"
    )
    parser.add_argument("--trace", action="store_true", help="print librdkafka's fetch figures once a second")
    args = parser.parse_args()
    args.rates = [int(r) for r in args.rates.split(",") if r]
    print(f"load average {loadavg()}")
    run(args)
    print(f"load average {loadavg()}")


if __name__ == "__main__":
    main()

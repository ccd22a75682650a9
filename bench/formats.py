"""What record formats cost: decoding per record, and per delivery with 100 streams (in process).

Encodes the same records (about 200 bytes as JSON) with confluent-kafka's own
Avro, Protobuf and JSON Schema serializers against a loopback schema registry,
then times :class:`~streams.core.formats.record.RecordDecoder` on them (the work a
hub's fetch thread does once per record) and the whole path a record takes to
N live streams: decoding plus the hub's fan-out (``TopicHub.ingest``), against
the same records as JSON text. Decoding happens once per record, so its share of
a delivery shrinks as streams are added.

    python bench/formats.py --clients 100 --records 20000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.ingest import CollectingSink, hub_make
from streams.core.formats.record import RecordDecoder
from streams.core.formats.spec import RecordFormats
from streams.fanout.planning import StartPlan
from streams.fanout.subscriber import Subscriber, SubscriberOptions
from tests.support.kafka_messages import FakeMessage
from tests.support.schema_registry import registry_running

AVRO_SCHEMA = {
    "type": "record",
    "name": "Score",
    "fields": [
        {"name": "seq", "type": "long"},
        {"name": "match", "type": "string"},
        {"name": "minute", "type": "int"},
        {
            "name": "home",
            "type": {
                "type": "record",
                "name": "Team",
                "fields": [{"name": "name", "type": "string"}, {"name": "goals", "type": "int"}],
            },
        },
        {"name": "scorers", "type": {"type": "array", "items": "string"}},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}


def value(seq: int) -> dict[str, Any]:
    return {
        "seq": seq,
        "match": f"match-{seq % 50}",
        "minute": seq % 90,
        "home": {"name": "Lions of the North", "goals": seq % 5},
        "scorers": ["Ada Lovelace", "Grace Hopper", "Barbara Liskov"],
        "note": "second half under way, rain expected" if seq % 2 else None,
    }


def encoded(kind: str, url: str, count: int) -> list[bytes]:
    """``count`` records as a producer of ``kind`` writes them."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    if kind == "text":
        return [json.dumps(value(n), separators=(",", ":")).encode() for n in range(count)]
    client = SchemaRegistryClient({"url": url})
    context = SerializationContext("bench", MessageField.VALUE)
    if kind == "protobuf":
        from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

        from tests.support.protobuf_messages import Match

        serialize_proto = ProtobufSerializer(Match, client, {"use.deprecated.format": False})
        out = []
        for n in range(count):
            fields = value(n)
            message = Match(id=fields["match"], scorers=fields["scorers"], minute=fields["minute"], attendance=n)
            message.home.name, message.home.goals = fields["home"]["name"], fields["home"]["goals"]
            if fields["note"]:
                message.note = fields["note"]
            out.append(bytes(serialize_proto(message, context)))
        return out
    if kind == "avro":
        serialize = AvroSerializer(client, json.dumps(AVRO_SCHEMA))
    elif kind == "jsonschema":
        serialize = JSONSerializer(json.dumps({"type": "object"}), client)
    else:
        raise ValueError(kind)
    return [bytes(serialize(value(n), context)) for n in range(count)]


def decoder_for(kind: str, url: str) -> RecordDecoder:
    return RecordDecoder("bench", RecordFormats.of(kind, registry=url if kind != "text" else ""), {})


def decode_us(decoder: RecordDecoder, messages: list[FakeMessage]) -> float:
    started = time.perf_counter()
    for message in messages:
        decoder.record(message)
    return (time.perf_counter() - started) / len(messages) * 1e6


async def delivery_us(decoder: RecordDecoder, messages: list[FakeMessage], clients: int, batch: int) -> float:
    """Decoding plus fan-out to ``clients`` live streams, per delivery."""
    hub = hub_make(3)
    sinks = []
    for _ in range(clients):
        sink = CollectingSink()
        hub.subscribe(Subscriber(sink, SubscriberOptions(route="/bench")), StartPlan(dict(hub.next)), 2000)
        sinks.append(sink)
    elapsed = 0.0
    for index in range(0, len(messages), batch):
        chunk = messages[index : index + batch]
        started = time.perf_counter()
        hub.ingest([decoder.record(m) for m in chunk])
        elapsed += time.perf_counter() - started
        for sink in sinks:
            sink.writes.clear()
    delivered = sum(1 for _ in messages) * clients
    return elapsed / delivered * 1e6


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--batch-size", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5, help="Runs per case; the best is shown.")
    args = parser.parse_args()
    with registry_running() as registry:
        url = registry.registry.url
        rows = []
        for kind in ("text", "avro", "protobuf", "jsonschema"):
            data = encoded(kind, url, args.records)
            messages = [FakeMessage(d, offset=n // 3, partition=n % 3) for n, d in enumerate(data)]
            decoder = decoder_for(kind, url)
            decoder.record(messages[0])  # the schema, fetched once by id
            decode = min(decode_us(decoder, messages) for _ in range(args.repeat))
            per_delivery = min(
                [await delivery_us(decoder, messages, args.clients, args.batch_size) for _ in range(args.repeat)]
            )
            size = sum(len(d) for d in data) / len(data)
            rows.append((kind, size, decode, per_delivery))
    text_cost = rows[0][3]
    print(f"{args.records} records, {args.clients} live streams, batches of {args.batch_size}; best of {args.repeat}\n")
    print(
        "| format | bytes per record | decode per record | per delivery (decode + fan-out) | deliveries/s | vs JSON |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for kind, size, decode, per_delivery in rows:
        print(
            f"| {kind if kind != 'text' else 'JSON text'} | {size:.0f} | {decode:.2f} µs | {per_delivery:.3f} µs "
            f"| {1e6 / per_delivery:,.0f} | {per_delivery / text_cost:.2f}x |"
        )


if __name__ == "__main__":
    asyncio.run(main())

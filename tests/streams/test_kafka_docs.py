"""Every environment block of docs/kafka.md becomes librdkafka settings that librdkafka accepts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from streams.core.clusters import ClusterSpec, environment_properties

DOC = Path(__file__).resolve().parents[2] / "docs" / "kafka.md"
BLOCKS = re.findall(r"```sh\n(.*?)```", DOC.read_text(), flags=re.S)


def test_the_guide_has_a_block_for_each_kind_of_cluster() -> None:
    assert len(BLOCKS) >= 6


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{n}" for n in range(len(BLOCKS))])
def test_an_environment_block_is_a_configuration_librdkafka_accepts(block: str) -> None:
    environ = dict(line.split("=", 1) for line in block.strip().splitlines())
    assert all(name.startswith("KAFKA_") for name in environ)
    spec = ClusterSpec.of("default", environ["KAFKA_BOOTSTRAP_SERVERS"], environment_properties(environ))
    config = spec.client_config(environ)
    for name, value in environ.items():
        if name != "KAFKA_BOOTSTRAP_SERVERS":
            assert config[name[len("KAFKA_") :].lower().replace("_", ".")] == value
    if not config["bootstrap.servers"]:
        return  # the embedded broker: runstreams starts one
    # Files named by a block need not exist here; librdkafka checks names and values when a client is made.
    files = {k: v for k, v in config.items() if k.endswith(".location")}
    checked = {k: v for k, v in config.items() if k not in files}
    Consumer({**checked, "group.id": "docs-check", "log_level": 0}).close()

"""The configuration example of docs/formats.md applies as it is written."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from streams.models import Cluster, Topic
from tests.support.config_commands import applyconfig

DOC = Path(__file__).resolve().parents[2] / "docs" / "formats.md"


def test_the_formats_example_applies(db: None, tmp_path: Path) -> None:
    [block] = re.findall(r"```yaml\n(.*?)```", DOC.read_text(), flags=re.S)
    path = tmp_path / "formats.yaml"
    path.write_text(block)
    applyconfig(path)
    assert Cluster.objects.get(name="prod").registry.startswith("https://${env.SR_KEY}:${env.SR_SECRET}@")
    orders = Topic.objects.get(name="orders")
    assert (orders.value_format, orders.key_format) == ("avro", "avro")
    assert orders.formats().registry == Cluster.objects.get(name="prod").registry  # the cluster's
    readings: Any = Topic.objects.get(name="sensor-readings").formats()
    assert readings.value.name == "avro-inline"
    assert '"celsius"' in readings.value.inline_schema

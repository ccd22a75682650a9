"""The registry decoders ask the registry once for a schema id it does not know, not once per record."""

from __future__ import annotations

import struct

import pytest

from streams.core.formats import decoders
from streams.core.formats.decoders import AvroDecoder, JsonSchemaDecoder, ProtobufDecoder
from streams.core.formats.registry import Undecodable
from tests.support.schema_registry import registry_serve

UNKNOWN_ID = 424_242


def _wire(schema_id: int, body: bytes) -> bytes:
    return b"\x00" + struct.pack(">I", schema_id) + body


@pytest.mark.parametrize(
    ("decoder_class", "body"), [(AvroDecoder, b"\x02"), (JsonSchemaDecoder, b"{}"), (ProtobufDecoder, b"\x00")]
)
def test_an_unknown_schema_id_is_asked_for_once(decoder_class: type, body: bytes) -> None:
    with registry_serve() as registry:
        decode = decoder_class(registry.url, "t", "value")
        for _ in range(50):
            with pytest.raises(Undecodable, match=str(UNKNOWN_ID)):
                decode(_wire(UNKNOWN_ID, body))
        asked = [path for path in registry.requests if str(UNKNOWN_ID) in path]
        assert len(asked) == 1, asked


def test_an_unknown_schema_id_is_asked_again_once_forgotten(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(decoders, "UNKNOWN_SCHEMA_SECONDS", -1.0)  # forgotten at once
    with registry_serve() as registry:
        decode = AvroDecoder(registry.url, "t", "value")
        for _ in range(3):
            with pytest.raises(Undecodable):
                decode(_wire(UNKNOWN_ID, b"\x02"))
        assert len([path for path in registry.requests if str(UNKNOWN_ID) in path]) == 3

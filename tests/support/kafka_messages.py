"""A stand-in for confluent-kafka's ``Message``: the parts decoders and the pipeline's source read."""

from __future__ import annotations


class FakeMessage:
    def __init__(
        self, value: bytes | None, key: bytes | None = None, offset: int = 7, partition: int = 0, timestamp: int = 0
    ) -> None:
        self._value, self._key, self._offset, self._partition = value, key, offset, partition
        self._timestamp = timestamp or 1_700_000_000_000

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def timestamp(self) -> tuple[int, int]:
        return (1, self._timestamp)

    def headers(self) -> None:
        return None

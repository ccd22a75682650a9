"""Protobuf schemas from a registry as descriptors, built as confluent-kafka's Protobuf deserializer builds them.

confluent-kafka builds its descriptor pool with private helpers (``_init_pool``,
``_str_to_proto``, ``_resolve_named_schema``) and offers no public way to build one
from a schema's text. They are used here and nowhere else, so a release that moves
them breaks one function.
"""

from __future__ import annotations

from typing import Any


def protobuf_file(schema_text: str, *, client: Any = None, schema: Any = None) -> Any:
    """The ``FileDescriptor`` of a Protobuf schema's text (the registry's ``fmt="serialized"`` form).

    The well-known types go into the pool first; then, given the registry ``client`` and
    the registry's ``schema`` object, the schema's references, fetched from the registry;
    then the file itself.
    """
    from confluent_kafka.schema_registry._sync.protobuf import _resolve_named_schema
    from confluent_kafka.schema_registry.common.protobuf import _init_pool, _str_to_proto
    from google.protobuf.descriptor_pool import DescriptorPool

    pool = DescriptorPool()
    _init_pool(pool)
    if client is not None and schema is not None:
        _resolve_named_schema(schema, client, pool)
    file_proto = _str_to_proto("default", schema_text)
    pool.Add(file_proto)
    return pool.FindFileByName(file_proto.name)

"""Record formats: how a topic's values and keys become the JSON a page reads.

- :mod:`.spec`: the formats as data (``text``, ``json``, ``avro``, ``protobuf``,
  ``jsonschema``, ``avro-inline``) and the registry a topic or its cluster names;
- :mod:`.jsontext`: compact JSON, with Avro's logical types mapped to JSON;
- :mod:`.registry`: the schema registry client, one per registry, and what its failures mean;
- :mod:`.protobuf`: a registry's Protobuf schema as a descriptor, as confluent-kafka builds it;
- :mod:`.decoders`: one decoder per format, built on confluent-kafka's deserializers;
- :mod:`.record`: a fetched Kafka message decoded once into a :class:`~streams.core.records.Record`;
- :mod:`.describe`: Avro and Protobuf schemas as JSON Schema, for AsyncAPI.

Modules import in that order, each only from those above it (``spec`` first).
No Django here: decoding runs on the hubs' fetch threads.
"""

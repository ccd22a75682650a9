"""Protobuf message classes for tests, built from their descriptor here (no protoc needed).

The file they describe, as a producer's ``.proto`` would say it::

    syntax = "proto3";
    package sluice.test;

    message Heartbeat {            // message index 0
      string source = 1;
    }

    message Match {                // message index 1: records name it with a non-zero index
      enum Status { SCHEDULED = 0; LIVE = 1; FINISHED = 2; }
      message Team { string name = 1; int32 goals = 2; }
      string id = 1;
      Team home = 2;
      Team away = 3;
      repeated string scorers = 4;
      oneof detail { string note = 5; int32 minute = 6; }
      Status status = 7;
      int64 attendance = 8;
    }
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.message_factory import GetMessageClass

_F = descriptor_pb2.FieldDescriptorProto


def _field(message: Any, name: str, number: int, kind: int, *, label: int = _F.LABEL_OPTIONAL, **extra: Any) -> None:
    message.field.add(name=name, number=number, type=kind, label=label, json_name=_camel(name), **extra)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _file() -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto(name="sluice_test_match.proto", package="sluice.test", syntax="proto3")
    heartbeat = proto.message_type.add(name="Heartbeat")
    _field(heartbeat, "source", 1, _F.TYPE_STRING)
    match = proto.message_type.add(name="Match")
    status = match.enum_type.add(name="Status")
    for number, name in enumerate(["SCHEDULED", "LIVE", "FINISHED"]):
        status.value.add(name=name, number=number)
    team = match.nested_type.add(name="Team")
    _field(team, "name", 1, _F.TYPE_STRING)
    _field(team, "goals", 2, _F.TYPE_INT32)
    _field(match, "id", 1, _F.TYPE_STRING)
    _field(match, "home", 2, _F.TYPE_MESSAGE, type_name=".sluice.test.Match.Team")
    _field(match, "away", 3, _F.TYPE_MESSAGE, type_name=".sluice.test.Match.Team")
    _field(match, "scorers", 4, _F.TYPE_STRING, label=_F.LABEL_REPEATED)
    match.oneof_decl.add(name="detail")
    _field(match, "note", 5, _F.TYPE_STRING, oneof_index=0)
    _field(match, "minute", 6, _F.TYPE_INT32, oneof_index=0)
    _field(match, "status", 7, _F.TYPE_ENUM, type_name=".sluice.test.Match.Status")
    _field(match, "attendance", 8, _F.TYPE_INT64)
    return proto


_pool = descriptor_pool.DescriptorPool()
_pool.Add(_file())
Heartbeat: Any = GetMessageClass(_pool.FindMessageTypeByName("sluice.test.Heartbeat"))
Match: Any = GetMessageClass(_pool.FindMessageTypeByName("sluice.test.Match"))

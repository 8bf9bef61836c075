"""The public wire API: QMF v1 bodies <-> message values, for tools, tests and
anyone debugging a management bus.  Pure: no I/O.

>>> from qmf_async import wire
>>> schemas = wire.SchemaRegistry()
>>> wire.decode(b"AM2z\\x00\\x00\\x00\\x07\\x00\\x00\\x00\\x00\\x02OK", schemas)
[CommandComplete(seq=7, code=0, text='OK')]
"""

from __future__ import annotations

from ..errors import DecodeError, EncodeError
from ._amqp010 import WireArray, WireList, WireMap
from ._amqp10 import Amqp10Message, Described, Symbol, Timestamp, Typed10
from ._amqp10 import decode_message as decode_amqp10_message
from ._amqp10 import decode_value as decode_amqp10_value
from ._amqp10 import encode_message as encode_amqp10_message
from ._amqp10 import encode_value as encode_amqp10_value
from ._classcodec import (
    ClassCodec,
    RawObjectRecord,
    RecordReader,
    RecordWriter,
    plain_reader,
    reader_of,
)
from ._codec import (
    ObjectValue,
    SchemaRegistry,
    Typed,
    UnknownSchemaError,
    decode,
    encode,
    encode_schema,
)
from ._compile import Encoder
from ._messages import (
    AttachRequest,
    AttachResponse,
    BrokerRequest,
    BrokerResponse,
    ClassIndication,
    ClassQuery,
    CommandComplete,
    ConsoleAdded,
    EventIndication,
    GetQuery,
    Heartbeat,
    Message,
    MethodRequest,
    MethodResponse,
    ObjectRecord,
    PackageIndication,
    PackageQuery,
    SchemaRequest,
    SchemaResponse,
    UndecodedTail,
)
from ._record import HEADER_SIZE, RecordLayout, make_oid
from ._schema import SchemaArgument, SchemaClass, SchemaMethod, SchemaProperty, SchemaStatistic
from ._values import SEVERITY_NAMES, Access, ClassKey, ClassKind, ObjectId, QmfType

__all__ = [
    "decode",
    "encode",
    "SchemaRegistry",
    "DecodeError",
    "EncodeError",
    "UnknownSchemaError",
    "Message",
    "BrokerRequest",
    "BrokerResponse",
    "CommandComplete",
    "PackageQuery",
    "PackageIndication",
    "ClassQuery",
    "ClassIndication",
    "SchemaRequest",
    "SchemaResponse",
    "Heartbeat",
    "ObjectRecord",
    "RawObjectRecord",
    "EventIndication",
    "GetQuery",
    "MethodRequest",
    "MethodResponse",
    "AttachRequest",
    "AttachResponse",
    "ConsoleAdded",
    "UndecodedTail",
    "ObjectValue",
    "Typed",
    "WireMap",
    "WireList",
    "WireArray",
    "Access",
    "ClassKey",
    "ClassKind",
    "ClassCodec",
    "Encoder",
    "HEADER_SIZE",
    "ObjectId",
    "QmfType",
    "RecordLayout",
    "RecordReader",
    "RecordWriter",
    "SEVERITY_NAMES",
    "SchemaArgument",
    "SchemaClass",
    "SchemaMethod",
    "SchemaProperty",
    "SchemaStatistic",
    "encode_schema",
    "make_oid",
    "Amqp10Message",
    "Described",
    "Symbol",
    "Timestamp",
    "Typed10",
    "decode_amqp10_message",
    "decode_amqp10_value",
    "encode_amqp10_message",
    "encode_amqp10_value",
    "plain_reader",
    "reader_of",
]

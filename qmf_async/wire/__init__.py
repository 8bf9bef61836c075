"""The public wire API: QMF v1 bodies and QMF v2 map messages <-> message values,
for tools, tests and anyone debugging a management bus.  Pure: no I/O.

>>> from qmf_async import wire
>>> schemas = wire.SchemaRegistry()
>>> wire.decode(b"AM2z\\x00\\x00\\x00\\x07\\x00\\x00\\x00\\x00\\x02OK", schemas)
[CommandComplete(seq=7, code=0, text='OK')]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # at run time each name is imported on first use (__getattr__)
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
    from ._v2 import (
        V2_BODY_CONTENT_TYPES,
        V2AgentHeartbeat,
        V2AgentLocateRequest,
        V2AgentLocateResponse,
        V2Data,
        V2DataIndication,
        V2Event,
        V2EventIndication,
        V2Exception,
        V2Message,
        V2MethodRequest,
        V2MethodResponse,
        V2ObjectId,
        V2QueryRequest,
        V2QueryResponse,
        V2SchemaId,
        V2UnknownMessage,
        decode_v2,
        decode_v2_body,
        encode_v2,
        encode_v2_body,
    )
    from ._v2records import RefId, V2RecordConverter, v2_class_key, v2_default, v2_value
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
    "V2ObjectId",
    "V2SchemaId",
    "V2Data",
    "V2Event",
    "V2QueryRequest",
    "V2QueryResponse",
    "V2MethodRequest",
    "V2MethodResponse",
    "V2Exception",
    "V2AgentLocateRequest",
    "V2AgentLocateResponse",
    "V2AgentHeartbeat",
    "V2DataIndication",
    "V2EventIndication",
    "V2UnknownMessage",
    "V2Message",
    "decode_v2",
    "encode_v2",
    "decode_v2_body",
    "V2_BODY_CONTENT_TYPES",
    "encode_v2_body",
    "RefId",
    "V2RecordConverter",
    "v2_class_key",
    "v2_default",
    "v2_value",
]


#: each public name -> the module it is imported from on first use (``module:name``
#: when it is renamed here)
_LAZY: dict[str, str] = {
    "DecodeError": "..errors",
    "EncodeError": "..errors",
    "WireArray": "._amqp010",
    "WireList": "._amqp010",
    "WireMap": "._amqp010",
    "Amqp10Message": "._amqp10",
    "Described": "._amqp10",
    "Symbol": "._amqp10",
    "Timestamp": "._amqp10",
    "Typed10": "._amqp10",
    "decode_amqp10_message": "._amqp10:decode_message",
    "decode_amqp10_value": "._amqp10:decode_value",
    "encode_amqp10_message": "._amqp10:encode_message",
    "encode_amqp10_value": "._amqp10:encode_value",
    "ClassCodec": "._classcodec",
    "RawObjectRecord": "._classcodec",
    "RecordReader": "._classcodec",
    "RecordWriter": "._classcodec",
    "plain_reader": "._classcodec",
    "reader_of": "._classcodec",
    "ObjectValue": "._codec",
    "SchemaRegistry": "._codec",
    "Typed": "._codec",
    "UnknownSchemaError": "._codec",
    "decode": "._codec",
    "encode": "._codec",
    "encode_schema": "._codec",
    "Encoder": "._compile",
    "AttachRequest": "._messages",
    "AttachResponse": "._messages",
    "BrokerRequest": "._messages",
    "BrokerResponse": "._messages",
    "ClassIndication": "._messages",
    "ClassQuery": "._messages",
    "CommandComplete": "._messages",
    "ConsoleAdded": "._messages",
    "EventIndication": "._messages",
    "GetQuery": "._messages",
    "Heartbeat": "._messages",
    "Message": "._messages",
    "MethodRequest": "._messages",
    "MethodResponse": "._messages",
    "ObjectRecord": "._messages",
    "PackageIndication": "._messages",
    "PackageQuery": "._messages",
    "SchemaRequest": "._messages",
    "SchemaResponse": "._messages",
    "UndecodedTail": "._messages",
    "HEADER_SIZE": "._record",
    "RecordLayout": "._record",
    "make_oid": "._record",
    "SchemaArgument": "._schema",
    "SchemaClass": "._schema",
    "SchemaMethod": "._schema",
    "SchemaProperty": "._schema",
    "SchemaStatistic": "._schema",
    "V2_BODY_CONTENT_TYPES": "._v2",
    "V2AgentHeartbeat": "._v2",
    "V2AgentLocateRequest": "._v2",
    "V2AgentLocateResponse": "._v2",
    "V2Data": "._v2",
    "V2DataIndication": "._v2",
    "V2Event": "._v2",
    "V2EventIndication": "._v2",
    "V2Exception": "._v2",
    "V2Message": "._v2",
    "V2MethodRequest": "._v2",
    "V2MethodResponse": "._v2",
    "V2ObjectId": "._v2",
    "V2QueryRequest": "._v2",
    "V2QueryResponse": "._v2",
    "V2SchemaId": "._v2",
    "V2UnknownMessage": "._v2",
    "decode_v2": "._v2",
    "decode_v2_body": "._v2",
    "encode_v2": "._v2",
    "encode_v2_body": "._v2",
    "RefId": "._v2records",
    "V2RecordConverter": "._v2records",
    "v2_class_key": "._v2records",
    "v2_default": "._v2records",
    "v2_value": "._v2records",
    "SEVERITY_NAMES": "._values",
    "Access": "._values",
    "ClassKey": "._values",
    "ClassKind": "._values",
    "ObjectId": "._values",
    "QmfType": "._values",
}


if not TYPE_CHECKING:  # type checkers read the imports above; this is the run time

    def __getattr__(name: str) -> Any:
        """Import a public name on first use (PEP 562), then keep it as a plain global."""
        where = _LAZY.get(name)
        if where is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        module, _, attribute = where.partition(":")
        relative = module.lstrip(".")
        # __import__ (not importlib) so that ``python -X importtime`` shows the module
        source = __import__(relative, globals(), None, [attribute or name],
                            len(module) - len(relative))
        value = getattr(source, attribute or name)
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *_LAZY})

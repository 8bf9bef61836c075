"""QMF v1 message codec: bodies <-> lists of messages.  Pure: no I/O.

``decode(body, schemas)`` splits a body into its messages (several may be packed in
one AMQP body) and ``encode(messages, schemas)`` packs them back.  Content, event and
method-request bodies name a class and are decoded with that class's compiled codec
from the :class:`SchemaRegistry`.  Decoding never changes the registry: a schema
response decodes to a :class:`SchemaResponse`, and adding its class is the caller's
decision (:meth:`SchemaRegistry.add`, or :meth:`SchemaRegistry.learn` for every
schema response of a list of messages).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Literal, overload

import attrs

from ..errors import DecodeError, EncodeError, UnknownClassError
from ..frozen import frozen
from ._amqp010 import WireMap, decode_map, encode_map
from ._classcodec import (
    HEADER,
    MAGIC,
    ClassCodec,
    RawObjectRecord,
    RecordDecoder,
    args_tuple,
    put_str8,
    put_str16,
    specs_of,
)
from ._compile import Decoder, Encoder, FieldSpec, compile_decoder, compile_encoder
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
from ._schema import SchemaArgument, SchemaClass, SchemaMethod, SchemaProperty, SchemaStatistic
from ._values import ClassKey, ClassKind, QmfType, oid_from_wire

#: method targets by sequence number: the (class, method) or the method of an ``M``
_MethodTargets = Mapping[int, tuple[SchemaClass, SchemaMethod] | SchemaMethod]

__all__ = [
    "ClassCodec",
    "ObjectValue",
    "SchemaRegistry",
    "Typed",
    "UnknownSchemaError",
    "decode",
    "encode",
]

_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_STATUS_STR16 = struct.Struct(">IH")
_U32x2 = struct.Struct(">II")
_U64 = struct.Struct(">Q")
_EVENT_HDR = struct.Struct(">QB")
_SCHEMA_COUNTS = struct.Struct(">HHH")


class UnknownSchemaError(DecodeError):
    """A body names a class whose schema the registry does not hold.

    ``class_key`` names it; ``offset`` is where its message starts in the body.
    """

    def __init__(self, class_key: ClassKey, opcode: str, offset: int) -> None:
        super().__init__(f"no schema for {class_key} (needed to decode {opcode!r})", offset)
        self.class_key = class_key
        self.opcode = opcode


@frozen(slots=True)
class ObjectValue:
    """A value of QMF type ``object`` (20): an embedded, unmanaged object."""

    schema: SchemaClass
    properties: tuple[Any, ...]
    statistics: tuple[Any, ...]


@frozen(slots=True)
class Typed:
    """A value with an explicit QMF type, as embedded in an ``object`` value."""

    type: QmfType = attrs.field(converter=QmfType)
    value: Any


class SchemaRegistry:
    """The schemas a decoder knows, by class key; several hash versions of a class
    live side by side, each with its compiled :class:`ClassCodec`.  :func:`decode`
    only reads it: the caller adds the schemas it receives (:meth:`learn`)."""

    def __init__(self, schemas: Iterable[SchemaClass] = ()) -> None:
        self._by_key: dict[ClassKey, SchemaClass] = {}
        self._codec_of_key: dict[ClassKey, ClassCodec] = {}
        self._codecs: dict[bytes, ClassCodec] = {}
        self._object_codec = (self._decode_object_value, self._encode_object_value)
        self._typed_codecs: dict[QmfType, tuple[Decoder, Encoder]] = {}
        # opcode byte -> wire class key -> compiled record decoder (filled on first use)
        self._records: dict[bytes, dict[bytes, RecordDecoder]] = {
            b"c": {}, b"i": {}, b"g": {}}
        self._scanners: dict[bytes, dict[bytes, Callable[..., Any]]] = {
            b"c": {}, b"i": {}, b"g": {}}
        for schema in schemas:
            self.add(schema)

    def add(self, schema: SchemaClass) -> bool:
        """Add a schema; returns False when the same class key was already known
        (the first schema received for a key is kept)."""
        key = schema.class_key
        if key in self._by_key:
            return False
        self._by_key[key] = schema
        codec = ClassCodec(schema, self._object_codec)
        self._codecs[codec.wire_key] = codec
        self._codec_of_key[key] = codec
        return True

    def learn(self, messages: Iterable[object]) -> list[SchemaClass]:
        """Add the schema of every :class:`SchemaResponse` among ``messages`` (what
        :func:`decode` returned); returns the schemas that were new."""
        return [m.schema for m in messages
                if isinstance(m, SchemaResponse) and self.add(m.schema)]

    def get(self, key: ClassKey) -> SchemaClass | None:
        """The schema of ``key``, or None."""
        return self._by_key.get(key)

    def __contains__(self, key: object) -> bool:
        return key in self._by_key

    def __len__(self) -> int:
        return len(self._by_key)

    def __iter__(self) -> Iterator[SchemaClass]:
        return iter(list(self._by_key.values()))

    def packages(self) -> list[str]:
        """Names of the packages with at least one schema, sorted."""
        return sorted({k.package for k in self._by_key})

    def classes(self, package: str | None = None) -> list[SchemaClass]:
        """Schemas of ``package`` (all packages when None)."""
        return [s for k, s in self._by_key.items() if package is None or k.package == package]

    def find(self, name: str, package: str | None = None) -> list[SchemaClass]:
        """All schemas (every hash version) of class ``name``."""
        return [s for k, s in self._by_key.items()
                if k.name == name and (package is None or k.package == package)]

    def codec(self, schema: SchemaClass | ClassKey) -> ClassCodec:
        """The compiled codec of a schema (added to the registry when new).

        Raises:
            UnknownClassError: given a class key the registry does not hold.
        """
        key = schema if isinstance(schema, ClassKey) else schema.class_key
        found = self._codec_of_key.get(key)
        if found is None:
            if not isinstance(schema, SchemaClass):
                raise UnknownClassError(f"no schema for {key}")
            self.add(schema)
            found = self._codec_of_key[key]
        return found

    def request_writer(self, key: ClassKey, method: str
                       ) -> Callable[[int, bytes, Mapping[str, Any]], bytes]:
        """The :meth:`ClassCodec.request_writer` of ``method`` of class ``key``.

        Raises:
            EncodeError: as :func:`encode` of that ``M`` (no schema for ``key``, no
                such method).
        """
        found = self._codec_of_key.get(key)
        if found is None:
            raise EncodeError(f"no schema for {key}")
        return found.request_writer(method)

    def _codec_by_wire(self, wire_key: bytes) -> ClassCodec | None:
        return self._codecs.get(wire_key)

    def _record_decoder(self, opb: bytes, wire_key: bytes, lazy: bool = False
                        ) -> Callable[..., Any] | None:
        codec = self._codecs.get(wire_key)
        if codec is None:
            return None
        fn: Callable[..., Any]
        if lazy:
            fn = codec.record_scanner(opb.decode())
            self._scanners[opb][wire_key] = fn
        else:
            fn = codec.record_decoder(opb.decode())
            self._records[opb][wire_key] = fn
        return fn

    # values of QMF type 20 (object) embed a type code, then a class or a value
    def _decode_object_value(self, buf: bytes, pos: int) -> tuple[Any, int]:
        if pos >= len(buf):
            raise DecodeError("truncated object value", pos)
        inner = buf[pos]
        pos += 1
        if inner != QmfType.OBJECT:
            try:
                t = QmfType(inner)
            except ValueError:
                raise DecodeError(f"unknown QMF type code {inner} in object value", pos) from None
            dec = self._typed(t)[0]
            (value,), pos = dec(buf, pos)
            return Typed(t, value), pos
        key, kpos, pos = _read_class_key(buf, pos)
        codec = self._codecs.get(buf[kpos:pos])
        if codec is None:
            raise UnknownSchemaError(key, "object value", kpos)
        props, pos = codec.properties[0](buf, pos)
        stats, pos = codec.statistics[0](buf, pos)
        return ObjectValue(codec.schema, props, stats), pos

    def _encode_object_value(self, out: bytearray, value: Any) -> None:
        if isinstance(value, Typed):
            out.append(int(value.type))
            self._typed(value.type)[1](out, (value.value,))
            return
        if not isinstance(value, ObjectValue):
            raise EncodeError(f"object value expected, got {type(value).__name__}")
        codec = self.codec(value.schema)
        out.append(QmfType.OBJECT)
        out += codec.wire_key
        codec.properties[1](out, value.properties)
        codec.statistics[1](out, value.statistics)

    def _typed(self, t: QmfType) -> tuple[Decoder, Encoder]:
        found = self._typed_codecs.get(t)
        if found is None:
            spec: list[FieldSpec] = [("value", t, False)]
            found = (compile_decoder(spec, object_codec=self._object_codec),
                     compile_encoder(spec, object_codec=self._object_codec))
            self._typed_codecs[t] = found
        return found


# --------------------------------------------------------------------------- readers

def _str8(buf: bytes, pos: int) -> tuple[str, int]:
    if pos >= len(buf):
        raise DecodeError("truncated str8", pos)
    end = pos + 1 + buf[pos]
    if end > len(buf):
        raise DecodeError("str8 runs past the end of the body", pos)
    try:
        return buf[pos + 1:end].decode("utf-8"), end
    except UnicodeDecodeError as exc:
        raise DecodeError(f"invalid UTF-8 in str8: {exc.reason}", pos) from exc


def _str16(buf: bytes, pos: int) -> tuple[str, int]:
    if pos + 2 > len(buf):
        raise DecodeError("truncated str16", pos)
    end = pos + 2 + ((buf[pos] << 8) | buf[pos + 1])
    if end > len(buf):
        raise DecodeError("str16 runs past the end of the body", pos)
    try:
        return buf[pos + 2:end].decode("utf-8"), end
    except UnicodeDecodeError as exc:
        raise DecodeError(f"invalid UTF-8 in str16: {exc.reason}", pos) from exc


def _unpack(st: struct.Struct, buf: bytes, pos: int, what: str) -> tuple[Any, ...]:
    try:
        return st.unpack_from(buf, pos)
    except struct.error:
        raise DecodeError(f"truncated {what}", pos) from None


def _read_class_key(buf: bytes, pos: int) -> tuple[ClassKey, int, int]:
    """(key, start, end): the class key at ``pos``; ``buf[start:end]`` is its wire form."""
    start = pos
    pkg, pos = _str8(buf, pos)
    name, pos = _str8(buf, pos)
    if pos + 16 > len(buf):
        raise DecodeError("truncated class hash", pos)
    return ClassKey(pkg, name, bytes(buf[pos:pos + 16])), start, pos + 16


def _uuid(buf: bytes, pos: int) -> tuple[uuid.UUID, int]:
    if pos + 16 > len(buf):
        raise DecodeError("truncated uuid", pos)
    return uuid.UUID(bytes=bytes(buf[pos:pos + 16])), pos + 16


def _read_map(buf: bytes, pos: int) -> tuple[WireMap, int]:
    return decode_map(buf, pos, len(buf), 0)


def _decode_schema(buf: bytes, pos: int, seq: int) -> tuple[SchemaResponse, int]:
    if pos >= len(buf):
        raise DecodeError("truncated schema response", pos)
    kind_code = buf[pos]
    try:
        kind = ClassKind(kind_code)
    except ValueError:
        raise DecodeError(f"unknown schema kind {kind_code}", pos) from None
    key, _, pos = _read_class_key(buf, pos + 1)
    props: list[SchemaProperty] = []
    stats: list[SchemaStatistic] = []
    methods: list[SchemaMethod] = []
    args: list[SchemaArgument] = []
    if kind == ClassKind.OBJECT:
        pc, sc, mc = _unpack(_SCHEMA_COUNTS, buf, pos, "schema counts")
        pos += 6
        for _ in range(pc):
            m, pos = _read_map(buf, pos)
            props.append(SchemaProperty.from_map(m))
        for _ in range(sc):
            m, pos = _read_map(buf, pos)
            stats.append(SchemaStatistic.from_map(m))
        for _ in range(mc):
            m, pos = _read_map(buf, pos)
            kwargs, argc = SchemaMethod.header_from_map(m)
            margs = []
            for _ in range(argc):
                a, pos = _read_map(buf, pos)
                margs.append(SchemaArgument.from_map(a))
            methods.append(SchemaMethod(arguments=margs, **kwargs))
    else:
        (ac,) = _unpack(_U16, buf, pos, "event argument count")
        pos += 2
        for _ in range(ac):
            a, pos = _read_map(buf, pos)
            args.append(SchemaArgument.from_map(a))
    schema = SchemaClass(kind, key, props, stats, methods, args)
    return SchemaResponse(seq, schema), pos


def _decode_method_request(buf: bytes, pos: int, seq: int,
                           schemas: SchemaRegistry) -> tuple[MethodRequest, int]:
    n = len(buf)
    if pos + 16 > n:
        raise DecodeError("truncated object id", pos)
    oid = oid_from_wire(buf[pos:pos + 16])
    found = _request_of_known_class(buf, pos + 16, schemas)
    if found is not None:
        key, name, pos, decoder = found
    else:
        key, kstart, kend = _read_class_key(buf, pos + 16)
        name, pos = _str8(buf, kend)
        codec = schemas._codec_by_wire(buf[kstart:kend])
        method = codec.schema.find_method(name) if codec is not None else None
        decoder = None
        if method is not None and codec is not None:
            dec, _, names = codec.method_args(method, output=False)
            decoder = (dec, names)
    if decoder is not None:
        dec, names = decoder
        try:
            values, end = dec(buf, pos)
        except DecodeError:
            values, end = None, -1
        # Arguments are delimited by the schema; if what follows is not another
        # message, keep the whole remainder raw as qpidd would read it.
        if values is not None and (end == n or buf[end:end + 3] == MAGIC):
            return MethodRequest(seq, oid, key, name, dict(zip(names, values, strict=False))), end
    return MethodRequest(seq, oid, key, name, None, bytes(buf[pos:])), n


def _request_of_known_class(buf: bytes, kstart: int, schemas: SchemaRegistry
                            ) -> tuple[ClassKey, str, int, tuple[Decoder, tuple[str, ...]] | None
                                       ] | None:
    """For an ``M`` naming a class of ``schemas``: (class key, method name, where the
    arguments start, (argument decoder, names) or None for a method the class
    lacks), found by the class key and name bytes; None for anything else (the
    caller then reads the key and name field by field, with their errors)."""
    n = len(buf)
    if kstart >= n:
        return None
    kend = kstart + 1 + buf[kstart]
    if kend >= n:
        return None
    kend += 17 + buf[kend]
    if kend >= n:
        return None
    codec = schemas._codecs.get(buf[kstart:kend])
    if codec is None:
        return None
    pos = kend + 1 + buf[kend]
    if pos > n:
        return None
    raw_name = buf[kend + 1:pos]
    requests = codec._requests
    try:
        name, decoder = requests[raw_name]
    except KeyError:
        name, _ = _str8(buf, kend)  # DecodeError for a name that is not UTF-8
        method = codec.schema.find_method(name)
        decoder = None
        if method is not None:
            dec, _, names = codec.method_args(method, output=False)
            decoder = (dec, names)
        if len(requests) < 256:  # names a peer made up are not all kept
            requests[raw_name] = (name, decoder)
    return codec.class_key, name, pos, decoder


def _decode_method_response(buf: bytes, pos: int, seq: int, schemas: SchemaRegistry,
                            methods: _MethodTargets | None
                            ) -> tuple[MethodResponse, int]:
    n = len(buf)
    if pos + 6 <= n:  # status and the length of a str16 text
        status, size = _STATUS_STR16.unpack_from(buf, pos)
        pos += 4
        fits = pos + 2 + size <= n
    else:
        (status,) = _unpack(_U32, buf, pos, "method status")
        pos += 4
        fits = False
    short = False
    if fits:
        if buf[pos + 2:pos + 4] == b"OK" and size == 2:
            text, pos = "OK", pos + 4
        else:
            text, pos = _str16(buf, pos)
    else:
        # qpidd writes the status text of an unknown-method error as str8
        text, pos = _str8(buf, pos)
        short = True
    target = methods.get(seq) if methods else None
    if target is not None and status == 0:
        if isinstance(target, tuple):
            schema, method = target
        else:
            schema, method = None, target
        if schema is not None:
            dec, _, names = schemas.codec(schema).method_args(method, output=True)
        else:
            dec, _, names = _standalone_args(method)
        values, end = dec(buf, pos)
        if end != n:
            raise DecodeError(f"{n - end} bytes after the output arguments", end)
        arguments = dict(zip(names, values, strict=False))
        return MethodResponse(seq, status, text, arguments, b"", short), end
    return MethodResponse(seq, status, text, None, bytes(buf[pos:]), short), n


_STANDALONE: dict[tuple[Any, ...], tuple[Decoder, Encoder, tuple[str, ...]]] = {}


def _standalone_args(method: SchemaMethod, output: bool = True
                     ) -> tuple[Decoder, Encoder, tuple[str, ...]]:
    """Codec for a method's arguments without a registry (no object-typed args)."""
    args = method.out_args if output else method.in_args
    specs = specs_of(args)
    # Keyed by what the codec depends on: schema records hold ``extra`` maps and are
    # not hashable themselves.
    key = (tuple(specs), output)
    found = _STANDALONE.get(key)
    if found is None:
        found = (compile_decoder(specs, presence=False), compile_encoder(specs, presence=False),
                 tuple(a.name for a in args))
        if len(_STANDALONE) < 4096:
            _STANDALONE[key] = found
    return found


def _decode_other(op: str, buf: bytes, pos: int, seq: int, start: int, schemas: SchemaRegistry,
                  methods: Mapping[int, Any] | None) -> tuple[Message, int]:
    """Decode one message other than ``c``/``i``/``g``/``e`` after its header."""
    n = len(buf)
    if op == "h":
        (ts,) = _unpack(_U64, buf, pos, "heartbeat")
        return Heartbeat(ts, seq), pos + 8
    if op == "z":
        (code,) = _unpack(_U32, buf, pos, "completion code")
        text, pos = _str8(buf, pos + 4)
        return CommandComplete(seq, code, text), pos
    if op == "m":
        return _decode_method_response(buf, pos, seq, schemas, methods)
    if op == "M":
        return _decode_method_request(buf, pos, seq, schemas)
    if op == "G":
        query, pos = _read_map(buf, pos)
        return GetQuery(seq, query), pos
    if op == "s":
        return _decode_schema(buf, pos, seq)
    if op == "q":
        if pos >= n:
            raise DecodeError("truncated class indication", pos)
        kind = buf[pos]
        if kind not in (1, 2):
            raise DecodeError(f"unknown class kind {kind}", pos)
        key, _, pos = _read_class_key(buf, pos + 1)
        return ClassIndication(seq, kind, key), pos
    if op == "S":
        key, _, pos = _read_class_key(buf, pos)
        return SchemaRequest(seq, key), pos
    if op == "p":
        name, pos = _str8(buf, pos)
        return PackageIndication(seq, name), pos
    if op == "Q":
        name, pos = _str8(buf, pos)
        return ClassQuery(seq, name), pos
    if op == "P":
        return PackageQuery(seq), pos
    if op == "B":
        return BrokerRequest(seq), pos
    if op == "b":
        bid, pos = _uuid(buf, pos)
        return BrokerResponse(bid, seq), pos
    if op == "A":
        label, pos = _str8(buf, pos)
        sysid, pos = _uuid(buf, pos)
        bb, ab = _unpack(_U32x2, buf, pos, "attach banks")
        return AttachRequest(seq, label, sysid, bb, ab), pos + 8
    if op == "a":
        bb, ab = _unpack(_U32x2, buf, pos, "attach banks")
        return AttachResponse(seq, bb, ab), pos + 8
    if op == "x":
        return ConsoleAdded(seq), pos
    raise DecodeError(f"unknown opcode {op!r}", start + 3)


def _decode(buf: bytes, schemas: SchemaRegistry, methods: Mapping[int, Any] | None,
            defer_unknown: bool, lazy: bool = False) -> list[Any]:
    n = len(buf)
    if n == 0:
        raise DecodeError("empty body", 0)
    out: list[Message] = []
    append = out.append
    records: dict[bytes, dict[bytes, Callable[..., Any]]] = (
        schemas._scanners if lazy else schemas._records)
    unpack_header = HEADER.unpack_from
    pos = 0
    while pos < n:
        start = pos
        if n - pos < 8:
            raise DecodeError("truncated message header", pos)
        magic, opb, seq = unpack_header(buf, pos)
        if magic != MAGIC:
            raise DecodeError("bad magic (not a QMF v1 'AM2' message)", pos)
        pos += 8
        table = records.get(opb)
        if table is not None:  # c, i, g: the hot path
            if pos + 2 > n:
                raise DecodeError("truncated class key", pos)
            kend = pos + 1 + buf[pos]
            if kend >= n:
                raise DecodeError("truncated class key", pos)
            kend += 17 + buf[kend]
            fn = table.get(buf[pos:kend])
            if fn is None:
                fn = schemas._record_decoder(opb, buf[pos:kend], lazy)
                if fn is None:
                    key, _, _ = _read_class_key(buf, pos)
                    if defer_unknown:
                        append(UndecodedTail(opb.decode(), seq, key, buf, start))
                        return out
                    raise UnknownSchemaError(key, opb.decode(), start)
            if lazy:  # the scanner takes this record and the like ones that follow
                pos = fn(buf, start, kend, seq, out)
            else:
                msg, pos = fn(buf, kend, seq)
                append(msg)
        elif opb == b"e":
            key, kstart, pos = _read_class_key(buf, pos)
            codec = schemas._codecs.get(buf[kstart:pos])
            if codec is None:
                if defer_unknown:
                    append(UndecodedTail("e", seq, key, buf, start))
                    return out
                raise UnknownSchemaError(key, "e", start)
            ts, sev = _unpack(_EVENT_HDR, buf, pos, "event header")
            values, pos = codec.event[0](buf, pos + 9)
            names = [a.name for a in codec.schema.arguments]
            arguments = dict(zip(names, values, strict=False))
            append(EventIndication(seq, codec.schema, ts, sev, arguments))
        else:
            msg, pos = _decode_other(opb.decode("latin-1"), buf, pos, seq, start, schemas, methods)
            append(msg)
    return out


@overload
def decode(body: bytes, schemas: SchemaRegistry, *,
           methods: Mapping[int, Any] | None = None,
           defer_unknown: bool = False, lazy: Literal[False] = False) -> list[Message]: ...


@overload
def decode(body: bytes, schemas: SchemaRegistry, *,
           methods: Mapping[int, Any] | None = None,
           defer_unknown: bool = False, lazy: bool) -> list[Message | RawObjectRecord]: ...


def decode(body: bytes, schemas: SchemaRegistry, *,
           methods: Mapping[int, Any] | None = None,
           defer_unknown: bool = False, lazy: bool = False) -> list[Any]:
    """Decode every QMF message of an AMQP body.

    ``methods`` maps a sequence number to the :class:`SchemaMethod` (or a
    ``(SchemaClass, SchemaMethod)`` pair) a method response answers, so that its
    output arguments are decoded; without it they stay raw.  With
    ``defer_unknown``, a message naming an unknown class ends the list with an
    :class:`UndecodedTail` instead of raising.  With ``lazy``, ``c``/``i``/``g``
    records come as :class:`~qmf_async.wire.RawObjectRecord`: their framing is
    checked, their values are decoded when read.  ``schemas`` is only read: a
    schema response in ``body`` does not add its class (see
    :meth:`SchemaRegistry.learn`).

    Raises:
        DecodeError: the body is malformed (:class:`UnknownSchemaError` when it
            names a class that ``schemas`` does not hold).
    """
    buf = body if type(body) is bytes else bytes(body)
    try:
        return _decode(buf, schemas, methods, defer_unknown, lazy)
    except DecodeError:
        raise
    except RecursionError as exc:
        raise DecodeError("nesting too deep") from exc
    except (ValueError, TypeError, IndexError, OverflowError, struct.error,
            UnknownClassError) as exc:
        raise DecodeError(f"malformed body: {exc}") from exc


# --------------------------------------------------------------------------- writers

def encode_schema(out: bytearray, schema: SchemaClass) -> None:
    out.append(int(schema.kind))
    out += schema.class_key.to_wire()
    if schema.kind == ClassKind.OBJECT:
        out += _SCHEMA_COUNTS.pack(len(schema.properties), len(schema.statistics),
                                   len(schema.methods))
        for p in schema.properties:
            encode_map(out, p.to_map())
        for s in schema.statistics:
            encode_map(out, s.to_map())
        for m in schema.methods:
            encode_map(out, m.to_map())
            for a in m.arguments:
                encode_map(out, a.to_map())
    else:
        out += _U16.pack(len(schema.arguments))
        for a in schema.arguments:
            encode_map(out, a.to_map())


def _encode_one(out: bytearray, msg: Message, schemas: SchemaRegistry,
                methods: Mapping[int, Any] | None) -> None:
    op = msg.OPCODE
    if isinstance(msg, UndecodedTail):
        out += msg.remaining
        return
    seq = msg.seq
    if not isinstance(seq, int) or not 0 <= seq <= 0xFFFFFFFF:
        raise EncodeError(f"sequence number {seq!r} is not a uint32")
    out += HEADER.pack(MAGIC, op.encode(), seq)
    if isinstance(msg, ObjectRecord):
        codec = schemas.codec(msg.schema)
        out += codec.wire_key
        codec.record_encoder(op)(out, msg.timestamp, msg.created, msg.deleted, msg.object_id,
                                 msg.properties, msg.statistics)
    elif isinstance(msg, Heartbeat):
        out += struct.pack(">Q", msg.timestamp)
    elif isinstance(msg, EventIndication):
        codec = schemas.codec(msg.schema)
        out += codec.wire_key
        out += _EVENT_HDR.pack(msg.timestamp, msg.severity)
        names = tuple(a.name for a in msg.schema.arguments)
        codec.event[1](out, args_tuple(names, msg.arguments, str(msg.class_key)))
    elif isinstance(msg, CommandComplete):
        out += _U32.pack(msg.code)
        put_str8(out, msg.text)
    elif isinstance(msg, MethodResponse):
        out += _U32.pack(msg.status)
        (put_str8 if msg.short_text else put_str16)(out, msg.text)
        if msg.arguments is None:
            out += msg.raw_arguments
        else:
            target = methods.get(seq) if methods else None
            if target is None:
                raise EncodeError("encoding method response arguments needs the method "
                                  "(pass methods={seq: method})")
            if isinstance(target, tuple):
                _, enc, names = schemas.codec(target[0]).method_args(target[1], output=True)
            else:
                _, enc, names = _standalone_args(target)
            enc(out, args_tuple(names, msg.arguments, "method response"))
    elif isinstance(msg, MethodRequest):
        out += msg.object_id.to_bytes()
        out += msg.class_key.to_wire()
        put_str8(out, msg.method)
        if msg.arguments is None:
            out += msg.raw_arguments
        else:
            codec = schemas.codec(msg.class_key)
            _, enc, names = codec.method_args(codec.schema.method(msg.method), output=False)
            enc(out, args_tuple(names, msg.arguments, msg.method))
    elif isinstance(msg, GetQuery):
        encode_map(out, msg.query)
    elif isinstance(msg, SchemaResponse):
        encode_schema(out, msg.schema)
    elif isinstance(msg, ClassIndication):
        out.append(int(msg.kind))
        out += msg.class_key.to_wire()
    elif isinstance(msg, SchemaRequest):
        out += msg.class_key.to_wire()
    elif isinstance(msg, (PackageIndication,)):
        put_str8(out, msg.package)
    elif isinstance(msg, ClassQuery):
        put_str8(out, msg.package)
    elif isinstance(msg, BrokerResponse):
        out += msg.broker_id.bytes
    elif isinstance(msg, AttachRequest):
        put_str8(out, msg.label)
        out += msg.system_id.bytes
        out += _U32x2.pack(msg.broker_bank, msg.agent_bank)
    elif isinstance(msg, AttachResponse):
        out += _U32x2.pack(msg.broker_bank, msg.agent_bank)
    elif isinstance(msg, (BrokerRequest, PackageQuery, ConsoleAdded)):
        pass
    else:  # pragma: no cover - guarded by the Message union
        raise EncodeError(f"cannot encode {type(msg).__name__}")


def encode(messages: Message | Iterable[Message], schemas: SchemaRegistry | None = None, *,
           methods: Mapping[int, Any] | None = None) -> bytes:
    """Encode one message or several (packed in one body).

    Raises:
        EncodeError: a value does not fit its type, or a needed schema is missing.
    """
    if schemas is None:
        schemas = SchemaRegistry()
    if not isinstance(messages, Iterable):
        messages = (messages,)
    out = bytearray()
    try:
        for msg in messages:
            _encode_one(out, msg, schemas, methods)
    except EncodeError:
        raise
    except (UnknownClassError, struct.error, OverflowError, UnicodeEncodeError) as exc:
        raise EncodeError(str(exc)) from exc
    return bytes(out)

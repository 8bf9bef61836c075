"""One compiled codec per class (schema hash): every face of a class's bytes.

A :class:`ClassCodec` holds, compiled once and on first use, what reading and writing
a class's messages needs:

* the **eager face**: whole-record decoders (``c``/``i``/``g`` to
  :class:`~qmf_async.wire.ObjectRecord`), section, event and method-argument decoders;
* the **lazy face**: record scanners (framing only, to
  :class:`~qmf_async.wire.RawObjectRecord`), per-value readers and section decoders
  of kept record bytes, name tables (what a console proxy reads through);
* the **encoder face**: whole-record encoders, section encoders (an agent caches the
  encoded sections of its objects and writes records from them with
  :meth:`ClassCodec.record_writer`), method request and response writers.

Pure: no I/O.  This module does not import :mod:`~qmf_async.wire._codec` (which
holds the registry and the message codec).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from ..errors import EncodeError, UnknownClassError
from ..frozen import frozen
from ._compile import (
    Decoder,
    Encoder,
    FieldSpec,
    ObjectValueCodec,
    RefScanner,
    _slot_setters,
    compile_decoder,
    compile_encoder,
    compile_record_decoder,
    compile_record_encoder,
    compile_ref_scanner,
)
from ._messages import ObjectRecord
from ._record import (
    HEADER_SIZE,
    Getter,
    RecordLayout,
    compile_record_scanner,
    compile_seek_getter,
    field_getters,
)
from ._schema import SchemaArgument, SchemaClass, SchemaMethod, SchemaProperty, SchemaStatistic
from ._values import ClassKey, ObjectId

__all__ = [
    "HEADER",
    "MAGIC",
    "ClassCodec",
    "RawObjectRecord",
    "RecordReader",
    "RecordWriter",
    "plain_reader",
    "reader_of",
    "specs_of",
]

MAGIC = b"AM2"
HEADER = struct.Struct(">3scI")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")

_pack_header = RecordLayout.pack_header
RecordWriter = Callable[[bytearray, int, int, int, bytes, "bytes | Sequence[Any] | None",
                          "bytes | Sequence[Any] | None"], None]
Scanner = Callable[[bytes, int, int, int, list[Any]], int]
RecordDecoder = Callable[[bytes, int, int], tuple[ObjectRecord, int]]


def specs_of(items: Iterable[SchemaProperty | SchemaStatistic | SchemaArgument]) -> list[FieldSpec]:
    """(name, type, optional) of each field, the compilers' input."""
    return [(i.name, i.type, bool(getattr(i, "optional", False))) for i in items]


class ClassCodec:
    """The compiled decoders, scanners, value readers and encoders of one schema
    (compiled lazily, once).

    Built by a :class:`~qmf_async.wire.SchemaRegistry` (one per class key); a codec
    built with no ``object_codec`` reads and writes every type except ``object``
    values (those raise :class:`~qmf_async.DecodeError` / ``EncodeError``).
    """

    __slots__ = (
        "_event",
        "_methods",
        "_object_codec",
        "_pdec",
        "_props",
        "_pspecs",
        "_record_encoders",
        "_record_writers",
        "_records",
        "_refscan",
        "_refscan_made",
        "_requests",
        "_scanners",
        "_sdec",
        "_sspecs",
        "_stats",
        "_writers",
        "class_key",
        "methods",
        "pget",
        "pnames",
        "props",
        "schema",
        "sget",
        "snames",
        "stats",
        "wire_key",
    )

    def __init__(self, schema: SchemaClass, object_codec: ObjectValueCodec | None = None) -> None:
        self.schema = schema
        self.class_key = schema.class_key
        self.wire_key = schema.class_key.to_wire()
        self._object_codec = object_codec
        self._props: tuple[Decoder, Encoder] | None = None
        self._stats: tuple[Decoder, Encoder] | None = None
        self._event: tuple[Decoder, Encoder] | None = None
        self._methods: dict[tuple[str, bool], tuple[Decoder, Encoder, tuple[str, ...]]] = {}
        self._records: dict[str, RecordDecoder] = {}
        self._record_encoders: dict[str, Callable[..., None]] = {}
        self._scanners: dict[str, Scanner] = {}
        # method name as received (str8 bytes) -> (name, (input decoder, names) or None
        # for a name the schema lacks): what decoding an ``M`` looks up
        self._requests: dict[bytes, tuple[str, tuple[Decoder, tuple[str, ...]] | None]] = {}
        self._writers: dict[tuple[str, str], Callable[..., bytes]] = {}
        self._record_writers: dict[str, RecordWriter] = {}
        # the lazy face: names to positions, getters of values at fixed offsets now
        # (the others compiled on first read), section decoders on first use
        self.props = {p.name: i for i, p in enumerate(schema.properties)}
        self.stats = {s.name: i for i, s in enumerate(schema.statistics)}
        self.methods = {m.name: m for m in schema.methods}
        self.pnames = tuple(p.name for p in schema.properties)
        self.snames = tuple(s.name for s in schema.statistics)
        self._pspecs = specs_of(schema.properties)
        self._sspecs = specs_of(schema.statistics)
        self.pget: list[Getter | None] = field_getters(self._pspecs, True)
        self.sget: list[Getter | None] = field_getters(self._sspecs, False)
        self._pdec: Decoder | None = None
        self._sdec: Decoder | None = None
        # compiled on first use; None then: no scanner for this class (no reference,
        # or an ``object`` value)
        self._refscan: RefScanner | None = None
        self._refscan_made = False

    def __repr__(self) -> str:
        return f"<ClassCodec {self.class_key}>"

    # ------------------------------------------------------------------ sections
    def _compile(self, specs: list[FieldSpec], presence: bool, name: str
                 ) -> tuple[Decoder, Encoder]:
        oc = self._object_codec
        return (compile_decoder(specs, presence=presence, object_codec=oc, name=name),
                compile_encoder(specs, presence=presence, object_codec=oc,
                                name=name.replace("decode", "encode", 1),
                                label=str(self.class_key)))

    @property
    def properties(self) -> tuple[Decoder, Encoder]:
        """(decoder, encoder) of the presence octets and properties section."""
        if self._props is None:
            self._props = self._compile(self._pspecs, True, "decode_props")
        return self._props

    @property
    def statistics(self) -> tuple[Decoder, Encoder]:
        """(decoder, encoder) of the statistics section."""
        if self._stats is None:
            self._stats = self._compile(self._sspecs, False, "decode_stats")
        return self._stats

    @property
    def event(self) -> tuple[Decoder, Encoder]:
        """(decoder, encoder) of an event's arguments."""
        if self._event is None:
            self._event = self._compile(specs_of(self.schema.arguments), False, "decode_event")
        return self._event

    def method_args(self, method: SchemaMethod, output: bool
                    ) -> tuple[Decoder, Encoder, tuple[str, ...]]:
        """Codec of a method's input (I, IO) or output (O, IO) arguments."""
        key = (method.name, output)
        found = self._methods.get(key)
        if found is None:
            args = method.out_args if output else method.in_args
            dec, enc = self._compile(specs_of(args), False, "decode_args")
            found = (dec, enc, tuple(a.name for a in args))
            self._methods[key] = found
        return found

    # ------------------------------------------------------------------ eager face
    def record_decoder(self, opcode: str) -> RecordDecoder:
        """The compiled decoder of a ``c``/``i``/``g`` record after its class key:
        ``(buf, pos, seq) -> (ObjectRecord, end)``.  Raises only DecodeError."""
        fn = self._records.get(opcode)
        if fn is None:
            fn = compile_record_decoder(opcode, self._pspecs, self._sspecs, ObjectRecord,
                                        self.schema, self._object_codec)
            self._records[opcode] = fn
        return fn

    # ------------------------------------------------------------------ lazy face
    def record_scanner(self, opcode: str) -> Scanner:
        """The compiled scanner of ``c``/``i``/``g`` records (values decoded on access),
        see :func:`~qmf_async.wire._record.compile_record_scanner`."""
        fn = self._scanners.get(opcode)
        if fn is None:
            fn = compile_record_scanner(opcode, self, RawObjectRecord, self._object_codec)
            self._scanners[opcode] = fn
        return fn

    def decode_props(self, raw: bytes) -> tuple[Any, ...]:
        """Every property of kept ``c``/``g`` record bytes.

        Raises:
            DecodeError: a value is malformed.
        """
        dec = self._pdec
        if dec is None:
            dec = self._pdec = self.properties[0]
        return dec(raw, HEADER_SIZE)[0]

    def ref_offsets(self, raw: bytes) -> tuple[int | None, ...] | None:
        """Where each reference property of kept ``c``/``g`` record bytes starts (None
        for one absent), in schema order of the references, found without decoding
        the other values; None when the class has no reference property or has an
        ``object`` one.  A reference is 16 bytes: it can be rewritten in place.

        Raises:
            DecodeError: the properties are truncated.
        """
        if not self._refscan_made:
            self._refscan = compile_ref_scanner(self._pspecs, label=str(self.class_key))
            self._refscan_made = True
        scan = self._refscan
        return None if scan is None else scan(raw, HEADER_SIZE)

    def decode_stats(self, raw: bytes, sofs: int) -> tuple[Any, ...]:
        """Every statistic of kept ``i``/``g`` record bytes (statistics at ``sofs``).

        Raises:
            DecodeError: a value is malformed.
        """
        dec = self._sdec
        if dec is None:
            dec = self._sdec = self.statistics[0]
        return dec(raw, sofs)[0]

    def _seek(self, stats: bool, i: int) -> Getter:
        specs = self._sspecs if stats else self._pspecs
        get = compile_seek_getter(specs, not stats, i, self._object_codec, str(self.class_key))
        (self.sget if stats else self.pget)[i] = get
        return get

    def prop(self, raw: bytes, i: int) -> Any:
        """Property ``i`` of kept ``c``/``g`` record bytes (None: an absent optional
        property).  Raises DecodeError."""
        get = self.pget[i] or self._seek(False, i)
        return get(raw, HEADER_SIZE)

    def stat(self, raw: bytes, sofs: int, i: int) -> Any:
        """Statistic ``i`` of kept ``i``/``g`` record bytes.  Raises DecodeError."""
        get = self.sget[i] or self._seek(True, i)
        return get(raw, sofs)

    # ------------------------------------------------------------------ encoder face
    def record_encoder(self, opcode: str) -> Callable[..., None]:
        """The compiled encoder of a ``c``/``i``/``g`` record after its class key:
        ``(out, timestamp, created, deleted, object_id, properties, statistics)``."""
        fn = self._record_encoders.get(opcode)
        if fn is None:
            fn = compile_record_encoder(opcode, self._pspecs, self._sspecs, self._object_codec,
                                        str(self.class_key))
            self._record_encoders[opcode] = fn
        return fn

    def record_prefix(self, opcode: str, seq: int) -> bytes:
        """The message header and class key that start a ``c``/``i``/``g`` message.

        Raises:
            struct.error: ``seq`` is not a uint32.
        """
        return HEADER.pack(MAGIC, opcode.encode(), seq) + self.wire_key

    def record_writer(self, opcode: str) -> RecordWriter:
        """``write(out, timestamp, created, deleted, object_id_bytes, properties,
        statistics)``: append one ``opcode`` record after its class key (see
        :meth:`record_prefix`) to ``out``: header, then for ``c``/``g`` the
        properties, for ``i``/``g`` the statistics.  A part given as ``bytes`` is a
        section as the section encoder wrote it (an agent's cached encoding) and is
        copied; a sequence of values is encoded (cached per opcode).

        The writer raises EncodeError when a value does not fit its type or a part
        the opcode needs is None (also struct.error, OverflowError or
        UnicodeEncodeError from the value encoders).
        """
        found = self._record_writers.get(opcode)
        if found is None:
            found = self._record_writers[opcode] = self._record_writer(opcode)
        return found

    def _record_writer(self, opcode: str) -> RecordWriter:
        head = _pack_header
        enc_props = self.properties[1] if opcode != "i" else None
        enc_stats = self.statistics[1] if opcode != "c" else None
        no_props = f"{opcode!r} record needs properties"
        no_stats = f"{opcode!r} record needs statistics"

        def write(out: bytearray, timestamp: int, created: int, deleted: int, object_id: bytes,
                  properties: bytes | Sequence[Any] | None,
                  statistics: bytes | Sequence[Any] | None) -> None:
            out += head(timestamp, created, deleted, object_id)
            if enc_props is not None:
                if type(properties) is bytes:
                    out += properties
                elif properties is None:
                    raise EncodeError(no_props)
                else:
                    enc_props(out, properties)
            if enc_stats is not None:
                if type(statistics) is bytes:
                    out += statistics
                elif statistics is None:
                    raise EncodeError(no_stats)
                else:
                    enc_stats(out, statistics)
        return write

    def write_record(self, out: bytearray, opcode: str, timestamp: int, created: int,
                     deleted: int, object_id: bytes,
                     properties: bytes | Sequence[Any] | None,
                     statistics: bytes | Sequence[Any] | None) -> None:
        """Append one record after its class key to ``out``, as
        ``record_writer(opcode)(...)`` does.

        Raises:
            EncodeError: as the writer of :meth:`record_writer`.
        """
        self.record_writer(opcode)(out, timestamp, created, deleted, object_id, properties,
                                   statistics)

    def request_writer(self, method: str) -> Callable[[int, bytes, Mapping[str, Any]], bytes]:
        """``write(seq, object_id_bytes, arguments) -> body``: one ``M`` calling
        ``method`` of this class, the bytes :func:`~qmf_async.wire.encode` writes for it
        (cached).

        Raises:
            EncodeError: as :func:`~qmf_async.wire.encode` (no such method, the method
                name is too long, an argument is missing, unknown or does not fit its type).
        """
        writer = self._writers.get(("M", method))
        if writer is None:
            prefix = bytearray(self.wire_key)
            put_str8(prefix, method)
            try:
                schema_method = self.schema.method(method)
            except UnknownClassError as exc:
                raise EncodeError(str(exc)) from exc
            _, enc, names = self.method_args(schema_method, output=False)
            writer = args_writer(b"M", bytes(prefix), enc, names, method, True)
            self._writers[("M", method)] = writer
        return writer

    def response_writer(self, method: SchemaMethod) -> Callable[[int, Mapping[str, Any]], bytes]:
        """``write(seq, out_arguments) -> body``: one ``m`` with status 0 and text
        ``OK`` answering ``method`` of this class, the bytes
        :func:`~qmf_async.wire.encode` writes for it (cached by method name).

        Raises:
            EncodeError: as :func:`~qmf_async.wire.encode` (an argument is missing,
                unknown or does not fit its type).
        """
        writer = self._writers.get(("m", method.name))
        if writer is None:
            _, enc, names = self.method_args(method, output=True)
            status = bytearray(_U32.pack(0))
            put_str16(status, "OK")
            writer = args_writer(b"m", bytes(status), enc, names, "method response", False)
            self._writers[("m", method.name)] = writer
        return writer


# --------------------------------------------------------------------------- the record view

_timestamps = RecordLayout.timestamps
_is_deleted = RecordLayout.is_deleted
_oid_bytes = RecordLayout.object_id_bytes
_new = object.__new__
_NO_NAMES: frozenset[str] = frozenset()


@frozen(slots=True)
class RawObjectRecord:
    """A view of one ``c``/``i``/``g`` record as received: its bytes, decoded on access.

    Reads like :class:`~qmf_async.wire.ObjectRecord` (``properties``, ``statistics``,
    ``object_id``, timestamps); :meth:`to_record` decodes it into one.  Reading a
    value raises :class:`~qmf_async.DecodeError` when its bytes are malformed.
    :meth:`merge` completes a ``c`` with the statistics of an ``i`` of the same
    object (or the other way round); a merged record has opcode ``g`` (both parts).
    """

    opcode: str
    seq: int
    codec: ClassCodec = attrs.field(repr=lambda c: str(c.class_key))
    raw: bytes = attrs.field(repr=False)
    #: offset of the statistics in ``raw`` (``len(raw)`` for a ``c`` record)
    sofs: int = attrs.field(repr=False)
    #: the non-optional properties and statistics the agent left out, which read as
    #: their type's zero (a QMF v2 object's map may lack some; a v1 record lacks none)
    absent: frozenset[str] = attrs.field(default=frozenset(), repr=False)

    @property
    def OPCODE(self) -> str:
        return self.opcode

    @property
    def schema(self) -> SchemaClass:
        return self.codec.schema

    @property
    def class_key(self) -> ClassKey:
        return self.codec.class_key

    # -- header
    @property
    def timestamp(self) -> int:
        return _timestamps(self.raw)[0]

    @property
    def created(self) -> int:
        return _timestamps(self.raw)[1]

    @property
    def deleted(self) -> int:
        return _timestamps(self.raw)[2]

    @property
    def timestamps(self) -> tuple[int, int, int]:
        """(last update, created, deleted) in ns since the epoch."""
        return _timestamps(self.raw)

    def is_deleted(self) -> bool:
        """True when the record says the object was deleted."""
        return _is_deleted(self.raw)

    @property
    def object_id(self) -> ObjectId:
        return RecordLayout.object_id(self.raw)

    @property
    def object_id_bytes(self) -> bytes:
        """The object id's 16 wire bytes."""
        return _oid_bytes(self.raw)

    # -- sections
    @property
    def has_properties(self) -> bool:
        """True for ``c`` and ``g`` records (and merged ones)."""
        return self.opcode != "i"

    @property
    def has_statistics(self) -> bool:
        """True for ``i`` and ``g`` records (and merged ones)."""
        return self.opcode != "c"

    def merge(self, older: RawObjectRecord | None) -> RawObjectRecord:
        """This record completed by ``older``, an earlier record of the same object:
        the header and the parts this record carries are this record's; a part it
        lacks is taken from ``older`` when that has it.  The result has opcode ``g``
        when it carries both parts; otherwise it is this record itself.  ``older``
        of another object or class is ignored."""
        if (older is None or self.opcode == "g" or older.opcode == self.opcode
                or older.codec.class_key != self.codec.class_key
                or _oid_bytes(older.raw) != _oid_bytes(self.raw)):
            return self
        props_of, stats_of = (self, older) if self.opcode == "c" else (older, self)
        raw, sofs = RecordLayout.join(self.raw,
                                      RecordLayout.properties(props_of.raw, props_of.sofs),
                                      RecordLayout.statistics(stats_of.raw, stats_of.sofs))
        merged: RawObjectRecord = _new(RawObjectRecord)
        # a c carries only property names in ``absent``, an i only statistic names
        absent = (props_of.absent | stats_of.absent
                  if props_of.absent or stats_of.absent else _NO_NAMES)
        _init_view(merged, "g", self.seq, self.codec, raw, sofs, absent)
        return merged

    # -- values
    @property
    def properties(self) -> tuple[Any, ...] | None:
        """Property values in schema order (None when the opcode carries none)."""
        if self.opcode == "i":
            return None
        return self.codec.decode_props(self.raw)

    @property
    def statistics(self) -> tuple[Any, ...] | None:
        """Statistic values in schema order (None when the opcode carries none)."""
        if self.opcode == "c":
            return None
        return self.codec.decode_stats(self.raw, self.sofs)

    def prop(self, i: int) -> Any:
        """Property ``i`` (schema order); None for an absent optional one.

        Raises:
            LookupError: the record carries no properties.
            DecodeError: the value is malformed.
        """
        if self.opcode == "i":
            raise LookupError("an 'i' record carries no properties")
        return self.codec.prop(self.raw, i)

    def stat(self, i: int) -> Any:
        """Statistic ``i`` (schema order).

        Raises:
            LookupError: the record carries no statistics.
            DecodeError: the value is malformed.
        """
        if self.opcode == "c":
            raise LookupError("a 'c' record carries no statistics")
        return self.codec.stat(self.raw, self.sofs, i)

    def get(self, name: str, default: Any = None) -> Any:
        """A property or statistic by name; ``default`` when the record does not carry
        it (or an optional property is absent).

        Raises:
            DecodeError: the value is malformed.
        """
        codec = self.codec
        i = codec.props.get(name)
        if i is not None and self.opcode != "i":
            v = codec.prop(self.raw, i)
            return default if v is None else v
        i = codec.stats.get(name)
        if i is not None and self.opcode != "c":
            return codec.stat(self.raw, self.sofs, i)
        return default

    def properties_dict(self) -> dict[str, Any]:
        """Properties by name (absent optional properties are left out)."""
        values = self.properties
        if values is None:
            return {}
        return {p.name: v for p, v in zip(self.schema.properties, values, strict=True)
                if v is not None}

    def statistics_dict(self) -> dict[str, Any]:
        """Statistics by name."""
        values = self.statistics
        if values is None:
            return {}
        return {s.name: v for s, v in zip(self.schema.statistics, values, strict=True)}

    def to_record(self) -> ObjectRecord:
        """The eagerly decoded :class:`~qmf_async.wire.ObjectRecord`.

        Raises:
            DecodeError: a value is malformed.
        """
        ts, cr, de = _timestamps(self.raw)
        return ObjectRecord(self.opcode, self.seq, self.schema, ts, cr, de, self.object_id,
                            self.properties, self.statistics)


_VIEW_SETTERS = _slot_setters(RawObjectRecord, 6)


def _init_view(rec: RawObjectRecord, opcode: str, seq: int, codec: ClassCodec, raw: bytes,
               sofs: int, absent: frozenset[str] = _NO_NAMES) -> None:
    assert _VIEW_SETTERS is not None
    for setter, value in zip(_VIEW_SETTERS, (opcode, seq, codec, raw, sofs, absent),
                             strict=True):
        setter(rec, value)




# --------------------------------------------------------------------------- writers

def put_str8(out: bytearray, text: str) -> None:
    """Append a str8.  Raises EncodeError: longer than 255 bytes."""
    raw = text.encode("utf-8")
    if len(raw) > 255:
        raise EncodeError(f"{text[:20]!r}... is longer than 255 bytes (str8)")
    out.append(len(raw))
    out += raw


def put_str16(out: bytearray, text: str) -> None:
    """Append a str16.  Raises EncodeError: longer than 65535 bytes."""
    raw = text.encode("utf-8")
    if len(raw) > 0xFFFF:
        raise EncodeError("text longer than 65535 bytes (str16)")
    out += _U16.pack(len(raw))
    out += raw


def args_tuple(names: tuple[str, ...], args: Mapping[str, Any], what: str) -> tuple[Any, ...]:
    """The values of ``args`` in the order of ``names``.

    Raises:
        EncodeError: an argument is missing or unknown.
    """
    missing = [n for n in names if n not in args]
    if missing:
        raise EncodeError(f"{what}: missing argument(s) {', '.join(missing)}")
    extra = set(args) - set(names)
    if extra:
        raise EncodeError(f"{what}: unknown argument(s) {', '.join(sorted(extra))}")
    return tuple(args[n] for n in names)


def args_writer(opcode: bytes, prefix: bytes, enc: Encoder, names: tuple[str, ...],
                what: str, object_id: bool) -> Callable[..., bytes]:
    """A writer of one message: its header, for an ``M`` the object id, ``prefix``,
    then the arguments in schema order (checked as :func:`args_tuple` does)."""
    pack_header = HEADER.pack
    n = len(names)

    def values_of(args: Mapping[str, Any]) -> tuple[Any, ...]:
        if len(args) == n:
            try:
                return tuple([args[k] for k in names])
            except KeyError:
                pass
        return args_tuple(names, args, what)

    def finish(out: bytearray, values: tuple[Any, ...]) -> bytes:
        try:
            enc(out, values)
        except EncodeError:
            raise
        except (UnknownClassError, struct.error, OverflowError, UnicodeEncodeError) as exc:
            raise EncodeError(str(exc)) from exc
        return bytes(out)

    if object_id:
        def write_request(seq: int, oid: bytes, args: Mapping[str, Any]) -> bytes:
            if not isinstance(seq, int) or not 0 <= seq <= 0xFFFFFFFF:
                raise EncodeError(f"sequence number {seq!r} is not a uint32")
            values = values_of(args)
            out = bytearray(pack_header(MAGIC, opcode, seq))
            out += oid
            out += prefix
            return finish(out, values)
        return write_request

    def write(seq: int, args: Mapping[str, Any]) -> bytes:
        if not isinstance(seq, int) or not 0 <= seq <= 0xFFFFFFFF:
            raise EncodeError(f"sequence number {seq!r} is not a uint32")
        values = values_of(args)
        out = bytearray(pack_header(MAGIC, opcode, seq))
        out += prefix
        return finish(out, values)
    return write


# --------------------------------------------------------------------------- codecs of plain values

_PLAIN: dict[ClassKey, ClassCodec] = {}


def plain_reader(schema: SchemaClass) -> ClassCodec:
    """A codec of ``schema`` outside any registry (no ``object`` values), for proxies
    built from decoded values; kept per class key (bounded)."""
    found = _PLAIN.get(schema.class_key)
    if found is None or found.schema is not schema:
        found = ClassCodec(schema)
        if len(_PLAIN) < 4096:
            _PLAIN[schema.class_key] = found
    return found


def reader_of(codec: ClassCodec) -> ClassCodec:
    """The reader of ``codec``'s records: the codec itself (kept for callers of the
    former separate reader)."""
    return codec


#: the former name of the codec's lazy face
RecordReader = ClassCodec

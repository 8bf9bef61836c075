"""Object records kept as their wire bytes and decoded on access.  Pure: no I/O.

A console receives far more object records than it reads values of: a query for
10,000 queues usually looks at a few columns, an update stream at a few counters.
The session therefore decodes ``c``/``i``/``g`` records *lazily*: a generated
per-schema **scanner** only checks a record's framing (where each value starts and
ends, that nothing runs past the body) and keeps the record's bytes; values are
decoded when they are read, by generated per-schema decoders or, for values at a
fixed offset, by one ``struct`` read.  A proxy then costs its bytes plus a few
slots, instead of a tuple of boxed values, and receiving costs a scan instead of a
decode.

The record bytes (``raw``) always have the layout of a ``g`` record after its class
key: timestamps (3 x uint64) and object id (16 bytes) in the first 40 bytes, then for
``c``/``g`` the presence octets and properties, then (from ``sofs``) for ``i``/``g``
the statistics.  A malformed value that the scanner cannot see (invalid UTF-8, a map
whose entries are broken) raises :class:`~qmf_async.DecodeError` when it is read.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from ..errors import DecodeError
from ._amqp010 import decode_array, decode_list, decode_map, new_wire_map
from ._compile import _EMPTY_MAP, _FIXED_FMT, FieldSpec, _decode_lines, _slot_setters
from ._values import ClassKey, ObjectId, QmfType

if TYPE_CHECKING:
    from ._codec import ClassCodec
    from ._messages import ObjectRecord
    from ._schema import SchemaClass

__all__ = [
    "HEADER_SIZE",
    "RawObjectRecord",
    "RecordReader",
    "compile_record_scanner",
    "make_oid",
    "reader_of",
]

#: timestamps (3 x 8) + object id (16): the part every record starts with
HEADER_SIZE = 40
_TIMES = struct.Struct(">QQQ")
_U32 = struct.Struct(">I")
_new = object.__new__
_set_oid = ObjectId.__dict__["raw"].__set__


def make_oid(raw16: bytes) -> ObjectId:
    """An ObjectId from 16 wire bytes, without re-validating them."""
    oid = _new(ObjectId)
    _set_oid(oid, raw16)
    return oid


@attrs.frozen(slots=True)
class RawObjectRecord:
    """A ``c``/``i``/``g`` record as received: its bytes, decoded on access.

    Reads like :class:`~qmf_async.wire.ObjectRecord` (``properties``, ``statistics``,
    ``object_id``, timestamps); :meth:`to_record` decodes it into one.  Reading a
    value raises :class:`~qmf_async.DecodeError` when its bytes are malformed.
    """

    opcode: str
    seq: int
    codec: ClassCodec = attrs.field(repr=lambda c: str(c.class_key))
    raw: bytes = attrs.field(repr=False)
    #: offset of the statistics in ``raw`` (``len(raw)`` for a ``c`` record)
    sofs: int = attrs.field(repr=False)

    @property
    def OPCODE(self) -> str:
        return self.opcode

    @property
    def schema(self) -> SchemaClass:
        return self.codec.schema

    @property
    def class_key(self) -> ClassKey:
        return self.codec.class_key

    @property
    def timestamp(self) -> int:
        return int(_TIMES.unpack_from(self.raw, 0)[0])

    @property
    def created(self) -> int:
        return int(_TIMES.unpack_from(self.raw, 0)[1])

    @property
    def deleted(self) -> int:
        return int(_TIMES.unpack_from(self.raw, 0)[2])

    @property
    def object_id(self) -> ObjectId:
        return make_oid(self.raw[24:40])

    @property
    def properties(self) -> tuple[Any, ...] | None:
        """Property values in schema order (None when the opcode carries none)."""
        if self.opcode == "i":
            return None
        return reader_of(self.codec).decode_props(self.raw)

    @property
    def statistics(self) -> tuple[Any, ...] | None:
        """Statistic values in schema order (None when the opcode carries none)."""
        if self.opcode == "c":
            return None
        return reader_of(self.codec).decode_stats(self.raw, self.sofs)

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
        from ._messages import ObjectRecord

        ts, cr, de = _TIMES.unpack_from(self.raw, 0)
        return ObjectRecord(self.opcode, self.seq, self.schema, ts, cr, de, self.object_id,
                            self.properties, self.statistics)


# ----------------------------------------------------------------------------- scanners

def _skip_lines(t: QmfType, indent: str) -> list[str]:
    """Lines that move ``pos`` past one variable-size value of type ``t``."""
    if t == QmfType.SSTR:
        return [f"{indent}pos += 1 + buf[pos]"]
    if t == QmfType.LSTR:
        return [f"{indent}pos += 2 + ((buf[pos] << 8) | buf[pos + 1])"]
    if t in (QmfType.MAP, QmfType.LIST, QmfType.ARRAY):
        least = 5 if t == QmfType.ARRAY else 4  # a count (and a type code) follow the size
        return [f"{indent}n = _u32(buf, pos)[0]",
                f"{indent}if n < {least}:",
                f"{indent}    raise _DecodeError("
                f"'{t.name.lower()} size {{}} too small'.format(n), pos)",
                f"{indent}pos += 4 + n"]
    if t == QmfType.OBJECT:
        return [f"{indent}pos = _object(buf, pos)[1]"]
    raise DecodeError(f"schema uses unsupported type code {int(t)}")


def _section_lines(fields: Sequence[FieldSpec], presence: bool, indent: str,
                   upto: int | None = None) -> list[str]:
    """Lines that skip one section (properties or statistics) of a record, or only
    its presence octets and first ``upto`` fields."""
    lines: list[str] = []
    n_opt = sum(1 for _, _, opt in fields if opt) if presence else 0
    nbytes = (n_opt + 7) // 8
    for k in range(nbytes):
        lines.append(f"{indent}p{k} = buf[pos + {k}]")
    acc = nbytes
    bit = 0
    for _, t, opt in fields[:upto]:
        t = QmfType(t)
        fixed = struct.calcsize(">" + _FIXED_FMT[t]) if t in _FIXED_FMT else None
        if opt and presence:
            test = f"p{bit // 8} & {1 << (bit % 8)}"
            bit += 1
            if acc:
                lines.append(f"{indent}pos += {acc}")
                acc = 0
            lines.append(f"{indent}if {test}:")
            if fixed is not None:
                lines.append(f"{indent}    pos += {fixed}")
            else:
                lines += _skip_lines(t, indent + "    ")
            continue
        if fixed is not None:
            acc += fixed
            continue
        if acc:
            lines.append(f"{indent}pos += {acc}")
            acc = 0
        lines += _skip_lines(t, indent)
    if acc:
        lines.append(f"{indent}pos += {acc}")
    return lines


def compile_record_scanner(opcode: str, codec: ClassCodec, object_codec: Any = None
                           ) -> Callable[[bytes, int, int, int, list[Any]], int]:
    """Compile the scanner of ``c``/``i``/``g`` records of ``codec``'s class:
    ``(buf, message_start, pos, seq, out) -> end``.

    ``pos`` is where the record starts after its message header and class key.  The
    scanner appends a :class:`RawObjectRecord` to ``out``, and goes on with every
    following message of the body that has the same header and class key (packed
    records of one answer), so the caller dispatches once per run.  It raises only
    :class:`DecodeError` (truncated record, a map size too small) and does not look
    inside values.
    """
    schema = codec.schema
    props = [(p.name, p.type, bool(p.optional)) for p in schema.properties]
    stats = [(s.name, s.type, False) for s in schema.statistics]
    lines = ["def scan(buf, mstart, pos, seq, out):",
             "    prefix = buf[mstart:pos]",  # header and class key, the same for the run
             "    plen = pos - mstart",
             "    blen = len(buf)",
             "    append = out.append",
             "    while True:",
             "        start = pos",
             "        pos += 40",
             "        try:"]
    if opcode != "i":
        lines += _section_lines(props, True, "            ")
    lines.append("            sofs = pos")
    if opcode != "c":
        lines += _section_lines(stats, False, "            ")
    lines += [
        "        except (IndexError, _struct_error) as exc:",
        "            raise _DecodeError('truncated object values', pos) from exc",
        "        if pos > blen:",
        "            raise _DecodeError('truncated object values', blen)",
    ]
    env: dict[str, Any] = {
        "_u32": _U32.unpack_from, "_DecodeError": DecodeError, "_struct_error": struct.error,
        "_object": object_codec[0] if object_codec is not None else _no_object,
        "_REC": RawObjectRecord, "_CODEC": codec, "_new": _new,
    }
    values = [repr(opcode), "seq", "_CODEC", "buf[start:pos]", "sofs - start"]
    setters = _slot_setters(RawObjectRecord, len(values))
    if setters is None:  # pragma: no cover - RawObjectRecord is a plain slots class
        lines.append(f"        append(_REC({', '.join(values)}))")
    else:
        lines.append("        rec = _new(_REC)")
        for i, (setter, value) in enumerate(zip(setters, values, strict=True)):
            env[f"_set{i}"] = setter
            lines.append(f"        _set{i}(rec, {value})")
        lines.append("        append(rec)")
    lines += [
        "        if pos < blen and buf.startswith(prefix, pos):",
        "            pos += plen",
        "            continue",
        "        return pos",
    ]
    label = ascii(str(schema.class_key))[1:-1]
    exec(compile("\n".join(lines) + "\n", f"<qmf codec scan_{opcode}_record {label}>", "exec"), env)
    fn: Callable[[bytes, int, int, int, list[Any]], int] = env["scan"]
    return fn


def _no_object(buf: bytes, pos: int) -> tuple[Any, int]:
    raise DecodeError("object-typed values need a schema registry", pos)


# ----------------------------------------------------------------------------- readers

Getter = Callable[[bytes, int], Any]


def _fixed_getter(fmt: str, off: int) -> Getter:
    unpack = struct.Struct(">" + fmt).unpack_from

    def get(raw: bytes, base: int) -> Any:
        return unpack(raw, base + off)[0]
    return get


def _ref_getter(off: int) -> Getter:
    def get(raw: bytes, base: int) -> Any:
        a = base + off
        return make_oid(raw[a:a + 16])
    return get


def _uuid_getter(off: int) -> Getter:
    def get(raw: bytes, base: int) -> Any:
        a = base + off
        return uuid.UUID(bytes=raw[a:a + 16])
    return get


def _sstr_getter(off: int, name: str) -> Getter:
    def get(raw: bytes, base: int) -> Any:
        a = base + off
        try:
            return raw[a + 1:a + 1 + raw[a]].decode()
        except UnicodeDecodeError as exc:
            raise DecodeError(f"invalid UTF-8 in {name!r}", a) from exc
    return get


def _optional(get: Getter, pbyte: int, mask: int) -> Getter:
    def opt(raw: bytes, base: int) -> Any:
        if raw[base + pbyte] & mask:
            return get(raw, base)
        return None
    return opt


def compile_seek_getter(fields: Sequence[FieldSpec], presence: bool, index: int,
                        object_codec: Any = None, label: str = "") -> Getter:
    """Compile a reader of field ``index`` of a section whose earlier fields vary in
    size: it skips them (as the scanner does) and decodes that one value:
    ``(raw, section_start) -> value``.  Raises only :class:`DecodeError`."""
    name, t, opt = fields[index]
    t = QmfType(t)
    lines = ["def get(buf, pos):", "    try:"]
    lines += _section_lines(fields, presence, "        ", upto=index)
    indent = "        "
    if opt and presence:
        bit = sum(1 for _, _, o in fields[:index] if o)
        lines.append(f"        if not p{bit // 8} & {1 << (bit % 8)}:")
        lines.append("            return None")
    env: dict[str, Any] = {
        "_u32": _U32.unpack_from, "_DecodeError": DecodeError, "_struct_error": struct.error,
        "_object": object_codec[0] if object_codec is not None else _no_object,
        "_new": _new, "_ObjectId": ObjectId, "_set_oid": _set_oid, "_EMPTY_MAP": _EMPTY_MAP,
        "_new_map": new_wire_map, "_UUID": uuid.UUID, "_map": decode_map, "_list": decode_list,
        "_array": decode_array,
    }
    lines += _decode_lines("v", t, indent, env)
    lines += [
        "    except (IndexError, _struct_error) as exc:",
        f"        raise _DecodeError({'truncated value of ' + repr(name)!r}, pos) from exc",
        "    except UnicodeDecodeError as exc:",
        f"        raise _DecodeError({'invalid UTF-8 in ' + repr(name)!r}, pos) from exc",
        "    return v",
    ]
    src = "\n".join(lines) + "\n"
    exec(compile(src, f"<qmf codec get {ascii(label)[1:-1]}.{ascii(name)[1:-1]}>", "exec"), env)
    fn: Getter = env["get"]
    return fn


def _getters(fields: Sequence[FieldSpec], presence: bool) -> list[Getter | None]:
    """One getter per field whose offset in its section is the same in every record
    (everything before it is mandatory and fixed-size); None for the others."""
    n_opt = sum(1 for _, _, opt in fields if opt) if presence else 0
    off: int | None = (n_opt + 7) // 8
    out: list[Getter | None] = []
    bit = 0
    for name, t, opt in fields:
        t = QmfType(t)
        get: Getter | None = None
        if off is not None:
            if t == QmfType.REF:
                get = _ref_getter(off)
            elif t == QmfType.UUID:
                get = _uuid_getter(off)
            elif t in _FIXED_FMT:
                get = _fixed_getter(_FIXED_FMT[t], off)
            elif t == QmfType.SSTR:
                get = _sstr_getter(off, name)
        is_opt = bool(opt) and presence
        if is_opt:
            if get is not None:
                get = _optional(get, bit // 8, 1 << (bit % 8))
            bit += 1
        out.append(get)
        if off is not None:
            if t in _FIXED_FMT and not is_opt:
                off += struct.calcsize(">" + _FIXED_FMT[t])
            else:
                off = None
    return out


class RecordReader:
    """What reading a class's raw records needs, built once per class codec: names to
    positions, per-value getters, whole-section decoders."""

    __slots__ = (
        "_pdec",
        "_pspecs",
        "_sdec",
        "_sspecs",
        "codec",
        "methods",
        "pget",
        "pnames",
        "props",
        "proxy_class",
        "schema",
        "sget",
        "snames",
        "stats",
    )

    def __init__(self, codec: ClassCodec | None, schema: SchemaClass) -> None:
        self.codec = codec
        self.schema = schema
        self.props = {p.name: i for i, p in enumerate(schema.properties)}
        self.stats = {s.name: i for i, s in enumerate(schema.statistics)}
        self.methods = {m.name: m for m in schema.methods}
        self.pnames = tuple(p.name for p in schema.properties)
        self.snames = tuple(s.name for s in schema.statistics)
        pspecs = [(p.name, p.type, bool(p.optional)) for p in schema.properties]
        sspecs = [(s.name, s.type, False) for s in schema.statistics]
        self._pspecs, self._sspecs = pspecs, sspecs
        # getters of values at a fixed offset now; the others compiled on first read
        self.pget = _getters(pspecs, True)
        self.sget = _getters(sspecs, False)
        self.proxy_class: Any = None  # set by qmf_async.console._objects on first use
        self._pdec = codec.properties[0] if codec is not None else None
        self._sdec = codec.statistics[0] if codec is not None else None

    def decode_props(self, raw: bytes) -> tuple[Any, ...]:
        """Every property of a raw ``c``/``g`` record.

        Raises:
            DecodeError: a value is malformed.
        """
        assert self._pdec is not None
        return self._pdec(raw, HEADER_SIZE)[0]

    def decode_stats(self, raw: bytes, sofs: int) -> tuple[Any, ...]:
        """Every statistic of a raw ``i``/``g`` record.

        Raises:
            DecodeError: a value is malformed.
        """
        assert self._sdec is not None
        return self._sdec(raw, sofs)[0]

    def _seek(self, stats: bool, i: int) -> Getter:
        assert self.codec is not None
        specs = self._sspecs if stats else self._pspecs
        get = compile_seek_getter(specs, not stats, i, self.codec._registry._object_codec,
                                  str(self.schema.class_key))
        (self.sget if stats else self.pget)[i] = get
        return get

    def prop(self, raw: bytes, i: int) -> Any:
        """Property ``i`` of a raw ``c``/``g`` record.  Raises DecodeError."""
        get = self.pget[i] or self._seek(False, i)
        return get(raw, HEADER_SIZE)

    def stat(self, raw: bytes, sofs: int, i: int) -> Any:
        """Statistic ``i`` of a raw ``i``/``g`` record.  Raises DecodeError."""
        get = self.sget[i] or self._seek(True, i)
        return get(raw, sofs)


_PLAIN: dict[ClassKey, RecordReader] = {}


def reader_of(codec: ClassCodec) -> RecordReader:
    """The reader of ``codec``'s class (built on first use, kept by the codec)."""
    found: RecordReader | None = codec._reader
    if found is None:
        found = codec._reader = RecordReader(codec, codec.schema)
    return found


def plain_reader(schema: SchemaClass) -> RecordReader:
    """A reader without a codec, for proxies built from decoded values."""
    found = _PLAIN.get(schema.class_key)
    if found is None or found.schema is not schema:
        found = RecordReader(None, schema)
        if len(_PLAIN) < 4096:
            _PLAIN[schema.class_key] = found
    return found

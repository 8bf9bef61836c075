"""The QMF v1 object record: its layout, and a view of a received record that reads
its values on access.  Pure: no I/O.

This module is the one place that knows where things stand in an object record.  The
record bytes (``raw``) always have the layout of a ``g`` record after its class key::

    0   timestamp  (uint64, ns)      last update
    8   created    (uint64, ns)
    16  deleted    (uint64, ns)      0 while the object lives
    24  object id  (16 bytes)
    40  presence octets and properties   (``c`` and ``g``)
    sofs statistics                      (``i`` and ``g``)

A console receives far more object records than it reads values of: a query for
10,000 queues usually looks at a few columns, an update stream at a few counters.
The session therefore decodes ``c``/``i``/``g`` records *lazily*: a generated
per-schema **scanner** only checks a record's framing (where each value starts and
ends, that nothing runs past the body) and keeps the record's bytes; values are
decoded when they are read, by generated per-schema decoders or, for values at a
fixed offset, by one ``struct`` read.  A malformed value that the scanner cannot see
(invalid UTF-8, a map whose entries are broken) raises :class:`~qmf_async.DecodeError`
when it is read.

The per-class code (decoders, scanners, value readers, encoders) is held by one
:class:`~qmf_async.wire.ClassCodec` per schema hash, and the view of a received
record, :class:`~qmf_async.wire.RawObjectRecord`, reads through it; both use
:class:`RecordLayout` for every offset (``_classcodec``).  This module imports no
other module of the codec but the code generators (``_compile``).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import DecodeError
from ._amqp010 import decode_array, decode_list, decode_map, new_wire_map
from ._compile import _EMPTY_MAP, _FIXED_FMT, FieldSpec, _decode_lines, _slot_setters
from ._values import ObjectId, QmfType

__all__ = [
    "HEADER_SIZE",
    "RecordLayout",
    "compile_record_scanner",
    "compile_seek_getter",
    "field_getters",
    "make_oid",
]

#: timestamps (3 x 8) + object id (16): the part every record starts with
HEADER_SIZE = 40
_TIMES = struct.Struct(">QQQ")
_HEAD = struct.Struct(">QQQ16s")
_U32 = struct.Struct(">I")
_LIVE = bytes(8)
_new = object.__new__
_set_oid = ObjectId.__dict__["raw"].__set__


def make_oid(raw16: bytes) -> ObjectId:
    """An ObjectId from 16 wire bytes, without re-validating them."""
    oid = _new(ObjectId)
    _set_oid(oid, raw16)
    return oid


class RecordLayout:
    """Where the fields of a record's bytes (``raw``, ``g`` layout) stand.

    Every function takes the record bytes as kept by a :class:`RawObjectRecord` or a
    console proxy; ``sofs`` is where the statistics start.  None of them raises for
    a record of at least :data:`HEADER_SIZE` bytes (the scanner guarantees that).
    """

    HEADER_SIZE = HEADER_SIZE

    #: ``(timestamp, created, deleted, object id bytes) -> header bytes``; raises
    #: struct.error for a value that does not fit
    pack_header = staticmethod(_HEAD.pack)

    @staticmethod
    def header(timestamp: int, created: int, deleted: int, object_id: ObjectId | bytes) -> bytes:
        """The first :data:`HEADER_SIZE` bytes of a record.

        Raises:
            struct.error: a timestamp is not a uint64 or the id is not 16 bytes.
        """
        oid = object_id.raw if isinstance(object_id, ObjectId) else object_id
        return _HEAD.pack(timestamp, created, deleted, oid)

    @staticmethod
    def object_id_bytes(raw: bytes) -> bytes:
        """The 16 bytes of the object id (cheap to compare and to key a dict with)."""
        return raw[24:40]

    @staticmethod
    def object_id(raw: bytes) -> ObjectId:
        return make_oid(raw[24:40])

    @staticmethod
    def timestamps(raw: bytes) -> tuple[int, int, int]:
        """(last update, created, deleted) in ns since the epoch."""
        ts, cr, de = _TIMES.unpack_from(raw, 0)
        return (ts, cr, de)

    @staticmethod
    def is_deleted(raw: bytes) -> bool:
        """True when the record's delete time is set."""
        return raw[16:24] != _LIVE

    @staticmethod
    def same_header(a: bytes, b: bytes) -> bool:
        """True when two records have the same timestamps and object id."""
        return a[:HEADER_SIZE] == b[:HEADER_SIZE]

    @staticmethod
    def properties(raw: bytes, sofs: int) -> bytes:
        """The presence octets and properties section (empty for an ``i`` record)."""
        return raw[HEADER_SIZE:sofs]

    @staticmethod
    def statistics(raw: bytes, sofs: int) -> bytes:
        """The statistics section (empty for a ``c`` record)."""
        return raw[sofs:]

    @staticmethod
    def join(header: bytes, properties: bytes, statistics: bytes) -> tuple[bytes, int]:
        """(raw, sofs): a ``g``-layout record of a header and two sections."""
        head = header[:HEADER_SIZE]
        return head + properties + statistics, HEADER_SIZE + len(properties)


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


def compile_record_scanner(opcode: str, codec: Any, make_record: type, object_codec: Any = None
                           ) -> Callable[[bytes, int, int, int, list[Any]], int]:
    """Compile the scanner of ``c``/``i``/``g`` records of ``codec``'s class:
    ``(buf, message_start, pos, seq, out) -> end``.

    ``pos`` is where the record starts after its message header and class key.  The
    scanner appends a ``make_record(opcode, seq, codec, raw, sofs, frozenset())`` (a
    :class:`~qmf_async.wire.RawObjectRecord`, its slots filled directly) to ``out``,
    and goes on with every following message of the body that has the same header and
    class key (packed records of one answer), so the caller dispatches once per run.  It raises only
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
        "_REC": make_record, "_CODEC": codec, "_new": _new,
    }
    # the view's fields: a v1 record leaves no element absent (the last, ``absent``)
    values = [repr(opcode), "seq", "_CODEC", "buf[start:pos]", "sofs - start", "_NONE"]
    env["_NONE"] = frozenset()
    setters = _slot_setters(make_record, len(values))
    if setters is None:  # pragma: no cover - the view is a plain slots class
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


def field_getters(fields: Sequence[FieldSpec], presence: bool) -> list[Getter | None]:
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



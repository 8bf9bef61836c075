"""Per-schema compiled value codecs.

For a sequence of typed fields (the properties, statistics or arguments of a
class) this module generates one Python function that decodes them all and one
that encodes them.  Runs of fixed-size fields become a single precompiled
``struct`` layout; strings, maps and lists are read inline.  The generated code is
compiled once per schema hash and cached by :class:`~qmf_async.wire.SchemaRegistry`.

Generated decoders have the signature ``decode(buf, pos) -> (tuple, pos)`` and
raise only :class:`DecodeError`; encoders ``encode(out, values)`` append to a
``bytearray`` and raise only :class:`EncodeError`.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from ._amqp010 import (
    decode_array,
    decode_list,
    decode_map,
    encode_array,
    encode_list,
    encode_map,
    new_wire_map,
)
from ._errors import DecodeError, EncodeError
from ._values import ObjectId, QmfType

__all__ = ["FieldSpec", "compile_decoder", "compile_encoder", "Decoder", "Encoder"]

#: (name, type, optional)
FieldSpec = tuple[str, QmfType, bool]
Decoder = Callable[[bytes, int], tuple[tuple[Any, ...], int]]
Encoder = Callable[[bytearray, Sequence[Any]], None]
ObjectValueCodec = tuple[Callable[[bytes, int], tuple[Any, int]], Callable[[bytearray, Any], None]]

_FIXED_FMT = {
    QmfType.UINT8: "B", QmfType.UINT16: "H", QmfType.UINT32: "I", QmfType.UINT64: "Q",
    QmfType.INT8: "b", QmfType.INT16: "h", QmfType.INT32: "i", QmfType.INT64: "q",
    QmfType.ABSTIME: "Q", QmfType.DELTATIME: "Q", QmfType.BOOL: "?",
    QmfType.FLOAT: "f", QmfType.DOUBLE: "d", QmfType.REF: "16s", QmfType.UUID: "16s",
}


Item = tuple[str, QmfType, "tuple[int, int] | None"]  # (variable, type, presence bit)

_EMPTY_MAP = b"\0\0\0\x04\0\0\0\0"  # an AMQP 0-10 map: size 4, count 0


def _runs(items: Sequence[Item]) -> list[list[Item]]:
    """Group consecutive mandatory fixed-size items into runs; others stand alone."""
    groups: list[list[Item]] = []
    current: list[Item] = []
    for item in items:
        if item[1] in _FIXED_FMT and item[2] is None:
            current.append(item)
            continue
        if current:
            groups.append(current)
            current = []
        groups.append([item])
    if current:
        groups.append(current)
    return groups


def _decode_lines(v: str, t: QmfType, indent: str, env: dict[str, Any]) -> list[str]:
    """Source lines that read one value of type ``t`` into variable ``v``."""
    if t in _FIXED_FMT:
        return _fixed_run_lines([(v, t, None)], indent, env)
    if t == QmfType.SSTR:
        return [f"{indent}n = buf[pos]; {v} = buf[pos + 1:pos + 1 + n].decode(); pos += 1 + n"]
    if t == QmfType.LSTR:
        return [f"{indent}n = (buf[pos] << 8) | buf[pos + 1]; "
                f"{v} = buf[pos + 2:pos + 2 + n].decode(); pos += 2 + n"]
    if t == QmfType.MAP:
        # most maps qpidd sends are empty (queue/exchange arguments ...)
        return [f"{indent}if buf[pos:pos + 8] == _EMPTY_MAP:",
                f"{indent}    {v} = _new_map(); pos += 8",
                f"{indent}else:",
                f"{indent}    {v}, pos = _map(buf, pos, len(buf), 1)"]
    if t == QmfType.LIST:
        return [f"{indent}{v}, pos = _list(buf, pos, len(buf), 1)"]
    if t == QmfType.ARRAY:
        return [f"{indent}{v}, pos = _array(buf, pos, len(buf), 1)"]
    if t == QmfType.OBJECT:
        return [f"{indent}{v}, pos = _object(buf, pos)"]
    raise DecodeError(f"schema uses unsupported type code {int(t)}")


def _fixed_run_lines(group: Sequence[Item], indent: str, env: dict[str, Any]) -> list[str]:
    """One ``struct`` unpack for a run of fixed-size values."""
    fmt = ">" + "".join(_FIXED_FMT[t] for _, t, _ in group)
    sname = f"_s{len(env)}"
    env[sname] = struct.Struct(fmt)
    targets: list[str] = []
    post: list[str] = []
    for v, t, _ in group:
        if t == QmfType.REF:
            targets.append(f"{v}_r")
            post.append(f"{indent}{v} = _new(_ObjectId); _set_oid({v}, {v}_r)")
        elif t == QmfType.UUID:
            targets.append(f"{v}_u")
            post.append(f"{indent}{v} = _UUID(bytes={v}_u)")
        else:
            targets.append(v)
    return [f"{indent}{', '.join(targets)}, = {sname}.unpack_from(buf, pos); "
            f"pos += {struct.calcsize(fmt)}"] + post


def _presence_items(fields: Sequence[FieldSpec], prefix: str, presence: bool
                    ) -> tuple[list[Item], list[Item]]:
    """(presence-byte items, value items) for ``fields``."""
    values: list[Item] = []
    n_opt = 0
    for i, (_, t, opt) in enumerate(fields):
        bit = None
        if opt and presence:
            bit = (n_opt // 8, 1 << (n_opt % 8))
            n_opt += 1
        values.append((f"{prefix}{i}", QmfType(t), bit))
    pbytes: list[Item] = [(f"{prefix}p{k}", QmfType.UINT8, None) for k in range((n_opt + 7) // 8)]
    return pbytes, values


def _generate(name: str, args: str, items: Sequence[Item], result: str,
              env: dict[str, Any], object_codec: ObjectValueCodec | None,
              build: Sequence[str] = (), label: str = "") -> Any:
    """Generate and compile ``def name(args)`` reading ``items`` in order and
    returning ``(result, pos)``; ``build`` lines run before the return."""
    env.update({
        "_new": object.__new__, "_ObjectId": ObjectId,
        "_set_oid": ObjectId.__dict__["raw"].__set__, "_EMPTY_MAP": _EMPTY_MAP,
        "_new_map": new_wire_map, "_UUID": uuid.UUID, "_map": decode_map, "_list": decode_list,
        "_array": decode_array, "_DecodeError": DecodeError, "_struct_error": struct.error,
        "_object": object_codec[0] if object_codec is not None else _no_object,
    })
    lines = [f"def {name}({args}):", "    try:", "        pass"]
    for group in _runs(items):
        if len(group) > 1:
            lines += _fixed_run_lines(group, "        ", env)
            continue
        v, t, bit = group[0]
        if bit is not None:
            pvar = v.rstrip("0123456789") + f"p{bit[0]}"
            lines.append(f"        if {pvar} & {bit[1]}:")
            lines += _decode_lines(v, t, "            ", env)
            lines.append("        else:")
            lines.append(f"            {v} = None")
        else:
            lines += _decode_lines(v, t, "        ", env)
    lines += [
        "    except (IndexError, _struct_error) as exc:",
        "        raise _DecodeError('truncated object values', pos) from exc",
        "    except UnicodeDecodeError as exc:",
        "        raise _DecodeError('invalid UTF-8 in a string value', pos) from exc",
        "    if pos > len(buf):",
        "        raise _DecodeError('truncated object values', len(buf))",
        *(f"    {line}" for line in build),
        f"    return {result}, pos",
    ]
    src = "\n".join(lines) + "\n"
    # the label (a class key, escaped: names come from the wire) names the code in
    # tracebacks and profiles
    fname = f"<qmf codec {name} {ascii(label)[1:-1]}>" if label else f"<qmf codec {name}>"
    exec(compile(src, fname, "exec"), env)
    return env[name]


def _tuple_expr(items: Sequence[Item]) -> str:
    return "(" + "".join(f"{v}, " for v, _, _ in items) + ")"


def compile_decoder(fields: Sequence[FieldSpec], *, presence: bool = True,
                    object_codec: ObjectValueCodec | None = None,
                    name: str = "decode") -> Decoder:
    """Compile a decoder for ``fields`` (in schema order): ``(buf, pos) -> (tuple, pos)``.

    With ``presence``, optional fields are preceded by presence bitmask octets (one
    bit per optional field, lowest bit first) and absent ones decode to ``None``.
    """
    pbytes, values = _presence_items(fields, "v", presence)
    fn: Decoder = _generate(name, "buf, pos", pbytes + values, _tuple_expr(values), {},
                            object_codec)
    return fn


def compile_record_decoder(opcode: str, props: Sequence[FieldSpec], stats: Sequence[FieldSpec],
                           make_record: Callable[..., Any], schema: Any,
                           object_codec: ObjectValueCodec | None = None
                           ) -> Callable[[bytes, int, int], tuple[Any, int]]:
    """Compile the decoder of a whole ``c``/``i``/``g`` record after its class key:
    timestamps, object id, presence octets, properties and statistics, read with
    as few ``struct`` calls as the schema allows: ``(buf, pos, seq) -> (record, pos)``.
    """
    header: list[Item] = [(v, QmfType.UINT64, None) for v in ("ts", "cr", "de")]
    header.append(("oid", QmfType.REF, None))
    items = list(header)
    props_expr = stats_expr = "None"
    if opcode != "i":
        pbytes, pvalues = _presence_items(props, "v", True)
        items += pbytes + pvalues
        props_expr = _tuple_expr(pvalues)
    if opcode != "c":
        _, svalues = _presence_items(stats, "w", False)
        items += svalues
        stats_expr = _tuple_expr(svalues)
    values = [repr(opcode), "seq", "_SCHEMA", "ts", "cr", "de", "oid", props_expr, stats_expr]
    env: dict[str, Any] = {"_REC": make_record, "_SCHEMA": schema}
    name = f"decode_{opcode}_record"
    label = str(getattr(schema, "class_key", ""))
    setters = _slot_setters(make_record, len(values))
    fn: Callable[[bytes, int, int], tuple[Any, int]]
    if setters is None:
        fn = _generate(name, "buf, pos, seq", items, f"_REC({', '.join(values)})", env,
                       object_codec, label=label)
        return fn
    # A frozen attrs class: fill its slots directly, as its __init__ would, without
    # the per-field ``object.__setattr__`` calls of the generated __init__.
    build = ["rec = _new(_REC)"]
    for i, (setter, value) in enumerate(zip(setters, values, strict=True)):
        env[f"_set{i}"] = setter
        build.append(f"_set{i}(rec, {value})")
    fn = _generate(name, "buf, pos, seq", items, "rec", env, object_codec, build, label)
    return fn


def _slot_setters(cls: Any, count: int) -> list[Callable[[Any, Any], None]] | None:
    """The slot setters of an attrs slots class with ``count`` plain fields (no
    converters, validators or post-init), in field order; None otherwise."""
    fields = getattr(cls, "__attrs_attrs__", None)
    if (fields is None or len(fields) != count or "__slots__" not in cls.__dict__
            or hasattr(cls, "__attrs_post_init__")
            or any(f.converter is not None or f.validator is not None for f in fields)):
        return None
    setters = []
    for f in fields:
        descr = cls.__dict__.get(f.name)
        if descr is None or not hasattr(descr, "__set__"):
            return None
        setters.append(descr.__set__)
    return setters


def _no_object(buf: bytes, pos: int) -> tuple[Any, int]:
    raise DecodeError("object-typed values need a schema registry", pos)


# ----------------------------------------------------------------------------- encoders

def _check_int(v: Any) -> None:
    if not isinstance(v, int) or isinstance(v, bool):
        raise EncodeError(f"integer expected, got {type(v).__name__}")


def _enc_str(out: bytearray, v: Any, width: int) -> None:
    if not isinstance(v, str):
        raise EncodeError(f"str expected, got {type(v).__name__}")
    raw = v.encode()
    n = len(raw)
    if n >= 1 << (8 * width):
        raise EncodeError(f"string of {n} bytes is too long for a str{8 * width}")
    out += n.to_bytes(width, "big")
    out += raw


def _enc_ref(out: bytearray, v: Any) -> None:
    if isinstance(v, ObjectId):
        out += v.raw
    elif isinstance(v, (bytes, bytearray)) and len(v) == 16:
        out += v
    else:
        raise EncodeError(f"object reference expected, got {type(v).__name__}")


def _enc_uuid(out: bytearray, v: Any) -> None:
    if isinstance(v, uuid.UUID):
        out += v.bytes
    elif isinstance(v, (bytes, bytearray)) and len(v) == 16:
        out += v
    else:
        raise EncodeError(f"uuid expected, got {type(v).__name__}")


def _enc_bool(out: bytearray, v: Any) -> None:
    if not isinstance(v, (bool, int)):
        raise EncodeError(f"bool expected, got {type(v).__name__}")
    out.append(1 if v else 0)


def _enc_float(st: struct.Struct) -> Callable[[bytearray, Any], None]:
    def enc(out: bytearray, v: Any) -> None:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise EncodeError(f"number expected, got {type(v).__name__}")
        try:
            out += st.pack(v)
        except (struct.error, OverflowError) as exc:
            raise EncodeError(f"{v!r} does not fit a {st.format}") from exc
    return enc


def _enc_int(st: struct.Struct) -> Callable[[bytearray, Any], None]:
    def enc(out: bytearray, v: Any) -> None:
        _check_int(v)
        try:
            out += st.pack(v)
        except struct.error as exc:
            raise EncodeError(f"{v!r} is out of range for {st.format[1:]}") from exc
    return enc


def _value_encoder(t: QmfType, object_codec: ObjectValueCodec | None) -> Callable[[bytearray, Any], None]:
    if t in (QmfType.FLOAT, QmfType.DOUBLE):
        return _enc_float(struct.Struct(">" + _FIXED_FMT[t]))
    if t == QmfType.BOOL:
        return _enc_bool
    if t == QmfType.REF:
        return _enc_ref
    if t == QmfType.UUID:
        return _enc_uuid
    if t in _FIXED_FMT:
        return _enc_int(struct.Struct(">" + _FIXED_FMT[t]))
    if t == QmfType.SSTR:
        return lambda out, v: _enc_str(out, v, 1)
    if t == QmfType.LSTR:
        return lambda out, v: _enc_str(out, v, 2)
    if t == QmfType.MAP:
        return encode_map
    if t == QmfType.LIST:
        return encode_list
    if t == QmfType.ARRAY:
        return encode_array
    if t == QmfType.OBJECT:
        if object_codec is None:
            def no_object(out: bytearray, v: Any) -> None:
                raise EncodeError("object-typed values need a schema registry")
            return no_object
        return object_codec[1]
    raise EncodeError(f"schema uses unsupported type code {int(t)}")


def compile_encoder(fields: Sequence[FieldSpec], *, presence: bool = True,
                    object_codec: ObjectValueCodec | None = None) -> Encoder:
    """Build an encoder for ``fields``; the inverse of :func:`compile_decoder`.

    ``None`` for an optional field clears its presence bit; ``None`` for a
    mandatory field raises :class:`EncodeError`.
    """
    encs = [(name, _value_encoder(QmfType(t), object_codec), bool(opt) and presence)
            for name, t, opt in fields]
    optional_idx = [i for i, (_, _, opt) in enumerate(encs) if opt]
    nbytes = (len(optional_idx) + 7) // 8
    count = len(encs)

    def encode(out: bytearray, values: Sequence[Any]) -> None:
        if len(values) != count:
            raise EncodeError(f"expected {count} values, got {len(values)}")
        if nbytes:
            bits = 0
            for n, i in enumerate(optional_idx):
                if values[i] is not None:
                    bits |= 1 << n
            out += bits.to_bytes(nbytes, "little")
        for (name, enc, opt), v in zip(encs, values):
            if v is None:
                if opt:
                    continue
                raise EncodeError(f"{name!r} is mandatory and has no value")
            try:
                enc(out, v)
            except EncodeError as exc:
                raise EncodeError(f"{name!r}: {exc}") from exc

    return encode

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

from ..errors import DecodeError, EncodeError
from ._amqp010 import (
    WireMap,
    decode_array,
    decode_list,
    decode_map,
    encode_array,
    encode_list,
    encode_map,
    new_wire_map,
)
from ._values import ObjectId, QmfType

__all__ = ["FieldSpec", "compile_decoder", "compile_encoder", "compile_record_encoder",
           "compile_ref_scanner", "Decoder", "Encoder", "RefScanner"]

#: (name, type, optional)
FieldSpec = tuple[str, QmfType, bool]
Decoder = Callable[[bytes, int], tuple[tuple[Any, ...], int]]
Encoder = Callable[[bytearray, Sequence[Any]], None]
ObjectValueCodec = tuple[Callable[[bytes, int], tuple[Any, int]], Callable[[bytearray, Any], None]]
#: ``(buf, pos) -> offsets``: where each reference value of a section starts
RefScanner = Callable[[bytes, int], tuple["int | None", ...]]

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
            f"pos += {struct.calcsize(fmt)}", *post]


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


def compile_ref_scanner(fields: Sequence[FieldSpec], *, presence: bool = True,
                        label: str = "") -> RefScanner | None:
    """Compile ``(buf, pos) -> offsets``: the offset in ``buf`` of each reference
    (``REF``) value of ``fields`` encoded at ``pos`` (None for one absent), found by
    skipping the other values without decoding them.  None for fields with no
    reference, or with an ``OBJECT`` value (whose size only decoding tells).

    The scanner raises :class:`DecodeError` when the section is truncated.
    """
    if not any(QmfType(t) == QmfType.REF for _, t, _ in fields) or \
            any(QmfType(t) == QmfType.OBJECT for _, t, _ in fields):
        return None
    pbytes, values = _presence_items(fields, "v", presence)
    lines = ["def scan_refs(buf, pos):", "    try:"]
    lines += [f"        {v} = buf[pos + {k}]" for k, (v, _, _) in enumerate(pbytes)]
    fixed = len(pbytes)  # bytes to skip before the next value
    refs: list[str] = []

    def skip(t: QmfType) -> list[str]:
        if t in _FIXED_FMT:
            return [f"pos += {struct.calcsize('>' + _FIXED_FMT[t])}"]
        if t == QmfType.SSTR:
            return ["pos += 1 + buf[pos]"]
        if t == QmfType.LSTR:
            return ["pos += 2 + ((buf[pos] << 8) | buf[pos + 1])"]
        # MAP, LIST, ARRAY: a uint32 size, then that many bytes
        return ["pos += 4 + int.from_bytes(buf[pos:pos + 4], 'big')"]

    for v, t, bit in values:
        if bit is None and t in _FIXED_FMT and t != QmfType.REF:
            fixed += struct.calcsize(">" + _FIXED_FMT[t])
            continue
        if fixed:
            lines.append(f"        pos += {fixed}")
            fixed = 0
        body = ([f"{v} = pos"] if t == QmfType.REF else []) + skip(t)
        if t == QmfType.REF:
            refs.append(v)
        if bit is None:
            lines += [f"        {line}" for line in body]
        else:
            pvar = f"vp{bit[0]}"
            lines.append(f"        if {pvar} & {bit[1]}:")
            lines += [f"            {line}" for line in body]
            if t == QmfType.REF:
                lines += ["        else:", f"            {v} = None"]
    if fixed:
        lines.append(f"        pos += {fixed}")
    lines += [
        "    except IndexError as exc:",
        "        raise _DecodeError('truncated object values', pos) from exc",
        "    if pos > len(buf):",
        "        raise _DecodeError('truncated object values', len(buf))",
        f"    return ({''.join(f'{v}, ' for v in refs)})",
    ]
    env: dict[str, Any] = {"_DecodeError": DecodeError}
    fname = f"<qmf codec scan_refs {ascii(label)[1:-1]}>" if label else "<qmf codec scan_refs>"
    exec(compile("\n".join(lines) + "\n", fname, "exec"), env)
    scanner: RefScanner = env["scan_refs"]
    return scanner


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


def _value_encoder(t: QmfType, object_codec: ObjectValueCodec | None
                   ) -> Callable[[bytearray, Any], None]:
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


# Generated encoders.  Each field gets a fast path for the plain Python type it
# usually holds (``type(v) is int`` for integers, ``str`` for strings, ``ObjectId``
# for references ...); runs of mandatory fixed-size fields are packed by one
# precompiled ``struct``.  Anything else (int subclasses, bytes for a reference,
# ints for a bool or a float, wrong types, out-of-range values) takes the slow path:
# the per-field encoders above, which accept exactly what they always did and raise
# the precise, field-named errors.

_FAST_TYPE = {QmfType.BOOL: "_bool", QmfType.FLOAT: "_float", QmfType.DOUBLE: "_float",
              QmfType.REF: "_ObjectId", QmfType.UUID: "_UUID"}
_PACK_ARG = {QmfType.REF: "{}.raw", QmfType.UUID: "{}.bytes"}

#: (variable, type, field name or None for a presence octet, optional, slow encoder)
EItem = tuple[str, QmfType, "str | None", bool, "Callable[[bytearray, Any], None]"]


def _named(name: str, enc: Callable[[bytearray, Any], None]) -> Callable[[bytearray, Any], None]:
    """``enc`` raising ``EncodeError("'name': ...")``, as the fields' errors read."""
    def encode(out: bytearray, v: Any) -> None:
        if v is None:
            raise EncodeError(f"{name!r} is mandatory and has no value")
        try:
            enc(out, v)
        except EncodeError as exc:
            raise EncodeError(f"{name!r}: {exc}") from exc
    return encode


def _slow_run(encs: Sequence[Callable[[bytearray, Any], None]]
              ) -> Callable[[bytearray, Sequence[Any]], None]:
    def encode(out: bytearray, values: Sequence[Any]) -> None:
        for enc, v in zip(encs, values, strict=True):
            enc(out, v)
    return encode


def _u8(out: bytearray, v: int) -> None:  # a presence octet (always valid)
    out.append(v)


def _encode_items(fields: Sequence[FieldSpec], prefix: str, presence: bool,
                  object_codec: ObjectValueCodec | None) -> tuple[list[EItem], list[str]]:
    """(items to write, in order: presence octets then values; value variables)."""
    values: list[EItem] = []
    n_opt = 0
    for i, (name, t, opt) in enumerate(fields):
        qt = QmfType(t)
        optional = bool(opt) and presence
        n_opt += optional
        values.append((f"{prefix}{i}", qt, name, optional, _value_encoder(qt, object_codec)))
    pbytes: list[EItem] = [(f"{prefix}p{k}", QmfType.UINT8, None, False, _u8)
                           for k in range((n_opt + 7) // 8)]
    return pbytes + values, [v[0] for v in values]


def _presence_lines(items: Sequence[EItem], prefix: str, indent: str) -> list[str]:
    lines: list[str] = []
    n_opt = 0
    for var, _, name, optional, _ in items:
        if name is None:
            lines.append(f"{indent}{var} = 0")
        elif optional:
            pvar, bit = f"{prefix}p{n_opt // 8}", 1 << (n_opt % 8)
            lines.append(f"{indent}if {var} is not None: {pvar} |= {bit}")
            n_opt += 1
    return lines


def _pack_run_lines(group: Sequence[EItem], indent: str, env: dict[str, Any]) -> list[str]:
    """Pack a run of fixed-size values with one ``struct``, after exact type checks."""
    k = len(env)
    sname, slow = f"_s{k}", f"_slow{k}"
    fmt = ">" + "".join(_FIXED_FMT[t] for _, t, _, _, _ in group)
    env[sname] = struct.Struct(fmt)
    env[slow] = _slow_run([enc if name is None else _named(name, enc)
                           for _, _, name, _, enc in group])
    ints = [v for v, t, name, _, _ in group if name is not None and t not in _FAST_TYPE]
    checks = [f"_int is {' is '.join(f'type({v})' for v in ints)}"] if ints else []
    checks += [f"type({v}) is {_FAST_TYPE[t]}" for v, t, name, _, _ in group
               if name is not None and t in _FAST_TYPE]
    args = ", ".join(_PACK_ARG.get(t, "{}").format(v) for v, t, _, _, _ in group)
    allv = "(" + "".join(f"{v}, " for v, _, _, _, _ in group) + ")"
    if not checks:
        return [f"{indent}out += {sname}.pack({args})"]
    return [f"{indent}if {' and '.join(checks)}:",
            f"{indent}    try:",
            f"{indent}        out += {sname}.pack({args})",
            f"{indent}    except _pack_errors:",
            f"{indent}        {slow}(out, {allv})",
            f"{indent}else:",
            f"{indent}    {slow}(out, {allv})"]


def _value_lines(item: EItem, indent: str, env: dict[str, Any]) -> list[str]:
    """Write one present value (not None) of a variable-size type."""
    v, t, name, _, enc = item
    k = len(env)
    slow = f"_slow{k}"
    env[slow] = _named(str(name), enc)
    if t in (QmfType.SSTR, QmfType.LSTR):
        put = (f"out.append(len({v}_b))" if t == QmfType.SSTR
               else f"out += _u16(len({v}_b))")
        limit = 256 if t == QmfType.SSTR else 65536
        return [f"{indent}if type({v}) is _str:",
                f"{indent}    {v}_b = {v}.encode()",
                f"{indent}    if len({v}_b) < {limit}:",
                f"{indent}        {put}; out += {v}_b",
                f"{indent}    else:",
                f"{indent}        {slow}(out, {v})",
                f"{indent}else:",
                f"{indent}    {slow}(out, {v})"]
    if t == QmfType.MAP:  # most maps are empty (queue/exchange arguments ...)
        return [f"{indent}if (type({v}) is _dict or type({v}) is _WireMap) and not {v}:",
                f"{indent}    out += _EMPTY_MAP",
                f"{indent}else:",
                f"{indent}    {slow}(out, {v})"]
    return [f"{indent}{slow}(out, {v})"]


def _encoder_lines(fields: Sequence[FieldSpec], src: str, prefix: str, presence: bool,
                   object_codec: ObjectValueCodec | None, env: dict[str, Any],
                   indent: str = "    ") -> list[str]:
    """Source lines writing the values of sequence ``src`` for ``fields`` to ``out``."""
    items, variables = _encode_items(fields, prefix, presence, object_codec)
    count = len(variables)
    lines = [f"{indent}if len({src}) != {count}:",
             f"{indent}    raise _EncodeError(f'expected {count} values, got {{len({src})}}')"]
    if count:
        lines.append(f"{indent}{', '.join(variables)}, = {src}")
    lines += _presence_lines(items, prefix, indent)
    runs: list[list[EItem]] = []
    current: list[EItem] = []
    for item in items:
        if item[1] in _FIXED_FMT and not item[3]:
            current.append(item)
            continue
        if current:
            runs.append(current)
            current = []
        runs.append([item])
    if current:
        runs.append(current)
    for group in runs:
        v, t, name, optional, _ = group[0]
        if len(group) > 1 or (t in _FIXED_FMT and not optional):
            lines += _pack_run_lines(group, indent, env)
            continue
        inner = indent
        if optional:
            lines.append(f"{indent}if {v} is not None:")
            inner = indent + "    "
        else:
            msg = f"_msg{len(env)}"
            env[msg] = f"{name!r} is mandatory and has no value"
            lines += [f"{indent}if {v} is None:", f"{indent}    raise _EncodeError({msg})"]
        if t in _FIXED_FMT:
            lines += _pack_run_lines(group, inner, env)
        else:
            lines += _value_lines(group[0], inner, env)
    return lines


def _compile_source(name: str, lines: list[str], env: dict[str, Any], label: str) -> Any:
    env.update({
        "_int": int, "_bool": bool, "_float": float, "_str": str, "_dict": dict,
        "_WireMap": WireMap, "_ObjectId": ObjectId, "_UUID": uuid.UUID,
        "_EncodeError": EncodeError, "_EMPTY_MAP": _EMPTY_MAP,
        "_struct_error": struct.error, "_pack_errors": (struct.error, OverflowError, TypeError),
        "_u16": struct.Struct(">H").pack,
    })
    src = "\n".join(lines) + "\n"
    fname = f"<qmf codec {name} {ascii(label)[1:-1]}>" if label else f"<qmf codec {name}>"
    exec(compile(src, fname, "exec"), env)
    return env[name]


def compile_encoder(fields: Sequence[FieldSpec], *, presence: bool = True,
                    object_codec: ObjectValueCodec | None = None,
                    name: str = "encode", label: str = "") -> Encoder:
    """Compile an encoder for ``fields``; the inverse of :func:`compile_decoder`:
    ``encode(out, values)`` appends to the ``bytearray`` ``out``.

    ``None`` for an optional field clears its presence bit; ``None`` for a
    mandatory field raises :class:`EncodeError`, as does a value that does not fit
    its type (the message names the field).
    """
    env: dict[str, Any] = {}
    lines = [f"def {name}(out, values):"]
    lines += _encoder_lines(fields, "values", "v", presence, object_codec, env)
    fn: Encoder = _compile_source(name, lines, env, label)
    return fn


def compile_record_encoder(opcode: str, props: Sequence[FieldSpec], stats: Sequence[FieldSpec],
                           object_codec: ObjectValueCodec | None = None, label: str = ""
                           ) -> Callable[..., None]:
    """Compile the encoder of a whole ``c``/``i``/``g`` record after its class key
    (the inverse of :func:`compile_record_decoder`):
    ``encode(out, timestamp, created, deleted, object_id, properties, statistics)``
    appends timestamps, object id, presence octets, properties (not for ``i``) and
    statistics (not for ``c``) to ``out``.
    """
    name = f"encode_{opcode}_record" if opcode.isalpha() and opcode.isascii() else "encode_record"
    env: dict[str, Any] = {"_hdr": struct.Struct(">QQQ"),
                           "_no_props": f"{opcode!r} record needs properties",
                           "_no_stats": f"{opcode!r} record needs statistics"}
    lines = [f"def {name}(out, ts, cr, de, oid, props, stats):",
             "    try:",
             "        out += _hdr.pack(ts, cr, de)",
             "    except _struct_error as exc:",
             "        raise _EncodeError(f'object header: {exc}') from exc",
             "    out += oid.raw"]
    if opcode != "i":
        lines += ["    if props is None:", "        raise _EncodeError(_no_props)"]
        lines += _encoder_lines(props, "props", "v", True, object_codec, env)
    if opcode != "c":
        lines += ["    if stats is None:", "        raise _EncodeError(_no_stats)"]
        lines += _encoder_lines(stats, "stats", "w", False, object_codec, env)
    fn: Callable[..., None] = _compile_source(name, lines, env, label)
    return fn

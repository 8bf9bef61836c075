"""AMQP 1.0 typed values and message sections, bytes in and out (no I/O).

The AMQP 1.0 transport hands the engine whole encoded messages and gets whole encoded
messages back; this module turns them into :class:`Amqp10Message` and back.  It covers
the type system of AMQP 1.0 part 1 (so QMF v2 map bodies decode here too) and the
message sections of part 3: header, annotations, properties, application properties,
data, amqp-sequence, amqp-value and footer.

Python mapping: null ``None``, booleans ``bool``, integers ``int``, float/double
``float``, timestamp :class:`Timestamp` (ms since the epoch), uuid :class:`uuid.UUID`,
binary ``bytes``, string ``str``, symbol :class:`Symbol`, list ``list``, map ``dict``,
array ``list``, described :class:`Described`, char ``str`` of one character, decimals
``bytes`` (undecoded).  Encoding picks the smallest encoding of the value's type;
integers encode as ``long``, unless wrapped in :class:`Typed10`.

Every decode is bounded by the buffer: a truncated or malformed input raises
:class:`~qmf_async.errors.DecodeError`, never IndexError or struct.error.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping
from typing import Any, Final

import attrs

from ..errors import DecodeError, EncodeError
from ..frozen import define, frozen
from ._amqp10shapes import MIN_ITEMS, MapShapes

__all__ = [
    "Amqp10Message",
    "Described",
    "Symbol",
    "Timestamp",
    "Typed10",
    "decode_message",
    "decode_value",
    "encode_message",
    "encode_value",
]

#: deepest nesting of lists, maps, arrays and described values accepted
MAX_DEPTH: Final = 64


class Symbol(str):
    """An AMQP 1.0 symbol (ASCII); a plain ``str`` encodes as a string."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Symbol({str.__repr__(self)})"


class Timestamp(int):
    """An AMQP 1.0 timestamp: milliseconds since the Unix epoch."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Timestamp({int.__repr__(self)})"


@frozen
class Described:
    """A described value: ``descriptor`` (a Symbol, or an int code sent as a ulong) and
    ``value``."""

    descriptor: Any
    value: Any


@frozen
class Typed10:
    """A value with an explicit AMQP 1.0 type name (``"uint"``, ``"ubyte"``, ``"int"``,
    ``"ulong"``, ``"short"``, ``"ushort"``, ``"byte"``, ``"float"``, ``"char"``)."""

    type: str
    value: Any


@define(slots=True)
class Amqp10Message:
    """The sections of one AMQP 1.0 message that QMF uses.

    ``body`` is the concatenated data sections (``bytes``) when the body is data, the
    value of an amqp-value section, or the list of amqp-sequence contents; ``body_kind``
    says which (``"data"``, ``"value"``, ``"sequence"`` or ``"none"``).
    ``application_properties`` is empty when the section is absent.
    """

    body: Any = None
    body_kind: str = "none"
    subject: str | None = None
    reply_to: str | None = None
    content_type: str | None = None
    correlation_id: Any = None
    message_id: Any = None
    user_id: bytes | None = None
    to: str | None = None
    application_properties: dict[str, Any] = attrs.Factory(dict)
    durable: bool = False
    ttl: int | None = None


# ---------------------------------------------------------------------------- decode

_U8 = struct.Struct(">B")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_F32 = struct.Struct(">f")
_F64 = struct.Struct(">d")

# fixed-width constructors: code -> (width, converter of the bytes)
_FIXED: Final[dict[int, tuple[int, Any]]] = {
    0x50: (1, lambda b: b[0]),
    0x60: (2, lambda b: _U16.unpack(b)[0]),
    0x70: (4, lambda b: _U32.unpack(b)[0]),
    0x52: (1, lambda b: b[0]),
    0x80: (8, lambda b: _U64.unpack(b)[0]),
    0x53: (1, lambda b: b[0]),
    0x51: (1, lambda b: _I8.unpack(b)[0]),
    0x61: (2, lambda b: _I16.unpack(b)[0]),
    0x71: (4, lambda b: _I32.unpack(b)[0]),
    0x54: (1, lambda b: _I8.unpack(b)[0]),
    0x81: (8, lambda b: _I64.unpack(b)[0]),
    0x55: (1, lambda b: _I8.unpack(b)[0]),
    0x72: (4, lambda b: _F32.unpack(b)[0]),
    0x82: (8, lambda b: _F64.unpack(b)[0]),
    0x74: (4, bytes),
    0x84: (8, bytes),
    0x94: (16, bytes),
    0x73: (4, lambda b: chr(_U32.unpack(b)[0])),
    0x83: (8, lambda b: Timestamp(_I64.unpack(b)[0])),
    0x98: (16, lambda b: uuid.UUID(bytes=bytes(b))),
    0x56: (1, lambda b: b[0] != 0),
}
_VARIABLE: Final = frozenset((0xA0, 0xA1, 0xA3, 0xB0, 0xB1, 0xB3))
_CONSTANTS: Final[dict[int, Any]] = {0x40: None, 0x41: True, 0x42: False, 0x43: 0,
                                     0x44: 0, 0x45: []}
#: most items accepted in an array of a zero-width constant (bounds memory per byte)
_ZERO_WIDTH_ITEMS: Final = 64


def _need(buf: bytes | memoryview, pos: int, n: int) -> None:
    if pos + n > len(buf):
        raise DecodeError(f"AMQP 1.0 value truncated: {n} bytes needed at offset {pos}, "
                          f"{len(buf) - pos} left")


def decode_value(buf: bytes | memoryview, pos: int = 0) -> tuple[Any, int]:
    """Decode one value at ``pos``; returns it and the offset after it.

    Raises:
        DecodeError: truncated or malformed input, or nesting deeper than 64.
    """
    try:
        return _value(buf, pos, 0)
    except DecodeError:
        raise
    except (ValueError, UnicodeDecodeError, struct.error, IndexError, OverflowError) as exc:
        raise DecodeError(f"malformed AMQP 1.0 value at offset {pos}: {exc}") from exc


def _constructor(buf: bytes | memoryview, pos: int, depth: int) -> tuple[int, Any, int]:
    """The format code at ``pos`` (after any descriptor): (code, descriptor or None, pos)."""
    _need(buf, pos, 1)
    code = buf[pos]
    if code != 0x00:
        return code, None, pos + 1
    descriptor, pos = _value(buf, pos + 1, depth + 1)
    return -1, descriptor, pos


_u32 = _U32.unpack_from
_u64 = _U64.unpack_from
_i64 = _I64.unpack_from
_u32x2 = struct.Struct(">II").unpack_from


def _value(buf: bytes | memoryview, pos: int, depth: int) -> tuple[Any, int]:
    if depth > MAX_DEPTH:
        raise DecodeError(f"AMQP 1.0 value nested deeper than {MAX_DEPTH}")
    _need(buf, pos, 1)
    code = buf[pos]
    pos += 1
    # fast paths for what map messages are made of (QMF v2 bodies: maps of short
    # strings, binaries, small integers and maps); everything else in _body
    if code == 0xA1 or code == 0xA0:  # str8, vbin8
        if pos >= len(buf):
            raise DecodeError(f"AMQP 1.0 value truncated at offset {pos}")
        start = pos + 1
        pos = start + buf[pos]
        if pos > len(buf):
            raise DecodeError(f"AMQP 1.0 value truncated at offset {start}")
        raw = bytes(buf[start:pos])
        return (raw.decode("utf-8") if code == 0xA1 else raw), pos
    if code == 0xC1 or code == 0xD1:  # map8, map32
        if code == 0xC1:
            _need(buf, pos, 2)
            end = pos + 1 + buf[pos]  # the size counts the count byte
            count = buf[pos + 1]
            pos += 2
            if end < pos:
                raise DecodeError(f"AMQP 1.0 map with a negative size at offset {pos}")
        else:
            _need(buf, pos, 8)
            size, count = _u32x2(buf, pos)
            if size < 4:
                raise DecodeError(f"AMQP 1.0 map with a negative size at offset {pos}")
            pos += 8
            end = pos + size - 4  # the size counts the count field
        if end > len(buf):
            raise DecodeError(f"AMQP 1.0 map truncated: {end - len(buf)} bytes missing")
        if count > end - pos:
            raise DecodeError(f"AMQP 1.0 compound claims {count} items in {end - pos} bytes")
        if count % 2:
            raise DecodeError("AMQP 1.0 map with an odd number of items")
        depth += 1
        first = pos
        if count >= MIN_ITEMS and pos < end:
            # a map of a key sequence seen before: one regex match (_amqp10shapes)
            shaped = _SHAPES.decode(buf, pos, end, count, depth)
            if shaped is not None:
                return shaped, end
        result: dict[Any, Any] = {}
        key: Any
        item: Any
        plain = True  # every key a str8 (the map may become a shape)
        for _ in range(count >> 1):
            # the common shapes inline (a str8 key; a short text, binary, zero,
            # boolean or small integer value), the rest through _value
            if pos < end and buf[pos] == 0xA1:
                start = pos + 2
                pos = start + buf[pos + 1]
                if pos > end:
                    raise DecodeError(f"AMQP 1.0 map key overruns its map at offset {start}")
                key = bytes(buf[start:pos]).decode("utf-8")
            else:
                key, pos = _value(buf, pos, depth)
                plain = False
            c = buf[pos] if pos < end else -1
            if c == 0xA1 or c == 0xA0:
                start = pos + 2
                pos = start + buf[pos + 1]
                if pos > end:
                    raise DecodeError(f"AMQP 1.0 map value overruns its map at offset {start}")
                item = bytes(buf[start:pos])
                if c == 0xA1:
                    item = item.decode("utf-8")
            elif c == 0x43 or c == 0x44:
                item = 0
                pos += 1
            elif c == 0x42 or c == 0x41:
                item = c == 0x41
                pos += 1
            elif (c == 0x52 or c == 0x53) and pos + 1 < end:
                item = buf[pos + 1]
                pos += 2
            else:
                item, pos = _value(buf, pos, depth)
            try:
                result[key] = item
            except TypeError as exc:
                raise DecodeError(f"AMQP 1.0 map key is not hashable: {exc}") from exc
        if pos > end:
            raise DecodeError("AMQP 1.0 compound items overrun its size")
        if plain and count >= MIN_ITEMS and pos == end and 2 * len(result) == count:
            _SHAPES.seen(buf, first, end, count, tuple(result), depth)
        return result, end
    if code == 0x52 or code == 0x53:  # smalluint, smallulong
        _need(buf, pos, 1)
        return buf[pos], pos + 1
    if code == 0x43 or code == 0x44:  # uint0, ulong0
        return 0, pos
    if code == 0x70:
        return _u32(buf, pos)[0], pos + 4
    if code == 0x80:
        return _u64(buf, pos)[0], pos + 8
    if code == 0x81:
        return _i64(buf, pos)[0], pos + 8
    if code == 0x00:
        descriptor, pos = _value(buf, pos, depth + 1)
        value, pos = _value(buf, pos, depth + 1)
        return Described(descriptor, value), pos
    return _body(buf, pos, code, depth)


#: the map shapes learned by this process's decoder (bounded; see _amqp10shapes)
_SHAPES: Final = MapShapes(_value, MAX_DEPTH)


def _size_count(buf: bytes | memoryview, pos: int, wide: int,
                what: str) -> tuple[int, int, int]:
    """The size and count of a compound or array at ``pos`` (32-bit when ``wide``,
    else 8-bit), the size counted after the count; returns (size, count, position
    after them), the ``size`` bytes checked present.

    Raises:
        DecodeError: truncated, or a size smaller than its count field.
    """
    if wide:
        _need(buf, pos, 8)
        size, count = _u32x2(buf, pos)
        pos += 8
        size -= 4
    else:
        _need(buf, pos, 2)
        size, count = buf[pos], buf[pos + 1]
        pos += 2
        size -= 1
    if size < 0:
        raise DecodeError(f"AMQP 1.0 {what} with a negative size at offset {pos}")
    _need(buf, pos, size)
    return size, count, pos


def _body(buf: bytes | memoryview, pos: int, code: int, depth: int) -> tuple[Any, int]:
    if depth > MAX_DEPTH:  # arrays of arrays recurse here without passing _value
        raise DecodeError(f"AMQP 1.0 value nested deeper than {MAX_DEPTH}")
    if code in _VARIABLE:
        if code & 0x10:
            _need(buf, pos, 4)
            size = _U32.unpack_from(buf, pos)[0]
            pos += 4
        else:
            _need(buf, pos, 1)
            size = buf[pos]
            pos += 1
        _need(buf, pos, size)
        raw = bytes(buf[pos:pos + size])
        pos += size
        kind = code & 0x0F
        if kind == 0x00:
            return raw, pos
        if kind == 0x01:
            return raw.decode("utf-8"), pos
        return Symbol(raw.decode("ascii")), pos
    if code in _CONSTANTS:
        value = _CONSTANTS[code]
        return ([] if code == 0x45 else value), pos
    fixed = _FIXED.get(code)
    if fixed is not None:
        width, convert = fixed
        _need(buf, pos, width)
        return convert(buf[pos:pos + width]), pos + width
    if code in (0xC0, 0xC1, 0xD0, 0xD1):
        size, count, pos = _size_count(buf, pos, code & 0x10, "compound")
        end = pos + size
        if count > size:  # every item takes at least one byte
            raise DecodeError(f"AMQP 1.0 compound claims {count} items in {size} bytes")
        items = []
        for _ in range(count):
            item, pos = _value(buf, pos, depth + 1)
            items.append(item)
        if pos > end:
            raise DecodeError("AMQP 1.0 compound items overrun its size")
        pos = end
        if code in (0xC0, 0xD0):
            return items, pos
        if count % 2:
            raise DecodeError("AMQP 1.0 map with an odd number of items")
        try:
            return {items[i]: items[i + 1] for i in range(0, count, 2)}, pos
        except TypeError as exc:
            raise DecodeError(f"AMQP 1.0 map key is not hashable: {exc}") from exc
    if code in (0xE0, 0xF0):
        size, count, pos = _size_count(buf, pos, code & 0x10, "array")
        end = pos + size
        element, descriptor, pos = _constructor(buf, pos, depth)
        if element == -1:
            _need(buf, pos, 1)
            element = buf[pos]
            pos += 1
        # every item takes a byte, except those of zero-width constants (null, true,
        # false, 0, []), which are capped so a few bytes cannot claim 2**32 items
        limit = _ZERO_WIDTH_ITEMS if element in _CONSTANTS else size
        if count > limit:
            raise DecodeError(f"AMQP 1.0 array claims {count} items in {size} bytes")
        items = []
        for _ in range(count):
            item, pos = _body(buf, pos, element, depth + 1)
            items.append(item if descriptor is None else Described(descriptor, item))
        if pos > end:
            raise DecodeError("AMQP 1.0 array items overrun its size")
        return items, end
    raise DecodeError(f"unknown AMQP 1.0 format code 0x{code:02x} at offset {pos - 1}")


# section descriptors (small ulong codes)
_HEADER, _DELIVERY_ANN, _MESSAGE_ANN, _PROPERTIES, _APP_PROPS = 0x70, 0x71, 0x72, 0x73, 0x74
_DATA, _SEQUENCE, _VALUE, _FOOTER = 0x75, 0x76, 0x77, 0x78


def decode_message(data: bytes | memoryview) -> Amqp10Message:
    """Decode the sections of one message.

    Raises:
        DecodeError: a malformed section or value, or something that is not a section.
    """
    msg = Amqp10Message()
    pos, end = 0, len(data)
    chunks: list[bytes] = []
    sequence: list[Any] = []
    try:
        while pos < end:
            if data[pos] != 0x00:
                raise DecodeError(f"AMQP 1.0 message section expected at offset {pos}")
            descriptor, pos = _value(data, pos + 1, 1)
            if isinstance(descriptor, Symbol):
                descriptor = _SECTION_NAMES.get(descriptor, descriptor)
            if descriptor == _DATA:
                code = data[pos] if pos < end else -1
                if code == 0xA0:
                    _need(data, pos, 2)
                    size = data[pos + 1]
                    pos += 2
                elif code == 0xB0:
                    _need(data, pos, 5)
                    size = _U32.unpack_from(data, pos + 1)[0]
                    pos += 5
                else:
                    raise DecodeError("AMQP 1.0 data section does not hold binary")
                _need(data, pos, size)
                chunks.append(bytes(data[pos:pos + size]))
                pos += size
                msg.body_kind = "data"
                continue
            value, pos = _value(data, pos, 1)
            if descriptor == _PROPERTIES:
                _properties(msg, value)
            elif descriptor == _APP_PROPS:
                if value is not None:
                    if not isinstance(value, dict):
                        raise DecodeError("AMQP 1.0 application-properties is not a map")
                    msg.application_properties = {str(k): v for k, v in value.items()}
            elif descriptor == _HEADER:
                if isinstance(value, list):
                    msg.durable = bool(value[0]) if value else False
                    msg.ttl = value[2] if len(value) > 2 else None
            elif descriptor == _VALUE:
                msg.body = value
                msg.body_kind = "value"
            elif descriptor == _SEQUENCE:
                if not isinstance(value, list):
                    raise DecodeError("AMQP 1.0 amqp-sequence section is not a list")
                sequence.extend(value)
                msg.body_kind = "sequence"
            elif descriptor not in (_DELIVERY_ANN, _MESSAGE_ANN, _FOOTER):
                raise DecodeError(f"unknown AMQP 1.0 message section {descriptor!r}")
    except DecodeError:
        raise
    except (ValueError, UnicodeDecodeError, struct.error, IndexError, TypeError,
            OverflowError) as exc:
        raise DecodeError(f"malformed AMQP 1.0 message: {exc}") from exc
    if msg.body_kind == "data":
        msg.body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    elif msg.body_kind == "sequence":
        msg.body = sequence
    return msg


_SECTION_NAMES: Final = {
    "amqp:header:list": _HEADER, "amqp:delivery-annotations:map": _DELIVERY_ANN,
    "amqp:message-annotations:map": _MESSAGE_ANN, "amqp:properties:list": _PROPERTIES,
    "amqp:application-properties:map": _APP_PROPS, "amqp:data:binary": _DATA,
    "amqp:amqp-sequence:list": _SEQUENCE, "amqp:amqp-value:*": _VALUE,
    "amqp:footer:map": _FOOTER,
}


def _text(value: Any, what: str) -> str | None:
    if value is None or type(value) is str:
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    raise DecodeError(f"AMQP 1.0 properties.{what} is a {type(value).__name__}")


def _properties(msg: Amqp10Message, fields: Any) -> None:
    if not isinstance(fields, list):
        raise DecodeError("AMQP 1.0 properties section is not a list")
    n = len(fields)
    msg.message_id = fields[0] if n > 0 else None
    user = fields[1] if n > 1 else None
    if user is not None and not isinstance(user, bytes):
        raise DecodeError("AMQP 1.0 properties.user-id is not binary")
    msg.user_id = user
    msg.to = _text(fields[2], "to") if n > 2 else None
    msg.subject = _text(fields[3], "subject") if n > 3 else None
    msg.reply_to = _text(fields[4], "reply-to") if n > 4 else None
    msg.correlation_id = fields[5] if n > 5 else None
    msg.content_type = _text(fields[6], "content-type") if n > 6 else None


# ---------------------------------------------------------------------------- encode

def _str8(code8: int, code32: int, raw: bytes) -> bytes:
    n = len(raw)
    if n < 256:
        return bytes((code8, n)) + raw
    return bytes((code32,)) + _U32.pack(n) + raw


def _int(value: int) -> bytes:
    if -128 <= value <= 127:
        return b"\x55" + _I8.pack(value)
    if -(1 << 63) <= value < (1 << 63):
        return b"\x81" + _I64.pack(value)
    if 0 <= value < (1 << 64):
        return b"\x80" + _U64.pack(value)
    raise EncodeError(f"integer {value} does not fit an AMQP 1.0 long or ulong")


def _typed(value: Typed10) -> bytes:
    t, v = value.type, value.value
    try:
        if t == "uint":
            if v == 0:
                return b"\x43"
            return b"\x52" + bytes((v,)) if 0 < v < 256 else b"\x70" + _U32.pack(v)
        if t == "ulong":
            if v == 0:
                return b"\x44"
            return b"\x53" + bytes((v,)) if 0 < v < 256 else b"\x80" + _U64.pack(v)
        if t == "int":
            return b"\x54" + _I8.pack(v) if -128 <= v <= 127 else b"\x71" + _I32.pack(v)
        if t == "long":
            return _int(v) if -(1 << 63) <= v < (1 << 63) else b"\x81" + _I64.pack(v)
        if t == "ubyte":
            return b"\x50" + _U8.pack(v)
        if t == "ushort":
            return b"\x60" + _U16.pack(v)
        if t == "byte":
            return b"\x51" + _I8.pack(v)
        if t == "short":
            return b"\x61" + _I16.pack(v)
        if t == "float":
            return b"\x72" + _F32.pack(v)
        if t == "char":
            return b"\x73" + _U32.pack(ord(v))
    except (struct.error, TypeError, ValueError, OverflowError) as exc:
        raise EncodeError(f"{v!r} is not a valid AMQP 1.0 {t}: {exc}") from exc
    raise EncodeError(f"unknown AMQP 1.0 type name {t!r}")


def encode_value(value: Any, *, _depth: int = 0) -> bytes:
    """Encode one value (see the module docstring for the mapping).

    Raises:
        EncodeError: a value with no AMQP 1.0 encoding, or nesting deeper than 64.
    """
    if _depth > MAX_DEPTH:
        raise EncodeError(f"value nested deeper than {MAX_DEPTH}")
    if value is None:
        return b"\x40"
    if value is True:
        return b"\x41"
    if value is False:
        return b"\x42"
    if isinstance(value, Symbol):
        try:
            return _str8(0xA3, 0xB3, value.encode("ascii"))
        except UnicodeEncodeError as exc:
            raise EncodeError(f"symbol {value!r} is not ASCII") from exc
    if isinstance(value, str):
        return _str8(0xA1, 0xB1, value.encode("utf-8"))
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _str8(0xA0, 0xB0, bytes(value))
    if isinstance(value, Timestamp):
        return b"\x83" + _I64.pack(value)
    if isinstance(value, int):
        return _int(value)
    if isinstance(value, float):
        return b"\x82" + _F64.pack(value)
    if isinstance(value, uuid.UUID):
        return b"\x98" + value.bytes
    if isinstance(value, Typed10):
        return _typed(value)
    if isinstance(value, Described):
        descriptor = value.descriptor
        if type(descriptor) is int:  # numeric descriptors are ulong (part 1, 1.5)
            descriptor = Typed10("ulong", descriptor)
        return (b"\x00" + encode_value(descriptor, _depth=_depth + 1)
                + encode_value(value.value, _depth=_depth + 1))
    if isinstance(value, Mapping):
        parts = []
        for k, v in value.items():
            parts.append(encode_value(k, _depth=_depth + 1))
            parts.append(encode_value(v, _depth=_depth + 1))
        return _compound(0xC1, 0xD1, b"".join(parts), 2 * len(value))
    if isinstance(value, (list, tuple)):
        if not value:
            return b"\x45"
        return _compound(0xC0, 0xD0, b"".join(encode_value(v, _depth=_depth + 1)
                                               for v in value), len(value))
    raise EncodeError(f"no AMQP 1.0 encoding for {type(value).__name__}")


def _compound(code8: int, code32: int, payload: bytes, count: int) -> bytes:
    if len(payload) + 1 < 256 and count < 256:
        return bytes((code8, len(payload) + 1, count)) + payload
    return bytes((code32,)) + struct.pack(">II", len(payload) + 4, count) + payload


def encode_message(
    body: Any,
    *,
    subject: str | None = None,
    reply_to: str | None = None,
    content_type: str | None = None,
    correlation_id: Any = None,
    message_id: Any = None,
    user_id: bytes | None = None,
    to: str | None = None,
    application_properties: Mapping[str, Any] | None = None,
    body_kind: str = "data",
) -> bytes:
    """Encode a message: a properties section (trailing nulls left out), application
    properties when given, and the body as one data section (``body_kind="data"``,
    ``body`` bytes) or an amqp-value section (``body_kind="value"``).

    Raises:
        EncodeError: a value with no AMQP 1.0 encoding, or a bad ``body_kind``.
    """
    fields = [message_id, user_id, to, subject, reply_to, correlation_id, content_type]
    while fields and fields[-1] is None:
        fields.pop()
    out = []
    if fields:
        out.append(b"\x00\x53\x73" + encode_value(
            [Symbol(f) if i == 6 and f is not None else f for i, f in enumerate(fields)]))
    if application_properties:
        out.append(b"\x00\x53\x74" + encode_value(dict(application_properties)))
    if body_kind == "data":
        if not isinstance(body, (bytes, bytearray, memoryview)):
            raise EncodeError(f"a data body must be bytes, not {type(body).__name__}")
        out.append(b"\x00\x53\x75" + _str8(0xA0, 0xB0, bytes(body)))
    elif body_kind == "value":
        out.append(b"\x00\x53\x77" + encode_value(body))
    else:
        raise EncodeError(f"body_kind must be 'data' or 'value', not {body_kind!r}")
    return b"".join(out)

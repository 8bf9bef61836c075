"""AMQP 0-10 typed values: the maps, lists and arrays that QMF v1 carries.

Pure functions over ``bytes``: ``decode_*(buf, pos, end, depth) -> (value, pos)`` and
``encode_*(out, value)`` appending to a ``bytearray``.

Decoded maps, lists and arrays are plain ``dict``/``list`` subclasses
(:class:`WireMap`, :class:`WireList`, :class:`WireArray`) that remember the AMQP
type code each value arrived with, so that re-encoding reproduces the received bytes
exactly.  Values built by users are plain Python objects whose AMQP type is inferred
(see :func:`infer_code`).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import DecodeError, EncodeError

__all__ = [
    "WireMap",
    "WireList",
    "WireArray",
    "MAX_DEPTH",
    "decode_map",
    "decode_list",
    "decode_array",
    "decode_typed",
    "encode_map",
    "encode_list",
    "encode_array",
    "encode_typed",
    "infer_code",
]

#: Maximum nesting of maps, lists and arrays accepted from the wire.
MAX_DEPTH = 32

#: Maximum item count of an array of zero-width items (void, bit) accepted from the wire.
MAX_ZERO_WIDTH_ITEMS = 16

_U8 = struct.Struct(">B")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_U32x2 = struct.Struct(">II")
_ARRAY_HDR = struct.Struct(">IBI")


class WireMap(dict[str, Any]):
    """A ``dict`` that remembers the AMQP type code of each value read from the wire."""

    __slots__ = ("types",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.types: dict[str, int] = {}


class WireList(list[Any]):
    """A ``list`` that remembers the AMQP type code of each item read from the wire."""

    __slots__ = ("types",)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.types: list[int] = []


class WireArray(list[Any]):
    """A ``list`` encoded as an AMQP 0-10 array: every item has the type ``code``."""

    __slots__ = ("code",)

    def __init__(self, items: Any = (), code: int | None = None) -> None:
        super().__init__(items)
        self.code: int | None = code


# Fast constructors for decoders: an empty container without running the Python
# ``__init__`` (``dict.__new__``/``list.__new__`` plus the ``types`` slot).
_dict_new = dict.__new__
_list_new = list.__new__
_set_map_types = WireMap.__dict__["types"].__set__
_set_list_types = WireList.__dict__["types"].__set__


def new_wire_map() -> WireMap:
    """An empty :class:`WireMap` (fast path for decoders)."""
    m = _dict_new(WireMap)
    _set_map_types(m, {})
    return m


# --------------------------------------------------------------------------- sizes

def _fixed_width(code: int) -> int:
    """Width in bytes of a fixed-size type, -1 for variable-size, raises for invalid."""
    hi = code >> 4
    if hi <= 7:
        return 1 << hi
    if hi == 0xC:
        return 5
    if hi == 0xD:
        return 9
    if hi == 0xF:
        return 0
    if hi in (0x8, 0x9, 0xA):
        return -1
    raise DecodeError(f"invalid AMQP 0-10 type code 0x{code:02x}")


_FIXED_STRUCTS: dict[int, struct.Struct] = {
    0x00: struct.Struct(">B"),
    0x01: struct.Struct(">b"),
    0x02: struct.Struct(">B"),
    0x10: struct.Struct(">H"),
    0x11: struct.Struct(">h"),
    0x12: struct.Struct(">H"),
    0x20: struct.Struct(">I"),
    0x21: struct.Struct(">i"),
    0x22: struct.Struct(">I"),
    0x23: struct.Struct(">f"),
    0x30: struct.Struct(">Q"),
    0x31: struct.Struct(">q"),
    0x32: struct.Struct(">Q"),
    0x33: struct.Struct(">d"),
    0x38: struct.Struct(">q"),
}

_TEXT_CODECS = {0x84: "latin-1", 0x85: "utf-8", 0x86: "utf-16-be",
                0x94: "latin-1", 0x95: "utf-8", 0x96: "utf-16-be"}


# --------------------------------------------------------------------------- decode

def _need(pos: int, n: int, end: int) -> None:
    if pos + n > end:
        raise DecodeError(f"truncated: need {n} bytes, {max(end - pos, 0)} left", pos)


def decode_typed(code: int, buf: bytes, pos: int, end: int, depth: int = 0) -> tuple[Any, int]:
    """Decode one value of AMQP 0-10 type ``code`` at ``pos``.

    Raises:
        DecodeError: the bytes are truncated, malformed or nested too deeply.
    """
    st = _FIXED_STRUCTS.get(code)
    if st is not None:
        n = st.size
        if pos + n > end:
            _need(pos, n, end)
        return st.unpack_from(buf, pos)[0], pos + n
    if code == 0x95 or code == 0x90 or code == 0x94 or code == 0x96:
        _need(pos, 2, end)
        n = (buf[pos] << 8) | buf[pos + 1]
        pos += 2
        _need(pos, n, end)
        raw = buf[pos:pos + n]
        if code == 0x90:
            return raw, pos + n
        return _text(raw, code, pos), pos + n
    if code == 0xA8:
        return decode_map(buf, pos, end, depth + 1)
    if code == 0xA9:
        return decode_list(buf, pos, end, depth + 1)
    if code == 0xAA:
        return decode_array(buf, pos, end, depth + 1)
    if code == 0x08:
        _need(pos, 1, end)
        b = buf[pos]
        if b > 1:
            raise DecodeError(f"boolean byte 0x{b:02x} is neither 0 nor 1", pos)
        return b == 1, pos + 1
    if code in (0x80, 0x84, 0x85, 0x86):
        _need(pos, 1, end)
        n = buf[pos]
        pos += 1
        _need(pos, n, end)
        raw = buf[pos:pos + n]
        if code == 0x80:
            return raw, pos + n
        return _text(raw, code, pos), pos + n
    if code in (0xA0, 0xAB):
        _need(pos, 4, end)
        n = _U32.unpack_from(buf, pos)[0]
        pos += 4
        _need(pos, n, end)
        return buf[pos:pos + n], pos + n
    if code == 0x48:
        _need(pos, 16, end)
        return uuid.UUID(bytes=bytes(buf[pos:pos + 16])), pos + 16
    if code == 0xF0:
        return None, pos
    if code == 0xF1:
        return True, pos
    if code == 0x04:
        _need(pos, 1, end)
        return _text(buf[pos:pos + 1], 0x84, pos), pos + 1
    if code == 0x27:
        _need(pos, 4, end)
        return _text(buf[pos:pos + 4], 0x27, pos), pos + 4
    width = _fixed_width(code)
    if width < 0:
        raise DecodeError(f"unsupported AMQP 0-10 type code 0x{code:02x}", pos)
    _need(pos, width, end)
    return buf[pos:pos + width], pos + width


def _text(raw: bytes, code: int, pos: int) -> str:
    enc = _TEXT_CODECS.get(code, "utf-32-be")
    try:
        return raw.decode(enc)
    except UnicodeDecodeError as exc:
        raise DecodeError(f"invalid {enc} text: {exc.reason}", pos) from exc


def _container(buf: bytes, pos: int, end: int, depth: int) -> tuple[int, int]:
    if depth > MAX_DEPTH:
        raise DecodeError(f"nesting deeper than {MAX_DEPTH}", pos)
    _need(pos, 4, end)
    size = _U32.unpack_from(buf, pos)[0]
    pos += 4
    _need(pos, size, end)
    return pos, pos + size


def decode_map(buf: bytes, pos: int, end: int, depth: int = 0) -> tuple[WireMap, int]:
    """Decode an AMQP 0-10 map (uint32 size, uint32 count, entries).

    Raises:
        DecodeError: malformed, truncated, duplicate keys, or nested too deeply.
    """
    if depth > MAX_DEPTH:
        raise DecodeError(f"nesting deeper than {MAX_DEPTH}", pos)
    if pos + 8 > end:
        raise DecodeError("truncated map header", pos)
    size, count = _U32x2.unpack_from(buf, pos)
    mend = pos + 4 + size
    if mend > end or size < 4:
        raise DecodeError(f"map size {size} runs past its container", pos)
    pos += 8
    if count == 0:
        if pos != mend:
            raise DecodeError(f"map size mismatch: {mend - pos} bytes left over", pos)
        return new_wire_map(), pos
    if count * 2 > mend - pos:
        raise DecodeError(f"map count {count} exceeds its size", pos)
    result = _dict_new(WireMap)
    types: dict[str, int] = {}
    _set_map_types(result, types)
    for _ in range(count):
        if pos >= mend:
            raise DecodeError("truncated map entry", pos)
        klen = buf[pos]
        pos += 1
        _need(pos, klen + 1, mend)
        key = _text(buf[pos:pos + klen], 0x85, pos)
        pos += klen
        code = buf[pos]
        pos += 1
        value, pos = decode_typed(code, buf, pos, mend, depth)
        if key in result:
            raise DecodeError(f"duplicate map key {key!r}", pos)
        result[key] = value
        types[key] = code
    if pos != mend:
        raise DecodeError(f"map size mismatch: {mend - pos} bytes left over", pos)
    return result, pos


def decode_list(buf: bytes, pos: int, end: int, depth: int = 0) -> tuple[WireList, int]:
    """Decode an AMQP 0-10 list (uint32 size, uint32 count, typed items).

    Raises:
        DecodeError: malformed, truncated or nested too deeply.
    """
    pos, lend = _container(buf, pos, end, depth)
    if lend - pos < 4:
        raise DecodeError("list shorter than its count field", pos)
    count = _U32.unpack_from(buf, pos)[0]
    pos += 4
    if count > lend - pos:
        raise DecodeError(f"list count {count} exceeds its size", pos)
    result = _list_new(WireList)
    types: list[int] = []
    _set_list_types(result, types)
    for _ in range(count):
        _need(pos, 1, lend)
        code = buf[pos]
        value, pos = decode_typed(code, buf, pos + 1, lend, depth)
        result.append(value)
        types.append(code)
    if pos != lend:
        raise DecodeError(f"list size mismatch: {lend - pos} bytes left over", pos)
    return result, pos


def decode_array(buf: bytes, pos: int, end: int, depth: int = 0) -> tuple[WireArray, int]:
    """Decode an AMQP 0-10 array (uint32 size, type code, uint32 count, values).

    Raises:
        DecodeError: malformed, truncated or nested too deeply.
    """
    pos, aend = _container(buf, pos, end, depth)
    if aend - pos < 5:
        raise DecodeError("array shorter than its header", pos)
    code = buf[pos]
    count = _U32.unpack_from(buf, pos + 1)[0]
    pos += 5
    width = _fixed_width(code)
    if width == 0:
        # void/bit items take no bytes: only a small count is accepted, or a few
        # bytes of input could claim gigabytes of decoded items
        if count > MAX_ZERO_WIDTH_ITEMS:
            raise DecodeError(f"array of {count} zero-width items (limit "
                              f"{MAX_ZERO_WIDTH_ITEMS})", pos)
    elif count > aend - pos:
        raise DecodeError(f"array count {count} exceeds its size", pos)
    if width > 0 and count * width != aend - pos:
        raise DecodeError(f"array of {count} x {width} bytes does not fill its size", pos)
    result = WireArray(code=code)
    for _ in range(count):
        value, pos = decode_typed(code, buf, pos, aend, depth)
        result.append(value)
    if pos != aend:
        raise DecodeError(f"array size mismatch: {aend - pos} bytes left over", pos)
    return result, pos


# --------------------------------------------------------------------------- encode

def infer_code(value: Any) -> int:
    """The AMQP 0-10 type code used for a plain Python value.

    Raises:
        EncodeError: the value has no AMQP 0-10 representation.
    """
    if value is None:
        return 0xF0
    if isinstance(value, bool):
        return 0x08
    if isinstance(value, int):
        if -(1 << 63) <= value < (1 << 63):
            return 0x31
        if 0 <= value < (1 << 64):
            return 0x32
        raise EncodeError(f"integer {value} does not fit in 64 bits")
    if isinstance(value, float):
        return 0x33
    if isinstance(value, str):
        return 0x95
    if isinstance(value, (bytes, bytearray, memoryview)):
        return 0xA0
    if isinstance(value, uuid.UUID):
        return 0x48
    if isinstance(value, WireArray):
        return 0xAA
    if isinstance(value, Mapping):
        return 0xA8
    if isinstance(value, (list, tuple)):
        return 0xA9
    to_map = getattr(value, "to_amqp_map", None)
    if to_map is not None:
        return 0xA8
    raise EncodeError(f"cannot encode {type(value).__name__} as an AMQP 0-10 value")


def _put_text(out: bytearray, value: Any, code: int, width: int) -> None:
    if isinstance(value, str):
        raw = value.encode(_TEXT_CODECS.get(code, "utf-8"))
    elif isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
    else:
        raise EncodeError(f"expected str or bytes, got {type(value).__name__}")
    n = len(raw)
    if n >= 1 << (8 * width):
        raise EncodeError(f"string of {n} bytes does not fit a {8 * width}-bit length")
    out += n.to_bytes(width, "big")
    out += raw


def encode_typed(out: bytearray, code: int, value: Any) -> None:
    """Append ``value`` encoded as AMQP 0-10 type ``code``.

    Raises:
        EncodeError: the value does not fit the type.
    """
    st = _FIXED_STRUCTS.get(code)
    try:
        if st is not None:
            if isinstance(value, bool) or (code not in (0x23, 0x33) and not isinstance(value, int)):
                raise EncodeError(f"type 0x{code:02x} needs an int, got {type(value).__name__}")
            out += st.pack(value)
            return
    except struct.error as exc:
        raise EncodeError(f"{value!r} does not fit AMQP type 0x{code:02x}") from exc
    if code in (0x90, 0x94, 0x95, 0x96):
        _put_text(out, value, code, 2)
    elif code in (0x80, 0x84, 0x85, 0x86):
        _put_text(out, value, code, 1)
    elif code in (0xA0, 0xAB):
        _put_text(out, value, code, 4)
    elif code == 0xA8:
        encode_map(out, value)
    elif code == 0xA9:
        encode_list(out, value)
    elif code == 0xAA:
        encode_array(out, value)
    elif code == 0x08:
        if not isinstance(value, bool):
            raise EncodeError(f"boolean expected, got {type(value).__name__}")
        out.append(1 if value else 0)
    elif code == 0x48:
        if not isinstance(value, uuid.UUID):
            raise EncodeError(f"uuid expected, got {type(value).__name__}")
        out += value.bytes
    elif code == 0xF0:
        if value is not None:
            raise EncodeError("void must be None")
    elif code == 0xF1:
        pass
    elif code == 0x04:
        _put_fixed(out, value.encode("latin-1") if isinstance(value, str) else value, 1, code)
    elif code == 0x27:
        _put_fixed(out, value.encode("utf-32-be") if isinstance(value, str) else value, 4, code)
    else:
        try:
            width = _fixed_width(code)
        except DecodeError as exc:
            raise EncodeError(str(exc)) from None
        if width < 0:
            raise EncodeError(f"unsupported AMQP 0-10 type code 0x{code:02x}")
        _put_fixed(out, value, width, code)


def _put_fixed(out: bytearray, value: Any, width: int, code: int) -> None:
    if not isinstance(value, (bytes, bytearray)) or len(value) != width:
        raise EncodeError(f"type 0x{code:02x} needs exactly {width} bytes")
    out += value


def _encode_item(out: bytearray, code: int | None, value: Any) -> None:
    if code is not None:
        mark = len(out)
        out.append(code)
        try:
            encode_typed(out, code, value)
            return
        except EncodeError:
            del out[mark:]
    code = infer_code(value)
    out.append(code)
    encode_typed(out, code, value)


def _sized(out: bytearray, body: Callable[[bytearray], None]) -> None:
    mark = len(out)
    out += b"\0\0\0\0"
    body(out)
    size = len(out) - mark - 4
    if size >= 1 << 32:
        raise EncodeError("container larger than 4 GiB")
    out[mark:mark + 4] = _U32.pack(size)


def encode_map(out: bytearray, value: Any) -> None:
    """Append an AMQP 0-10 map; a :class:`WireMap` keeps its received type codes.

    Raises:
        EncodeError: a key is not a short string or a value cannot be encoded.
    """
    if not isinstance(value, Mapping):
        to_map = getattr(value, "to_amqp_map", None)
        if to_map is None:
            raise EncodeError(f"map expected, got {type(value).__name__}")
        value = to_map()
    types = value.types if isinstance(value, WireMap) else None

    def body(buf: bytearray) -> None:
        buf += _U32.pack(len(value))
        for key, item in value.items():
            if not isinstance(key, str):
                raise EncodeError(f"map key must be str, got {type(key).__name__}")
            _put_text(buf, key, 0x85, 1)
            _encode_item(buf, types.get(key) if types else None, item)

    _sized(out, body)


def encode_list(out: bytearray, value: Sequence[Any]) -> None:
    """Append an AMQP 0-10 list; a :class:`WireList` keeps its received type codes.

    Raises:
        EncodeError: an item cannot be encoded.
    """
    if not isinstance(value, (list, tuple)):
        raise EncodeError(f"list expected, got {type(value).__name__}")
    types = value.types if isinstance(value, WireList) and len(value.types) == len(value) else None

    def body(buf: bytearray) -> None:
        buf += _U32.pack(len(value))
        for i, item in enumerate(value):
            _encode_item(buf, types[i] if types else None, item)

    _sized(out, body)


def encode_array(out: bytearray, value: Sequence[Any]) -> None:
    """Append an AMQP 0-10 array; the item type is ``value.code`` or inferred.

    Raises:
        EncodeError: items are of mixed or unencodable types.
    """
    if not isinstance(value, (list, tuple)):
        raise EncodeError(f"array expected, got {type(value).__name__}")
    code = value.code if isinstance(value, WireArray) else None
    if code is None:
        code = infer_code(value[0]) if value else 0xF0
    if code >> 4 == 0xF and len(value) > MAX_ZERO_WIDTH_ITEMS:
        raise EncodeError(f"array of {len(value)} zero-width items (limit {MAX_ZERO_WIDTH_ITEMS})")

    def body(buf: bytearray) -> None:
        buf += bytes((code,))
        buf += _U32.pack(len(value))
        for item in value:
            encode_typed(buf, code, item)

    _sized(out, body)

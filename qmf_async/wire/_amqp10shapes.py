"""Learned map shapes: AMQP 1.0 maps of a known key sequence decoded in one regex match.

QMF v2 sends the same maps over and over: every object of a class has the same keys in
the same order (qpidd sorts them), and most of its values are zeros, small counters,
booleans and the same few names.  Decoding such a map item by item costs a few hundred
nanoseconds of Python per key and value.  :class:`MapShapes` learns the key sequences
of the maps it sees decoded (a sequence seen :data:`LEARN_AFTER` times becomes a
*shape*) and, for a later map of that shape:

- matches each run of its pairs whose values are fixed-width scalars (or the same
  short text in the maps it was learned from) with one compiled regex (the keys as
  literals);
- maps each value's bytes to its value through a table (every one- and two-byte scalar
  encoding, the zeros of the wider integers, uuids and those short texts); only the
  others are decoded one by one;
- decodes each other value item by item (texts and binaries inline; a small map of
  immutable values, such as qpidd's object ids and schema ids, from a table of those
  seen, copied out);
- builds the dict from the shape's keys (shared ``str`` objects) and the values;
- for a shape that is one such run (qpidd's statistics), also learns the *layouts* of
  its maps (which format code each value had: the same codes make the same byte
  positions): a later map of a known layout is recognised by one big-integer mask
  test over its bytes (keys and codes) and its values come from one ``struct`` call,
  the nulls, booleans, zeros and literal texts being constants of the layout
  (bounded: :data:`MAX_LAYOUTS` per shape, dropped for a shape whose maps rarely fit
  them).

The result is exactly what the item-by-item decoder gives (same keys, values, types and
order); anything unexpected (no match, a group whose size field disagrees, a value that
does not decode) gives None and the caller decodes the map item by item, raising its
usual errors.  Mutable values (lists, maps, arrays) are never shared through the table.

Bounded: at most :data:`MAX_SHAPES` shapes (then no more are learned) and
:data:`MAX_MEMO` remembered values (then the table starts again from its fixed part).
Pure: no I/O.
"""

from __future__ import annotations

import re
import struct
import uuid
from collections.abc import Callable
from typing import Any, Final

__all__ = ["LEARN_AFTER", "MAX_MEMO", "MAX_SHAPES", "MIN_ITEMS", "MapShapes"]

#: a key sequence becomes a shape when this many maps had it (a short answer does
#: not pay for compiling a regex)
LEARN_AFTER: Final = 8
#: maps with fewer items (keys + values) are decoded item by item
MIN_ITEMS: Final = 6
#: most shapes learned (per MapShapes)
MAX_SHAPES: Final = 512
#: most shapes per (item count, first key)
_PER_SLOT: Final = 8
#: most values remembered besides the fixed one- and two-byte encodings
MAX_MEMO: Final = 8192
#: most candidate key sequences counted before they become shapes
_MAX_CANDIDATES: Final = 4096
#: most pairs in a shape (the regex grows with it)
_MAX_PAIRS: Final = 1024

#: a value encoded in a fixed width (null, booleans, zeros, numbers, timestamps,
#: chars, decimals, uuids; not the empty list 0x45: mutable)
_SCALAR: Final = (rb"[\x40-\x44]|[\x50-\x56][\x00-\xff]|[\x60\x61][\x00-\xff]{2}"
                  rb"|[\x70-\x74][\x00-\xff]{4}|[\x80-\x84][\x00-\xff]{8}"
                  rb"|[\x94\x98][\x00-\xff]{16}")
#: the format codes _SCALAR matches
_SCALAR_CODES: Final = frozenset((*range(0x40, 0x45), *range(0x50, 0x57), 0x60, 0x61,
                                  *range(0x70, 0x75), *range(0x80, 0x85), 0x94, 0x98))
#: texts, binaries, symbols (one-byte size): matched as literals when they repeat
_TEXT_CODES: Final = frozenset((0xA0, 0xA1, 0xA3))
#: the longest such value (bytes, all told) matched as a literal
_LITERAL: Final = 64
_u64 = struct.Struct(">Q").unpack_from
_u32 = struct.Struct(">I").unpack_from
_i64 = struct.Struct(">q").unpack_from
_i32 = struct.Struct(">i").unpack_from
#: the largest map (bytes, all told) remembered whole
_MEMO_MAP: Final = 160
#: the value types a remembered map may hold (shared between its copies)
_IMMUTABLE: Final = frozenset((str, bytes, int, bool, float, type(None), uuid.UUID))

#: ``value(buf, pos, depth) -> (value, pos after it)``: the item-by-item decoder
ValueDecoder = Callable[[Any, int, int], tuple[Any, int]]


def _fixed_table() -> dict[bytes, Any]:
    """Every one- and two-byte scalar encoding and its value (part 1, 1.6): null,
    true, false, uint0, ulong0; ubyte, smalluint, smallulong; byte, smallint,
    smalllong; boolean; and the zero of each wider integer."""
    table: dict[bytes, Any] = {b"\x40": None, b"\x41": True, b"\x42": False,
                               b"\x43": 0, b"\x44": 0}
    for b in range(256):
        signed = b - 256 if b > 127 else b
        table[bytes((0x50, b))] = b
        table[bytes((0x52, b))] = b
        table[bytes((0x53, b))] = b
        table[bytes((0x51, b))] = signed
        table[bytes((0x54, b))] = signed
        table[bytes((0x55, b))] = signed
        table[bytes((0x56, b))] = b != 0
    # the zeros of the wider integers (qpidd sends some statistics as int, uint)
    for code, width in ((0x60, 2), (0x61, 2), (0x70, 4), (0x71, 4), (0x80, 8), (0x81, 8)):
        table[bytes((code,)) + bytes(width)] = 0
    return table


class _Memo(dict[bytes, Any]):
    """The value table: a scalar's bytes -> its value.  A scalar it lacks is decoded
    by ``__missing__`` (called by ``dict.__getitem__``, so a run of groups maps to
    values in one C-level ``map``): the common wide integers inline, the others by
    the item-by-item decoder; uuids and literal texts are remembered (bounded: past
    :data:`MAX_MEMO` the table starts again from its fixed part), other wide
    numbers not (they are counters: rarely the same twice)."""

    __slots__ = ("_decode", "_fixed")

    def __init__(self, fixed: dict[bytes, Any], decode: ValueDecoder) -> None:
        super().__init__(fixed)
        self._fixed = fixed
        self._decode = decode

    def __missing__(self, raw: bytes) -> Any:
        code = raw[0]
        if code == 0x80:  # ulong, uint, long, int: the common ones inline
            return _u64(raw, 1)[0]
        if code == 0x70:
            return _u32(raw, 1)[0]
        if code == 0x81:
            return _i64(raw, 1)[0]
        if code == 0x71:
            return _i32(raw, 1)[0]
        value = self._decode(raw, 0, 0)[0]  # raises when malformed
        if code == 0x98 or code in _TEXT_CODES:  # a uuid, a literal text
            if len(self) >= MAX_MEMO + len(self._fixed):
                self.clear()
                self.update(self._fixed)
            self[raw] = value
        return value


def _no_run(buf: Any, pos: int, end: int, depth: int) -> None:
    return None


#: the struct format of each fixed-width scalar a layout unpacks (its value is what
#: the value table gives for those bytes); the other scalars are constants in a
#: layout (null, true, false, the zeros) or keep the map off layouts (chars,
#: decimals, timestamps, uuids)
_UNPACKED: Final = {0x50: "B", 0x52: "B", 0x53: "B", 0x51: "b", 0x54: "b", 0x55: "b",
                    0x56: "?", 0x60: "H", 0x61: "h", 0x70: "I", 0x71: "i", 0x72: "f",
                    0x80: "Q", 0x81: "q", 0x82: "d"}
_CONSTANT_CODES: Final = frozenset((0x40, 0x41, 0x42, 0x43, 0x44))
#: most layouts per shape, and per map size in bytes
MAX_LAYOUTS: Final = 16
_PER_SIZE: Final = 4
#: layouts are dropped for a shape when fewer than half of this many maps fitted one
_LAYOUT_TRIAL: Final = 256
#: most layouts of all shapes together (each holds a copy of its shape's keys)
_MAX_ALL_LAYOUTS: Final = 256


class _Layout:
    """The bytes of one map of a one-regex shape with its values' encodings (format
    codes) fixed: the same keys, the same codes, so the same size, the values' bytes
    free.  A map of that size whose bytes agree with it at every key and code byte
    (one big-integer mask test) has its values unpacked by one ``struct`` call; the
    null, boolean, zero and literal-text values are constants of the layout."""

    __slots__ = ("expected", "keys", "mask", "template", "unpack")

    def __init__(self, expected: int, mask: int, unpack: Callable[[Any], tuple[Any, ...]],
                 keys: tuple[str, ...], template: dict[str, Any]) -> None:
        self.expected = expected
        self.mask = mask
        self.unpack = unpack
        #: the keys of the unpacked values, in order; ``template``: every key with
        #: its constant value (None where a value is unpacked)
        self.keys = keys
        self.template = template


class _Shape:
    """One learned key sequence: its keys (``str``, shared by every map decoded
    through it) and its segments: a regex for each run of pairs whose values were
    fixed-width scalars, or the same short text in both maps it was learned from
    (``(regex, None)``), the key of each other pair (``(None, key bytes)``, its value
    decoded item by item)."""

    __slots__ = ("keys", "layout_hits", "layout_probes", "layouts", "run", "segments",
                 "single", "template")

    def __init__(self, raw_keys: list[bytes], keys: tuple[str, ...],
                 kinds: list[bytes | None]) -> None:
        self.keys = keys
        #: the keys, each with None: a map of this shape starts as a copy (sized once,
        #: the keys' hashes known) and takes its values by ``update``
        self.template: dict[str, Any] = dict.fromkeys(keys)
        self.segments: list[tuple[re.Pattern[bytes] | None, bytes | None]] = []
        run: list[bytes] = []
        for raw, kind in zip(raw_keys, kinds, strict=True):
            if kind is not None:
                alternatives = _SCALAR if not kind else re.escape(kind) + b"|" + _SCALAR
                run.append(re.escape(raw) + rb"(" + alternatives + rb")")
                continue
            if run:
                self.segments.append((re.compile(b"".join(run)), None))
                run = []
            self.segments.append((None, raw))
        if run:
            self.segments.append((re.compile(b"".join(run)), None))
        #: the regex of a shape that is one run of such pairs (qpidd's statistics)
        self.single = self.segments[0][0] if len(self.segments) == 1 else None
        #: ``run(buf, pos, end, depth) -> the map or None`` for the other shapes
        #: (MapShapes._compile)
        self.run: Callable[[Any, int, int, int], dict[str, Any] | None] = _no_run
        #: the layouts of a one-regex shape by map size (None: not used for it)
        self.layouts: dict[int, list[_Layout]] | None = {} if self.single is not None \
            else None
        self.layout_probes = 0
        self.layout_hits = 0


class MapShapes:
    """The shapes and the value table of one decoder (see the module's docstring).
    ``value`` is the item-by-item decoder, used for the values the table lacks."""

    def __init__(self, value: ValueDecoder, max_depth: int = 1 << 30) -> None:
        self._value = value
        self._max_depth = max_depth
        self._memo = _Memo(_fixed_table(), value)
        #: small maps of immutable values (ids, schema ids), by their bytes
        self._maps: dict[bytes, dict[Any, Any]] = {}
        self._slots: dict[tuple[int, bytes], list[_Shape]] = {}
        #: key sequences seen, not learned yet: [the kinds of the values of the first
        #: map, how many maps]
        self._candidates: dict[tuple[int, tuple[str, ...]], list[Any]] = {}
        self.shapes = 0
        #: layouts learned, all shapes together (at most _MAX_ALL_LAYOUTS)
        self.layouts = 0
        #: maps decoded through a shape, and those no shape fitted
        self.hits = 0
        self.misses = 0

    def decode(self, buf: Any, pos: int, end: int, count: int,
               depth: int) -> dict[str, Any] | None:
        """The map of ``count`` items in ``buf[pos:end]`` (after its size and count),
        or None when no shape fits it; ``depth``: that of the map's items."""
        if buf[pos] != 0xA1 or pos + 1 >= end or depth > self._max_depth:
            return None
        shapes = self._slots.get((count, bytes(buf[pos:pos + 2 + buf[pos + 1]])))
        if shapes is None:
            return None
        for shape in shapes:
            single = shape.single
            if single is not None:
                layouts = shape.layouts
                if layouts is not None:
                    of_size = layouts.get(end - pos)
                    if of_size is not None:  # a layout seen: one mask test each
                        shape.layout_probes += 1
                        raw = bytes(buf[pos:end])
                        whole = int.from_bytes(raw, "big")
                        for layout in of_size:
                            if whole & layout.mask == layout.expected:
                                shape.layout_hits += 1
                                self.hits += 1
                                out = layout.template.copy()
                                out.update(zip(layout.keys, layout.unpack(raw), strict=True))
                                return out
                # one regex match, its groups through the table
                m = single.match(buf, pos, end)
                if m is None or m.end() != end:
                    continue
                out = shape.template.copy()
                try:
                    out.update(zip(shape.keys, map(self._memo.__getitem__, m.groups()),
                                   strict=True))
                except Exception:  # malformed: the item-by-item decoder says how
                    continue
                self.hits += 1
                if layouts is not None:
                    self._layout(shape, layouts, m, pos, end)
                return out
            made = shape.run(buf, pos, end, depth)
            if made is not None:
                self.hits += 1
                return made
        self.misses += 1
        return None

    def _layout(self, shape: _Shape, layouts: dict[int, list[_Layout]], m: re.Match[bytes],
                pos: int, end: int) -> None:
        """Learn the layout of the map ``m`` matched in ``buf[pos:end]`` (bounded; none
        for a map holding a char, decimal, timestamp or uuid); layouts are dropped for
        the shape when too few maps fit them."""
        if shape.layout_probes >= _LAYOUT_TRIAL:
            if 2 * shape.layout_hits < shape.layout_probes:
                shape.layouts = None  # its maps change their encodings too often
                return
            shape.layout_probes = shape.layout_hits = 0
        size = end - pos
        of_size = layouts.get(size)
        if self.layouts >= _MAX_ALL_LAYOUTS or sum(map(len, layouts.values())) >= MAX_LAYOUTS \
                or (of_size is not None and len(of_size) >= _PER_SIZE):
            return
        raw = m.string[pos:end]
        mask = bytearray(b"\xff" * size)
        fmt = [">"]
        at = 0  # the bytes up to here are in the format
        keys: list[str] = []
        template = shape.template.copy()
        memo = self._memo
        for i, key in enumerate(shape.keys, 1):
            start, stop = m.start(i) - pos, m.end(i) - pos
            code = raw[start]
            if code in _CONSTANT_CODES or code in _TEXT_CODES:
                template[key] = memo[bytes(raw[start:stop])]  # the whole value literal
                continue
            kind = _UNPACKED.get(code)
            if kind is None:
                return
            fmt.append(f"{start + 1 - at}x{kind}")
            at = stop
            mask[start + 1:stop] = bytes(stop - start - 1)
            keys.append(key)
        if at < size:
            fmt.append(f"{size - at}x")
        unpack = struct.Struct("".join(fmt))
        if unpack.size != size:  # cannot happen: every value was matched whole
            return
        expected = int.from_bytes(raw, "big") & int.from_bytes(mask, "big")
        self.layouts += 1
        layouts.setdefault(size, []).append(_Layout(
            expected, int.from_bytes(mask, "big"), unpack.unpack, tuple(keys), template))

    def _compile(self, shape: _Shape) -> None:
        """``shape.run(buf, pos, end, depth) -> the map or None``: its segments
        unrolled into one generated function (a regex match per run of scalars, its
        groups through the value table; :meth:`_item` for each other pair), the map
        built as one dict display of the shape's keys."""
        env: dict[str, Any] = {"_lookup": self._memo.__getitem__, "_item": self._item,
                               "_map": map, "_keys": shape.keys}
        lines = ["def run(buf, pos, end, depth):", "    try:"]
        at = 0
        for i, (regex, key) in enumerate(shape.segments):
            if regex is not None:
                env[f"_r{i}"] = regex
                names = [f"v{at + j}" for j in range(regex.groups)]
                at += regex.groups
                lines += [f"        m = _r{i}.match(buf, pos, end)",
                          "        if m is None:", "            return None",
                          f"        {', '.join(names)}, = _map(_lookup, m.groups())",
                          "        pos = m.end()"]
            else:
                env[f"_k{i}"] = key
                lines += [f"        got = _item(buf, pos, end, depth, _k{i})",
                          "        if got is None:", "            return None",
                          f"        v{at}, pos = got"]
                at += 1
        lines += ["    except Exception:  # malformed: the item-by-item decoder says how",
                  "        return None",
                  "    if pos != end:", "        return None",
                  "    return {" + ", ".join(f"_keys[{j}]: v{j}" for j in range(at)) + "}"]
        namespace = dict(env)
        exec(compile("\n".join(lines) + "\n", "<amqp10 shape>", "exec"), namespace)
        shape.run = namespace["run"]

    def _item(self, buf: Any, pos: int, end: int, depth: int,
              key: bytes) -> tuple[Any, int] | None:
        """The pair of ``key`` (its bytes) at ``pos`` decoded: (value, position after
        it), or None when the key differs or the value does not decode (the
        item-by-item decoder says how then).  Texts and binaries inline; a small map
        of immutable values from the table of those seen (copied out); a large map
        through a shape when one fits (qpidd's ``_values``), else item by item."""
        after = pos + len(key)
        if after >= end or buf[pos:after] != key:
            return None
        code = buf[after]
        if code == 0xA0 or code == 0xA1:  # binary, text: inline
            pos = after + 2 + buf[after + 1]
            if pos > end:
                return None
            raw = bytes(buf[after + 2:pos])
            if code == 0xA1:
                try:
                    return raw.decode("utf-8"), pos
                except UnicodeDecodeError:
                    return None
            return raw, pos
        size = -1
        if code == 0xD1 and after + 9 <= end:  # map32 (qpidd's ids, schema ids, values)
            size = 5 + int.from_bytes(buf[after + 1:after + 5], "big")
            if size > _MEMO_MAP and size >= 9 and after + size <= end:
                # a large map: through a shape if one fits (checked as _value would)
                count = int.from_bytes(buf[after + 5:after + 9], "big")
                first = after + 9
                if count >= MIN_ITEMS and count % 2 == 0 and count <= size - 9 \
                        and first < after + size:
                    got = self.decode(buf, first, after + size, count, depth + 1)
                    if got is not None:
                        return got, after + size
        elif code == 0xC1 and after + 1 < end:
            size = 2 + buf[after + 1]
        small = 0 < size <= _MEMO_MAP and after + size <= end
        if small:  # a small map (an id, a schema id): kept whole, copied out
            raw = bytes(buf[after:after + size])
            known = self._maps.get(raw)
            if known is not None:
                return known.copy(), after + size
        try:
            value, pos = self._value(buf, after, depth)
        except Exception:  # malformed: the item-by-item decoder says how
            return None
        if small and pos == after + len(raw) and type(value) is dict \
                and all(type(v) in _IMMUTABLE for v in value.values()):
            if len(self._maps) >= MAX_MEMO:
                self._maps.clear()
            self._maps[raw] = value.copy()
        return value, pos

    def seen(self, buf: Any, pos: int, end: int, count: int, keys: tuple[str, ...],
             depth: int) -> None:
        """The map of ``count`` items in ``buf[pos:end]`` whose keys (all str8, no
        duplicate) are ``keys`` was decoded item by item: the LEARN_AFTER-th time a key
        sequence is seen it becomes a shape, with the kinds of this map's values (a
        short text the same as in the first map becomes a literal)."""
        if self.shapes >= MAX_SHAPES or len(keys) > _MAX_PAIRS:
            return
        first = keys[0].encode("utf-8")
        if len(self._slots.get((count, b"\xa1" + bytes((len(first) & 0xFF,)) + first),
                               ())) >= _PER_SLOT:
            return
        sig = (count, keys)
        candidates = self._candidates
        entry = candidates.get(sig)
        if entry is not None and entry[1] + 1 < LEARN_AFTER:
            entry[1] += 1
            return
        walked = self._walk(buf, pos, end, depth, len(keys))
        if walked is None:
            return
        raw_keys, kinds = walked
        if entry is None:  # seen once: its kinds kept, to compare with a later one
            if len(candidates) >= _MAX_CANDIDATES:
                candidates.clear()
            candidates[sig] = [kinds, 1]
            return
        del candidates[sig]
        before = entry[0]
        # a text the same in both maps is matched as a literal; one that changed, or
        # anything else, is decoded item by item
        kinds = [k if k == b or not k else None for k, b in zip(kinds, before, strict=True)]
        slot = self._slots.setdefault((count, raw_keys[0]), [])
        if len(slot) >= _PER_SLOT:
            return
        shape = _Shape(raw_keys, keys, kinds)
        if shape.single is None:
            self._compile(shape)
        slot.append(shape)
        self.shapes += 1

    def _walk(self, buf: Any, pos: int, end: int, depth: int,
              pairs: int) -> tuple[list[bytes], list[bytes | None]] | None:
        """The keys' bytes and the values' kinds of a map that just decoded: b"" for
        a fixed-width scalar, the bytes of a short text, binary or symbol, None for
        the others."""
        raw_keys: list[bytes] = []
        kinds: list[bytes | None] = []
        try:
            for _ in range(pairs):
                klen = buf[pos + 1]
                raw_keys.append(bytes(buf[pos:pos + 2 + klen]))
                pos += 2 + klen
                code = buf[pos]
                after = self._value(buf, pos, depth)[1]
                if code in _SCALAR_CODES:
                    kinds.append(b"")
                elif code in _TEXT_CODES and after - pos <= _LITERAL:
                    kinds.append(bytes(buf[pos:after]))
                else:
                    kinds.append(None)
                pos = after
        except Exception:  # it decoded a moment ago; nothing to learn otherwise
            return None
        return (raw_keys, kinds) if pos == end else None

"""Learned map shapes in the AMQP 1.0 decoder (qmf_async/wire/_amqp10shapes.py): a map
whose key sequence was seen before decodes through one regex match, to exactly what
the item-by-item decoder gives; anything unexpected falls back to it."""

from __future__ import annotations

import base64
import json
import struct
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from qmf_async.errors import DecodeError
from qmf_async.wire import V2ObjectId, V2SchemaId, _amqp10, decode_amqp10_message
from qmf_async.wire._amqp10 import Described, Symbol, Timestamp, decode_value, encode_value
from qmf_async.wire._amqp10shapes import LEARN_AFTER, MAX_SHAPES, MapShapes

CAPTURE = Path(__file__).parent / "data" / "qmf2" / "qpidd-1.40-v2.jsonl"


@pytest.fixture
def shapes(monkeypatch: pytest.MonkeyPatch) -> Iterator[MapShapes]:
    """A fresh shape table for the decoder (the process's one is left alone)."""
    fresh = MapShapes(_amqp10._value, _amqp10.MAX_DEPTH)
    monkeypatch.setattr(_amqp10, "_SHAPES", fresh)
    yield fresh


def _plain(data: bytes) -> Any:
    """The item-by-item decode (a table that never learns)."""
    table = MapShapes(_amqp10._value, _amqp10.MAX_DEPTH)
    table.seen = lambda *args: None  # type: ignore[method-assign]
    saved = _amqp10._SHAPES
    _amqp10._SHAPES = table  # type: ignore[misc]
    try:
        return decode_value(data)[0]
    finally:
        _amqp10._SHAPES = saved  # type: ignore[misc]


def _same(a: Any, b: Any) -> bool:
    """Equal with the same types all the way down (True is not 1, b"x" not "x")."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):  # NaN is itself; -0.0 is not 0.0
        return struct.pack(">d", a) == struct.pack(">d", b)
    return bool(a == b)


def _obj(name: str, count: int, creator: bytes = b"anonymous") -> dict[str, Any]:
    # a qpidd-like object map: timestamps, an id map, values of every common kind
    return {
        "_create_ts": Timestamp(17), "_delete_ts": 0,
        "_object_id": {"_agent_epoch": 1, "_object_name": name.encode()},
        "_schema_id": {"_class_name": b"queue", "_hash": uuid.UUID(int=7),
                       "_package_name": b"org.apache.qpid.broker", "_type": b"_data"},
        "_update_ts": 10**18 + count,
        "_values": {"acquires": count, "big": 2**40 + count, "creator": creator,
                    "durable": True, "flow": False, "neg": -5, "none": None,
                    "ratio": 0.5, "sym": Symbol("s"), "text": "t\u00e9", "zero": 0},
    }


def test_repeated_maps_decode_through_a_shape_to_the_same_values(shapes: MapShapes) -> None:
    # the first LEARN_AFTER sightings teach the key sequences; the others take the shapes
    for i in range(LEARN_AFTER + 6):
        data = encode_value(_obj(f"q{i % 3}", i * 1000))
        got = decode_value(data)[0]
        assert _same(got, _plain(data)), i
    assert shapes.shapes >= 2 and shapes.hits >= 6


def test_qpidd_messages_decode_as_item_by_item(shapes: MapShapes) -> None:
    messages = [base64.b64decode(json.loads(line)["message_b64"])
                for line in CAPTURE.read_text().splitlines()]
    for _ in range(LEARN_AFTER + 1):
        for raw in messages:
            got = decode_amqp10_message(raw)
            saved = _amqp10._SHAPES
            _amqp10._SHAPES = MapShapes(_amqp10._value)  # type: ignore[misc]
            try:
                want = decode_amqp10_message(raw)
            finally:
                _amqp10._SHAPES = saved  # type: ignore[misc]
            assert _same(got.body, want.body)
            assert _same(got.application_properties, want.application_properties)
    assert shapes.hits > 100


def test_a_shaped_map_nested_too_deep_raises_as_item_by_item(shapes: MapShapes) -> None:
    # a map of scalars the value table knows, nested around the depth limit: through
    # its shape it must raise where the item-by-item decoder does (values past
    # MAX_DEPTH), not come back whole
    flat = {"a": 1, "b": 2, "c": True}
    for _ in range(LEARN_AFTER + 1):
        decode_value(encode_value(flat))
    assert shapes.shapes == 1
    outcomes = set()
    for levels in range(_amqp10.MAX_DEPTH - 3, _amqp10.MAX_DEPTH + 3):
        data = encode_value(flat)
        for _ in range(levels):  # list32 of one item (the encoder refuses this depth)
            data = b"\xd0" + struct.pack(">II", 4 + len(data), 1) + data
        try:
            want: Any = _plain(data)
        except DecodeError:
            want = DecodeError
        try:
            got: Any = decode_value(data)[0]
        except DecodeError:
            got = DecodeError
        assert got is want if want is DecodeError else _same(got, want), levels
        outcomes.add(want is DecodeError)
    assert outcomes == {True, False}


@pytest.mark.parametrize("change", [
    {"creator": b"someone-else"},  # a literal text changed
    {"acquires": b"text now"},  # a scalar became a text
    {"creator": None},  # a text became null
    {"zero": [1, 2]},  # a scalar became a list
    {"creator": b"\xa1\x03big"},  # a text holding the next key's bytes
    {"neg": Described(Symbol("d"), 1)},  # a described value
    {"big": Timestamp(5)},
])
def test_a_map_that_departs_from_its_shape_decodes_as_it_is(
        shapes: MapShapes, change: dict[str, Any]) -> None:
    for i in range(LEARN_AFTER + 1):
        decode_value(encode_value(_obj("q", i)))
    obj = _obj("q", 9)
    obj["_values"].update(change)
    data = encode_value(obj)
    assert _same(decode_value(data)[0], _plain(data))


def test_maps_handed_out_are_never_shared(shapes: MapShapes) -> None:
    data = encode_value(_obj("q", 1))
    for _ in range(LEARN_AFTER + 1):
        decode_value(data)
    first = decode_value(data)[0]
    first["_object_id"]["_agent_epoch"] = 99
    first["_values"]["acquires"] = 99
    again = decode_value(data)[0]
    assert again["_object_id"]["_agent_epoch"] == 1
    assert again["_values"]["acquires"] == 1
    assert again["_object_id"] is not first["_object_id"]


def test_malformed_bytes_raise_as_without_shapes(shapes: MapShapes) -> None:
    data = encode_value(_obj("q", 1))
    for _ in range(LEARN_AFTER + 1):
        decode_value(data)
    # a size field that lies, and a truncated map: the item-by-item decoder's errors
    at = data.index(b"\xa1\x07creator") + 9
    bad = data[:at + 1] + bytes([200]) + data[at + 2:]
    for broken in (bad, data[:-3]):
        with pytest.raises(DecodeError) as ours:
            decode_value(broken)
        with pytest.raises(DecodeError) as plain:
            _plain(broken)
        assert str(ours.value) == str(plain.value)


def test_shapes_are_bounded(shapes: MapShapes) -> None:
    for i in range(MAX_SHAPES + 40):
        data = encode_value({f"k{i}-{j}": j for j in range(4)})
        for _ in range(LEARN_AFTER):
            decode_value(data)
    assert shapes.shapes == MAX_SHAPES


def test_duplicate_keys_are_not_learned(shapes: MapShapes) -> None:
    # map8 a: 1, a: 2, b: 3 (the last a wins, as item by item)
    body = b"".join(encode_value(x) for x in ("a", 1, "a", 2, "b", 3))
    data = bytes((0xC1, len(body) + 1, 6)) + body
    for _ in range(LEARN_AFTER + 1):
        assert decode_value(data)[0] == {"a": 2, "b": 3}
    assert shapes.shapes == 0


def test_v2_ids_are_built_once_and_still_checked() -> None:
    wire = {"_object_name": b"org.apache.qpid.broker:queue:q", "_agent_epoch": 1}
    one = V2ObjectId.from_map(dict(wire))
    assert V2ObjectId.from_map(dict(wire)) is one
    assert one == V2ObjectId("org.apache.qpid.broker:queue:q", None, 1)
    with pytest.raises(DecodeError):  # a bool is no epoch, remembered or not
        V2ObjectId.from_map({**wire, "_agent_epoch": True})
    sid = {"_class_name": b"queue", "_package_name": b"p", "_hash": uuid.UUID(int=3),
           "_type": b"_data"}
    first = V2SchemaId.from_map(dict(sid))
    assert V2SchemaId.from_map(dict(sid)) is first
    assert first == V2SchemaId("p", "queue", "_data", uuid.UUID(int=3))
    with pytest.raises(DecodeError):
        V2SchemaId.from_map({**sid, "_package_name": 5})


def _big_obj(count: int) -> dict[str, Any]:
    # a qpidd-like object whose values map is over the size kept whole (a map32, as
    # qpidd's statistics): decoded through its own shape from inside its object's
    obj = _obj("q", count)
    obj["_values"].update({f"stat{j:02d}": count * j for j in range(30)})
    return obj


def _values_header(data: bytes) -> int:
    at = data.index(b"\xa1\x07_values") + 9
    assert data[at] == 0xD1
    return at


@pytest.mark.parametrize("edit", [
    None, ("count", 1), ("count", -2), ("count", 2), ("count", 10**6), ("size", 1),
    ("size", -1), ("size", 10**6), ("size", -10**6), ("count", -10**6),
])
def test_a_large_map_inside_a_shape_decodes_as_item_by_item(
        shapes: MapShapes, edit: tuple[str, int] | None) -> None:
    # the values map (map32) of a shaped object goes straight to its own shape; any
    # header that lies (count odd, too large, size past the object or short) decodes,
    # or raises, as the item-by-item decoder does
    for i in range(LEARN_AFTER + 1):
        decode_value(encode_value(_big_obj(i)))
    hits = shapes.hits
    data = bytearray(encode_value(_big_obj(7)))
    if edit is not None:
        at = _values_header(data) + (1 if edit[0] == "size" else 5)
        old = struct.unpack_from(">I", data, at)[0]
        struct.pack_into(">I", data, at, max(0, min(old + edit[1], 2**32 - 1)))
    try:
        want: Any = _plain(bytes(data))
    except DecodeError as exc:
        want = str(exc)
    try:
        got: Any = decode_value(bytes(data))[0]
    except DecodeError as exc:
        got = str(exc)
    assert got == want if isinstance(want, str) else _same(got, want)
    if edit is None:
        assert shapes.hits >= hits + 2  # the object and its values, through shapes


def _stats(**change: Any) -> dict[str, Any]:
    # a statistics-like map: every value a fixed-width scalar or a repeated short text
    values: dict[str, Any] = {"acquires": 0, "big": 2**40, "creator": b"anonymous",
                              "depth": 9, "flag": True, "neg": -5, "none": None,
                              "ratio": 0.5, "sym": Symbol("s"), "zero": 0}
    values.update(change)
    return values


@pytest.mark.parametrize("change", [
    {}, {"depth": 10}, {"depth": 300}, {"big": 2**63 + 5}, {"big": 7}, {"flag": False},
    {"zero": 1}, {"acquires": 2**33}, {"neg": -2**40}, {"none": 3}, {"ratio": float("nan")},
    {"ratio": -0.0}, {"creator": b"someone"}, {"creator": "t\u00e9"}, {"sym": Symbol("t")},
    {"none": Timestamp(5)}, {"none": uuid.UUID(int=9)}, {"depth": None},
])
def test_maps_through_learned_layouts_decode_as_item_by_item(
        shapes: MapShapes, change: dict[str, Any]) -> None:
    # once a one-regex shape has seen a map's encodings (its layout), a map with the
    # same codes takes one mask test and one struct call: the same values and types as
    # item by item, whatever the values; one with other codes goes the regex's way
    for i in range(LEARN_AFTER + 2):
        decode_value(encode_value(_stats(depth=i)))
    for twice in range(2):
        data = encode_value(_stats(**change))
        got = decode_value(data)[0]
        assert _same(got, _plain(data)), twice
        # and from a memoryview (as the frame decoder hands its bodies on)
        assert _same(decode_value(memoryview(data))[0], got), twice
    shape = next(s for slot in shapes._slots.values() for s in slot)
    hits = shape.layout_hits
    data = encode_value(_stats(depth=100))  # the first maps' layout, another value
    got = decode_value(data)[0]
    assert _same(got, _plain(data)) and got["depth"] == 100
    assert shape.layout_hits == hits + 1


def test_layouts_are_bounded_and_dropped_when_encodings_keep_changing(
        shapes: MapShapes) -> None:
    from qmf_async.wire._amqp10shapes import _LAYOUT_TRIAL, MAX_LAYOUTS

    for i in range(LEARN_AFTER + 2):
        decode_value(encode_value(_stats(depth=i)))
    shape = next(s for slot in shapes._slots.values() for s in slot)
    # many encodings of one size: a few layouts of it, then the regex alone
    variants = [_stats(depth=d, zero=z, neg=n) for d in (1, 2**20) for z in (0, 1, 2**20)
                for n in (-1, -2**20)]
    for _ in range(2):
        for v in variants:
            data = encode_value(v)
            assert _same(decode_value(data)[0], _plain(data))
    assert shape.layouts is not None
    assert sum(map(len, shape.layouts.values())) <= MAX_LAYOUTS
    assert all(len(v) <= 4 for v in shape.layouts.values())
    # maps whose encodings rarely match a layout: layouts dropped for the shape
    for i in range(2 * _LAYOUT_TRIAL):
        flags = [bool(i >> b & 1) for b in range(4)]
        data = encode_value(_stats(flag=flags[0], none=flags[1], zero=int(flags[2]),
                                   acquires=None if flags[3] else 0, depth=i % 3))
        assert _same(decode_value(data)[0], _plain(data))
    assert shape.layouts is None or shape.layout_hits * 2 >= shape.layout_probes
    assert shapes.layouts <= MAX_LAYOUTS

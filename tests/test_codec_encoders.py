"""The generated per-schema encoders (qmf_async.wire._compile): their fast paths (one
``struct`` for a run of fixed-size fields, plain ``str``/``dict`` shortcuts) must
accept, reject and write exactly what the per-field encoders do, with the same
field-named errors."""

from __future__ import annotations

import enum
import struct
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qmf_async import EncodeError, ObjectId, QmfType, wire
from qmf_async.wire._amqp010 import WireMap, encode_map
from qmf_async.wire._compile import (
    FieldSpec,
    _value_encoder,
    compile_decoder,
    compile_encoder,
    compile_record_encoder,
    compile_ref_scanner,
)

U64 = QmfType.UINT64
OID = ObjectId.make(sequence=1, broker_bank=2, agent_bank=3, object=4)


def enc(fields: Sequence[FieldSpec], values: Sequence[Any], presence: bool = True) -> bytes:
    out = bytearray()
    compile_encoder(fields, presence=presence)(out, values)
    return bytes(out)


def error(fields: Sequence[FieldSpec], values: Sequence[Any], presence: bool = True) -> str:
    with pytest.raises(EncodeError) as info:
        enc(fields, values, presence)
    return str(info.value)


def reference(fields: Sequence[FieldSpec], values: Sequence[Any], presence: bool = True
              ) -> bytes | str:
    """What a field-by-field encoder writes (bytes), or its error message: the
    behaviour the generated encoders must keep."""
    out = bytearray()
    if len(values) != len(fields):
        return f"expected {len(fields)} values, got {len(values)}"
    optional = [i for i, (_, _, opt) in enumerate(fields) if opt and presence]
    bits = sum(1 << n for n, i in enumerate(optional) if values[i] is not None)
    out += bits.to_bytes((len(optional) + 7) // 8, "little")
    for i, ((name, t, _), v) in enumerate(zip(fields, values, strict=True)):
        if v is None:
            if i in optional:
                continue
            return f"{name!r} is mandatory and has no value"
        try:
            _value_encoder(QmfType(t), None)(out, v)
        except EncodeError as exc:
            return f"{name!r}: {exc}"
    return bytes(out)


STATS: list[FieldSpec] = [(f"s{i}", U64, False) for i in range(20)]
STAT_VALUES = [i * 1000 for i in range(20)]


# --------------------------------------------------------------------------- packed runs

def test_a_run_of_uint64_is_packed_as_big_endian() -> None:
    assert enc(STATS, STAT_VALUES) == struct.pack(">20Q", *STAT_VALUES)


@pytest.mark.parametrize("bad, message", [
    ("7", "'s7': integer expected, got str"),
    (7.0, "'s7': integer expected, got float"),
    (True, "'s7': integer expected, got bool"),
    (False, "'s7': integer expected, got bool"),
    (-1, "'s7': -1 is out of range for Q"),
    (1 << 64, f"'s7': {1 << 64} is out of range for Q"),
    (None, "'s7' is mandatory and has no value"),
    (b"x", "'s7': integer expected, got bytes"),
])
def test_a_wrong_value_in_a_packed_run_names_its_field(bad: Any, message: str) -> None:
    values = list(STAT_VALUES)
    values[7] = bad
    assert error(STATS, values) == message


def test_the_first_wrong_field_of_a_run_is_reported() -> None:
    values = list(STAT_VALUES)
    values[3], values[12] = -5, "x"
    assert error(STATS, values) == "'s3': -5 is out of range for Q"


class Index:
    """Not an int, but ``struct`` would take it (``__index__``)."""

    def __index__(self) -> int:
        return 3


class Color(enum.IntEnum):
    RED = 2


def test_int_like_objects_are_refused_and_int_subclasses_accepted() -> None:
    fields: list[FieldSpec] = [("a", QmfType.UINT8, False), ("b", QmfType.INT32, False)]
    assert error(fields, [Index(), 1]) == "'a': integer expected, got Index"
    assert enc(fields, [Color.RED, -2]) == struct.pack(">Bi", 2, -2)


@pytest.mark.parametrize("t, low, high", [
    (QmfType.UINT8, 0, 255), (QmfType.UINT16, 0, 65535), (QmfType.UINT32, 0, 2**32 - 1),
    (QmfType.INT8, -128, 127), (QmfType.INT16, -32768, 32767),
    (QmfType.INT32, -2**31, 2**31 - 1), (QmfType.INT64, -2**63, 2**63 - 1),
    (QmfType.ABSTIME, 0, 2**64 - 1), (QmfType.DELTATIME, 0, 2**64 - 1),
])
def test_integer_ranges(t: QmfType, low: int, high: int) -> None:
    fields: list[FieldSpec] = [("x", U64, False), ("v", t, False)]
    assert enc(fields, [1, low]) == reference(fields, [1, low])
    assert enc(fields, [1, high]) == reference(fields, [1, high])
    code = {QmfType.UINT8: "B", QmfType.UINT16: "H", QmfType.UINT32: "I", QmfType.INT8: "b",
            QmfType.INT16: "h", QmfType.INT32: "i", QmfType.INT64: "q"}.get(t, "Q")
    assert error(fields, [1, low - 1]) == f"'v': {low - 1} is out of range for {code}"
    assert error(fields, [1, high + 1]) == f"'v': {high + 1} is out of range for {code}"


def test_bool_fields_take_bools_and_ints_only() -> None:
    fields: list[FieldSpec] = [("a", QmfType.BOOL, False), ("b", QmfType.BOOL, False),
                               ("n", QmfType.UINT16, False)]
    assert enc(fields, [True, False, 9]) == b"\x01\x00\x00\x09"
    assert enc(fields, [5, 0, 9]) == b"\x01\x00\x00\x09"  # ints count as truth values
    assert error(fields, [True, "yes", 9]) == "'b': bool expected, got str"
    assert error(fields, [True, 1.0, 9]) == "'b': bool expected, got float"
    assert error(fields, [True, None, 9]) == "'b' is mandatory and has no value"


def test_float_fields_take_numbers_but_not_bools() -> None:
    fields: list[FieldSpec] = [("f", QmfType.FLOAT, False), ("d", QmfType.DOUBLE, False)]
    assert enc(fields, [1.5, 2.25]) == struct.pack(">fd", 1.5, 2.25)
    assert enc(fields, [3, -4]) == struct.pack(">fd", 3.0, -4.0)
    assert error(fields, [True, 1.0]) == "'f': number expected, got bool"
    assert error(fields, [1.0, "2"]) == "'d': number expected, got str"
    assert error(fields, [1e300, 1.0]) == "'f': 1e+300 does not fit a >f"
    assert error(fields, [1.0, 10**400]).startswith("'d': 1000")


def test_references_and_uuids() -> None:
    u = uuid.UUID(int=0x0102030405060708090A0B0C0D0E0F10)
    fields: list[FieldSpec] = [("r", QmfType.REF, False), ("u", QmfType.UUID, False),
                               ("n", QmfType.UINT8, False)]
    expected = OID.raw + u.bytes + b"\x07"
    assert enc(fields, [OID, u, 7]) == expected
    assert enc(fields, [OID.raw, bytearray(u.bytes), 7]) == expected
    assert error(fields, [b"short", u, 7]) == "'r': object reference expected, got bytes"
    assert error(fields, [OID, str(u), 7]) == "'u': uuid expected, got str"
    assert error(fields, [OID, u, None]) == "'n' is mandatory and has no value"


# --------------------------------------------------------------------------- optional fields

def test_optional_fields_set_presence_bits_and_are_left_out_when_none() -> None:
    fields: list[FieldSpec] = [(f"o{i}", QmfType.UINT16, True) for i in range(9)]
    fields.insert(4, ("m", QmfType.SSTR, False))
    values: list[Any] = [None] * 10
    values[4] = "m"
    values[0], values[9] = 1, 2  # optional #0 and #8 (bit 0 of the second octet)
    assert enc(fields, values) == b"\x01\x01" + b"\x00\x01" + b"\x01m" + b"\x00\x02"
    assert error(fields, [*values[:3], "x", *values[4:]]) == "'o3': integer expected, got str"


def test_without_presence_optional_fields_are_mandatory() -> None:
    fields: list[FieldSpec] = [("a", QmfType.UINT8, True), ("b", QmfType.SSTR, True)]
    assert enc(fields, [1, "x"], presence=False) == b"\x01\x01x"
    assert error(fields, [None, "x"], presence=False) == "'a' is mandatory and has no value"
    assert error(fields, [1, None], presence=False) == "'b' is mandatory and has no value"


def test_wrong_number_of_values() -> None:
    assert error(STATS, STAT_VALUES[:-1]) == "expected 20 values, got 19"
    assert error([], [1]) == "expected 0 values, got 1"
    assert enc([], []) == b""


# --------------------------------------------------------------------------- strings, maps

def test_unicode_strings_are_utf8_with_their_byte_length() -> None:
    fields: list[FieldSpec] = [("s", QmfType.SSTR, False), ("l", QmfType.LSTR, False)]
    text = "héllo ☃ 𝄞"
    raw = text.encode()
    assert enc(fields, [text, text]) == bytes([len(raw)]) + raw + struct.pack(">H", len(raw)) + raw
    assert enc(fields, ["é" * 127 + "a", ""]) == b"\xff" + ("é" * 127 + "a").encode() + b"\0\0"
    assert error(fields, ["é" * 128, ""]) == "'s': string of 256 bytes is too long for a str8"
    assert error(fields, ["", "☃" * 21846]) == "'l': string of 65538 bytes is too long for a str16"
    assert error(fields, [b"bytes", ""]) == "'s': str expected, got bytes"

    class Name(str):
        pass

    assert enc(fields, [Name("ab"), Name("")]) == b"\x02ab\0\0"


def test_maps_empty_and_not() -> None:
    fields: list[FieldSpec] = [("m", QmfType.MAP, False), ("n", QmfType.MAP, True)]
    empty = bytearray()
    encode_map(empty, {})
    for e in ({}, WireMap(), OrderedDict()):
        assert enc(fields, [e, None]) == b"\x00" + bytes(empty)
    full = bytearray()
    encode_map(full, {"a": 1, "b": "ü"})
    assert enc(fields, [{"a": 1, "b": "ü"}, {}]) == b"\x01" + bytes(full) + bytes(empty)
    assert error(fields, [{1: 2}, None]) == "'m': map key must be str, got int"
    assert error(fields, [[], None]) == "'m': map expected, got list"
    assert error(fields, [{}, 5]) == "'n': map expected, got int"
    assert error(fields, [None, None]) == "'m' is mandatory and has no value"


def test_generated_code_does_not_trust_field_names() -> None:
    name = "x'); import os; ('"
    fields: list[FieldSpec] = [(name, QmfType.UINT8, False), ("s\n", QmfType.SSTR, False)]
    assert error(fields, [None, "a"]) == f"{name!r} is mandatory and has no value"
    assert error(fields, [1, None]) == "'s\\n' is mandatory and has no value"
    assert error(fields, [-1, "a"]) == f"{name!r}: -1 is out of range for B"


# --------------------------------------------------------------------------- differential

FIXED = [QmfType.UINT8, QmfType.UINT16, QmfType.UINT32, QmfType.UINT64, QmfType.INT8,
         QmfType.INT16, QmfType.INT32, QmfType.INT64, QmfType.ABSTIME, QmfType.DELTATIME,
         QmfType.BOOL, QmfType.FLOAT, QmfType.DOUBLE, QmfType.REF, QmfType.UUID]
TYPES = [*FIXED, QmfType.SSTR, QmfType.LSTR, QmfType.MAP, QmfType.LIST, QmfType.ARRAY]

ANY_VALUE = st.one_of(
    st.none(), st.booleans(), st.integers(-2**65, 2**65),
    st.sampled_from([0, 1, 255, 256, -129, 2**63, 2**64 - 1, 2**64, Color.RED]),
    st.floats(allow_nan=False), st.sampled_from([1e39, -1e39, float("inf")]),
    st.text(max_size=4), st.sampled_from(["é" * 128, "a" * 255]),
    st.binary(max_size=17), st.just(OID), st.just(uuid.UUID(int=7)),
    st.dictionaries(st.text(max_size=2), st.integers(0, 9), max_size=2),
    st.lists(st.integers(0, 9), max_size=2), st.just(Index()),
)


@st.composite
def fields_and_values(draw: st.DrawFn) -> tuple[list[FieldSpec], list[Any], bool]:
    n = draw(st.integers(0, 12))
    fields = [(f"f{i}", draw(st.sampled_from(TYPES)), draw(st.booleans())) for i in range(n)]
    values = [draw(ANY_VALUE) for _ in range(n)]
    if draw(st.booleans()):
        values.append(0)  # a wrong count, now and then
        if draw(st.booleans()):
            values = values[:-2]
    return fields, values, draw(st.booleans())


@settings(max_examples=600, deadline=None)
@given(fields_and_values())
def test_generated_encoders_match_a_field_by_field_encoder(
        case: tuple[list[FieldSpec], list[Any], bool]) -> None:
    fields, values, presence = case
    expected = reference(fields, values, presence)
    if isinstance(expected, str):
        assert error(fields, values, presence) == expected
    else:
        assert enc(fields, values, presence) == expected


@st.composite
def valid_values(draw: st.DrawFn, t: QmfType) -> Any:
    bounds = {QmfType.UINT8: (0, 255), QmfType.UINT16: (0, 65535),
              QmfType.UINT32: (0, 2**32 - 1), QmfType.INT8: (-128, 127),
              QmfType.INT16: (-32768, 32767), QmfType.INT32: (-2**31, 2**31 - 1),
              QmfType.INT64: (-2**63, 2**63 - 1)}
    if t in bounds:
        return draw(st.integers(*bounds[t]))
    if t in (QmfType.UINT64, QmfType.ABSTIME, QmfType.DELTATIME):
        return draw(st.integers(0, 2**64 - 1))
    if t == QmfType.BOOL:
        return draw(st.booleans())
    if t == QmfType.DOUBLE:
        return draw(st.floats(allow_nan=False))
    if t == QmfType.FLOAT:
        return draw(st.floats(width=32, allow_nan=False))
    if t == QmfType.REF:
        return ObjectId(draw(st.binary(min_size=16, max_size=16)))
    if t == QmfType.UUID:
        return uuid.UUID(bytes=draw(st.binary(min_size=16, max_size=16)))
    if t in (QmfType.SSTR, QmfType.LSTR):
        return draw(st.text(max_size=20))
    return draw(st.dictionaries(st.text(max_size=3), st.integers(0, 2**40), max_size=3))


@st.composite
def valid_records(draw: st.DrawFn) -> tuple[list[FieldSpec], list[Any]]:
    n = draw(st.integers(0, 14))
    types = [*FIXED, QmfType.SSTR, QmfType.LSTR, QmfType.MAP]
    fields = [(f"f{i}", draw(st.sampled_from(types)), draw(st.booleans())) for i in range(n)]
    values = [None if opt and draw(st.booleans()) else draw(valid_values(t))
              for _, t, opt in fields]
    return fields, values


@settings(max_examples=300, deadline=None)
@given(valid_records())
def test_encoded_values_decode_back(case: tuple[list[FieldSpec], list[Any]]) -> None:
    fields, values = case
    body = enc(fields, values)
    decoded, pos = compile_decoder(fields)(body, 0)
    assert pos == len(body)
    assert list(decoded) == values


# --------------------------------------------------------------------------- whole records

def test_record_encoder_writes_header_properties_and_statistics() -> None:
    props: list[FieldSpec] = [("ref", QmfType.REF, False), ("name", QmfType.SSTR, False),
                              ("opt", QmfType.UINT32, True)]
    stats: list[FieldSpec] = [("a", U64, False), ("b", QmfType.UINT32, False)]
    out = bytearray()
    compile_record_encoder("g", props, stats)(out, 1, 2, 3, OID, (OID, "q", None), (4, 5))
    assert bytes(out) == (struct.pack(">QQQ", 1, 2, 3) + OID.raw + b"\x00" + OID.raw + b"\x01q"
                          + struct.pack(">QI", 4, 5))
    out = bytearray()
    compile_record_encoder("c", props, stats)(out, 1, 2, 3, OID, (OID, "q", 6), None)
    assert bytes(out).endswith(b"\x01" + OID.raw + b"\x01q" + struct.pack(">I", 6))
    out = bytearray()
    compile_record_encoder("i", props, stats)(out, 1, 2, 3, OID, None, (4, 5))
    assert bytes(out) == struct.pack(">QQQ", 1, 2, 3) + OID.raw + struct.pack(">QI", 4, 5)
    rec = compile_record_encoder("g", props, stats)
    for args, message in [
        ((-1, 2, 3, OID, (OID, "q", None), (4, 5)), "object header: "),
        ((1, 2, 3, OID, None, (4, 5)), "'g' record needs properties"),
        ((1, 2, 3, OID, (OID, "q", None), None), "'g' record needs statistics"),
        ((1, 2, 3, OID, (OID, "q", None), (4, True)), "'b': integer expected, got bool"),
        ((1, 2, 3, OID, (OID, 5, None), (4, 5)), "'name': str expected, got int"),
        ((1, 2, 3, OID, (OID, "q"), (4, 5)), "expected 3 values, got 2"),
    ]:
        with pytest.raises(EncodeError, match="^" + message.replace("(", r"\(")):
            rec(bytearray(), *args)


def test_object_records_are_encoded_with_the_record_encoder() -> None:
    from qmf_async import SchemaClass, SchemaProperty, SchemaStatistic
    from qmf_async.wire._values import ClassKey, ClassKind

    schema = SchemaClass(ClassKind.OBJECT, ClassKey("p", "c", b"\x01" * 16),
                         properties=(SchemaProperty("n", QmfType.SSTR),),
                         statistics=(SchemaStatistic("k", U64),))
    registry = wire.SchemaRegistry([schema])
    rec = wire.ObjectRecord("g", 9, schema, 1, 2, 0, OID, ("x",), (True,))
    with pytest.raises(EncodeError, match=r"^'k': integer expected, got bool$"):
        wire.encode(rec, registry)
    rec = wire.ObjectRecord("g", 9, schema, 1, 2, 0, OID, ("x",), (7,))
    (back,) = wire.decode(wire.encode(rec, registry), registry)
    assert back == rec


# --------------------------------------------------------------------------- reference offsets

@st.composite
def records_with_lists(draw: st.DrawFn) -> tuple[list[FieldSpec], list[Any]]:
    fields, values = draw(valid_records())
    if draw(st.booleans()):  # a list among them: skipped by its size too
        at = draw(st.integers(0, len(fields)))
        fields.insert(at, ("l", QmfType.LIST, draw(st.booleans())))
        values.insert(at, draw(st.lists(st.integers(0, 9), max_size=3)))
    return fields, values


@settings(max_examples=300, deadline=None)
@given(records_with_lists(), st.binary(max_size=3))
def test_the_reference_scanner_finds_every_reference_without_decoding(
        case: tuple[list[FieldSpec], list[Any]], before: bytes) -> None:
    fields, values = case
    body = before + enc(fields, values)
    scan = compile_ref_scanner(fields)
    refs = [v for (_, t, _), v in zip(fields, values, strict=True) if t == QmfType.REF]
    if not refs:
        assert scan is None
        return
    assert scan is not None
    offsets = scan(body, len(before))
    assert [None if o is None else ObjectId(body[o:o + 16]) for o in offsets] == refs
    if len(body) > len(before):
        with pytest.raises(wire.DecodeError):
            scan(body[:-1], len(before))


def test_no_reference_scanner_for_an_object_value() -> None:
    fields: list[FieldSpec] = [("r", QmfType.REF, False), ("o", QmfType.OBJECT, False)]
    assert compile_ref_scanner(fields) is None

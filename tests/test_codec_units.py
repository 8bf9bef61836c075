"""Unit tests of the QMF v1 codec: value types, every QMF type, presence bitmasks,
AMQP 0-10 typed values, encode errors and every message type."""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest

from qmf_async import (
    Access,
    ClassKey,
    ClassKind,
    EncodeError,
    ObjectId,
    QmfType,
    SchemaArgument,
    SchemaClass,
    SchemaMethod,
    SchemaProperty,
    SchemaStatistic,
    UsageError,
    wire,
)
from qmf_async.wire._amqp010 import (
    WireArray,
    WireList,
    WireMap,
    decode_array,
    decode_list,
    decode_map,
    decode_typed,
    encode_array,
    encode_list,
    encode_map,
    encode_typed,
    infer_code,
)
from qmf_async.wire._messages import (
    AttachRequest,
    AttachResponse,
    BrokerRequest,
    BrokerResponse,
    ClassIndication,
    ClassQuery,
    CommandComplete,
    ConsoleAdded,
    EventIndication,
    GetQuery,
    Heartbeat,
    MethodRequest,
    MethodResponse,
    ObjectRecord,
    PackageIndication,
    PackageQuery,
    SchemaRequest,
    SchemaResponse,
)

HASH = bytes(range(16))
HASH2 = bytes(range(16, 32))
TS = 1_795_352_988_831_627_425


def key(name: str = "thing", package: str = "test.pkg", h: bytes = HASH) -> ClassKey:
    return ClassKey(package, name, h)


# ----------------------------------------------------------------------------- ClassKey


def test_class_key_text_form_and_parse() -> None:
    k = ClassKey("org.apache.qpid.broker", "queue", bytes.fromhex(
        "3db4e9111b6b1523a48b6855f4c5627b"))
    text = "org.apache.qpid.broker:queue(3db4e9111b6b1523a48b6855f4c5627b)"
    assert str(k) == text
    assert k.hash_hex == "3db4e9111b6b1523a48b6855f4c5627b"
    assert ClassKey.parse(text) == k
    assert ClassKey.parse(text.upper().replace("ORG.APACHE.QPID.BROKER:QUEUE",
                                               "org.apache.qpid.broker:queue")) == k
    assert hash(ClassKey.parse(text)) == hash(k)
    assert k.to_wire() == (b"\x16org.apache.qpid.broker\x05queue" + k.hash)


@pytest.mark.parametrize("text", [
    "", "pkg:cls", "pkgcls(000102030405060708090a0b0c0d0e0f)",
    "pkg:cls(000102030405060708090a0b0c0d0e0)",  # 31 digits
    "pkg:cls(000102030405060708090a0b0c0d0e0f00)",  # 34 digits
    "pkg:cls(g00102030405060708090a0b0c0d0e0f)",
    "pkg:cls(000102030405060708090a0b0c0d0e0f)x",
    "pkg:cls[000102030405060708090a0b0c0d0e0f]",
])
def test_class_key_parse_rejects(text: str) -> None:
    with pytest.raises(UsageError):
        ClassKey.parse(text)


@pytest.mark.parametrize("h", [b"", b"\0" * 15, b"\0" * 17, "0" * 16, bytearray(16)])
def test_class_key_hash_must_be_16_bytes(h: Any) -> None:
    with pytest.raises(UsageError):
        ClassKey("p", "c", h)


def test_class_key_to_wire_rejects_long_names() -> None:
    with pytest.raises(UsageError):
        ClassKey("p" * 256, "c", HASH).to_wire()
    assert ClassKey("p" * 255, "c", HASH).to_wire()[0] == 255


# ----------------------------------------------------------------------------- ObjectId


def test_object_id_make_and_parts() -> None:
    oid = ObjectId.make(flags=1, sequence=2, broker_bank=3, agent_bank=4, object=5)
    first = (1 << 60) | (2 << 48) | (3 << 28) | 4
    assert oid.first == first and oid.second == 5
    assert oid.raw == first.to_bytes(8, "big") + (5).to_bytes(8, "big")
    assert oid.to_bytes() == oid.raw
    assert (oid.flags, oid.sequence, oid.broker_bank, oid.agent_bank, oid.object) == (
        1, 2, 3, 4, 5)
    assert oid.agent_key() == (3, 4)
    assert str(oid) == "1-2-3-4-5"
    assert repr(oid) == "ObjectId('1-2-3-4-5')"


def test_object_id_extremes() -> None:
    oid = ObjectId.make(flags=15, sequence=4095, broker_bank=(1 << 20) - 1,
                        agent_bank=(1 << 28) - 1, object=(1 << 64) - 1)
    assert oid.raw == b"\xff" * 16
    assert str(oid) == f"15-4095-{(1 << 20) - 1}-{(1 << 28) - 1}-{(1 << 64) - 1}"
    assert ObjectId.parse(str(oid)) == oid
    assert str(ObjectId(b"\0" * 16)) == "0-0-0-0-0"


@pytest.mark.parametrize("text", ["0-1-1-0-26", "0-0-1-0-2", "0-1-1-0-987654321",
                                  "3-17-99-12345-18446744073709551615"])
def test_object_id_text_round_trip(text: str) -> None:
    oid = ObjectId.parse(text)
    assert str(oid) == text
    assert ObjectId.from_ints(oid.first, oid.second) == oid
    assert ObjectId.from_bytes(oid.raw) == oid
    assert hash(ObjectId.parse(text)) == hash(oid)
    assert len({oid, ObjectId.parse(text)}) == 1


def test_object_id_from_ints() -> None:
    oid = ObjectId.from_ints((1 << 48) | (1 << 28), 26)
    assert str(oid) == "0-1-1-0-26"
    for first, second in ((-1, 0), (0, -1), (1 << 64, 0), (0, 1 << 64)):
        with pytest.raises(UsageError):
            ObjectId.from_ints(first, second)
    with pytest.raises(UsageError):
        ObjectId.from_ints("1", 2)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", [
    "", "0-1-1-0", "0-1-1-0-26-1", "a-b-c-d-e", "0-1-1-0-", "0--1-1-0-26", "0-1-1-0-+5",
    "0-1-1-0-1.5", "16-0-0-0-0", "0-4096-0-0-0", f"0-0-{1 << 20}-0-0", f"0-0-0-{1 << 28}-0",
    f"0-0-0-0-{1 << 64}", "\u00b2-1-1-0-26", "\u0663-1-1-0-26", "0 1 1 0 26",
])
def test_object_id_parse_rejects(text: str) -> None:
    with pytest.raises(UsageError):
        ObjectId.parse(text)


@pytest.mark.parametrize("kw", [
    {"flags": 16}, {"flags": -1}, {"sequence": 4096}, {"broker_bank": 1 << 20},
    {"agent_bank": 1 << 28}, {"object": 1 << 64}, {"object": -1}, {"sequence": "1"},
])
def test_object_id_make_rejects(kw: dict[str, Any]) -> None:
    with pytest.raises(UsageError):
        ObjectId.make(**kw)


@pytest.mark.parametrize("raw", [b"", b"\0" * 15, b"\0" * 17, bytearray(16), "0" * 16])
def test_object_id_raw_must_be_16_bytes(raw: Any) -> None:
    with pytest.raises(UsageError):
        ObjectId(raw)


# ----------------------------------------------------------------------------- every QMF type

OV_SCHEMA = SchemaClass(
    ClassKind.OBJECT, key("embedded", h=HASH2),
    properties=[SchemaProperty("n", QmfType.UINT16), SchemaProperty("s", QmfType.SSTR)],
    statistics=[SchemaStatistic("c", QmfType.UINT8)])
OID = ObjectId.make(sequence=1, broker_bank=1, object=26)
UID = uuid.UUID("d9c0726a-1fa8-4bd8-9fb4-6fbd599657c5")


def _u32(n: int) -> bytes:
    return struct.pack(">I", n)


def _map_bytes(entries: bytes, count: int) -> bytes:
    return _u32(len(entries) + 4) + _u32(count) + entries


# (type, value, expected wire bytes of the value)
TYPE_CASES: list[tuple[QmfType, Any, bytes]] = [
    (QmfType.UINT8, 255, b"\xff"),
    (QmfType.UINT16, 0xABCD, b"\xab\xcd"),
    (QmfType.UINT32, 2**32 - 1, b"\xff\xff\xff\xff"),
    (QmfType.UINT64, 2**64 - 1, b"\xff" * 8),
    (QmfType.SSTR, "h\u00e9", b"\x03h\xc3\xa9"),
    (QmfType.LSTR, "x" * 300, b"\x01\x2c" + b"x" * 300),
    (QmfType.ABSTIME, TS, struct.pack(">Q", TS)),
    (QmfType.DELTATIME, 2_000_000_000, struct.pack(">Q", 2_000_000_000)),
    (QmfType.REF, OID, OID.raw),
    (QmfType.BOOL, True, b"\x01"),
    (QmfType.FLOAT, 1.5, struct.pack(">f", 1.5)),
    (QmfType.DOUBLE, 0.1, struct.pack(">d", 0.1)),
    (QmfType.UUID, UID, UID.bytes),
    (QmfType.MAP, {"a": 1}, _map_bytes(b"\x01a\x31" + struct.pack(">q", 1), 1)),
    (QmfType.INT8, -128, b"\x80"),
    (QmfType.INT16, -2, b"\xff\xfe"),
    (QmfType.INT32, -(2**31), b"\x80\x00\x00\x00"),
    (QmfType.INT64, -(2**63), b"\x80" + b"\0" * 7),
    (QmfType.OBJECT, wire.Typed(QmfType.UINT32, 7), b"\x03\x00\x00\x00\x07"),
    (QmfType.OBJECT, wire.ObjectValue(OV_SCHEMA, (513, "ab"), (9,)),
     b"\x14" + OV_SCHEMA.class_key.to_wire() + b"\x02\x01\x02ab\x09"),
    (QmfType.LIST, [1, "a", None],
     _map_bytes(b"\x31" + struct.pack(">q", 1) + b"\x95\x00\x01a\xf0", 3)),
    (QmfType.ARRAY, [1, 2], _u32(5 + 16) + b"\x31" + _u32(2) + struct.pack(">qq", 1, 2)),
]


def _one_field_schema(t: QmfType, optional: bool = False) -> SchemaClass:
    name = f"{'opt' if optional else 'one'}_{t.name.lower()}"
    return SchemaClass(ClassKind.OBJECT, key(name),
                       properties=[SchemaProperty("p", t, optional=optional)],
                       statistics=[SchemaStatistic("s", t)])


def _record_prefix(schema: SchemaClass, opcode: str = "c", seq: int = 0) -> bytes:
    return (b"AM2" + opcode.encode() + _u32(seq) + schema.class_key.to_wire()
            + struct.pack(">QQQ", TS, TS - 5, 0) + OID.raw)


def test_every_qmf_type_has_a_case() -> None:
    assert {t for t, _, _ in TYPE_CASES} == set(QmfType)


@pytest.mark.parametrize(("t", "value", "expected"), TYPE_CASES,
                         ids=[f"{t.name}-{i}" for i, (t, _, _) in enumerate(TYPE_CASES)])
def test_every_qmf_type_round_trips(t: QmfType, value: Any, expected: bytes) -> None:
    schema = _one_field_schema(t)
    registry = wire.SchemaRegistry([schema, OV_SCHEMA])
    for opcode, props, stats, tail in (("c", (value,), None, expected),
                                       ("i", None, (value,), expected),
                                       ("g", (value,), (value,), expected + expected)):
        rec = ObjectRecord(opcode, 42, schema, TS, TS - 5, 0, OID, props, stats)
        body = wire.encode([rec], registry)
        assert body == _record_prefix(schema, opcode, 42) + tail
        (back,) = wire.decode(body, registry)
        assert back == rec
        assert back.properties_dict() == ({} if props is None else {"p": value})
    # an optional property of every type: present, then absent
    opt = _one_field_schema(t, optional=True)
    assert registry.add(opt)
    rec = ObjectRecord("c", 1, opt, TS, TS - 5, 0, OID, (value,))
    body = wire.encode([rec], registry)
    assert body == _record_prefix(opt, "c", 1) + b"\x01" + expected
    assert wire.decode(body, registry) == [rec]
    absent = ObjectRecord("c", 1, opt, TS, TS - 5, 0, OID, (None,))
    body = wire.encode([absent], registry)
    assert body == _record_prefix(opt, "c", 1) + b"\x00"
    assert wire.decode(body, registry) == [absent]


def test_decoded_values_have_python_types() -> None:
    values = {t: v for t, v, _ in TYPE_CASES}
    schema = SchemaClass(ClassKind.OBJECT, key("all"), properties=[
        SchemaProperty(t.name.lower(), t) for t in QmfType])
    registry = wire.SchemaRegistry([schema, OV_SCHEMA])
    rec = ObjectRecord("c", 0, schema, TS, 0, 0, OID, tuple(values[t] for t in QmfType))
    (back,) = wire.decode(wire.encode([rec], registry), registry)
    d = back.properties_dict()
    assert isinstance(d["ref"], ObjectId) and d["ref"] == OID
    assert isinstance(d["uuid"], uuid.UUID)
    assert type(d["bool"]) is bool
    assert type(d["uint64"]) is int and type(d["float"]) is float
    assert isinstance(d["map"], WireMap) and isinstance(d["list"], WireList)
    assert isinstance(d["array"], WireArray) and d["array"].code == 0x31
    assert isinstance(d["object"], wire.ObjectValue) and d["object"].schema == OV_SCHEMA
    assert d == {t.name.lower(): values[t] for t in QmfType}


def test_object_value_needs_the_embedded_schema() -> None:
    schema = _one_field_schema(QmfType.OBJECT)
    rec = ObjectRecord("c", 0, schema, TS, 0, 0, OID,
                       (wire.ObjectValue(OV_SCHEMA, (1, "x"), (2,)),))
    body = wire.encode([rec], wire.SchemaRegistry([schema]))  # encode adds OV_SCHEMA
    with pytest.raises(wire.UnknownSchemaError) as info:
        wire.decode(body, wire.SchemaRegistry([schema]))
    assert info.value.class_key == OV_SCHEMA.class_key


# ----------------------------------------------------------------------------- presence bits


def _opt_schema(n_opt: int, mandatory_first: bool = True) -> SchemaClass:
    props = []
    if mandatory_first:
        props.append(SchemaProperty("m", QmfType.UINT8))
    props += [SchemaProperty(f"o{i + 1}", QmfType.UINT8, optional=True) for i in range(n_opt)]
    props.append(SchemaProperty("z", QmfType.SSTR))
    return SchemaClass(ClassKind.OBJECT, key(f"opt{n_opt}"), properties=props)


@pytest.mark.parametrize(("present", "mask"), [
    ((), b"\x00"), ((1,), b"\x01"), ((2,), b"\x02"), ((1, 2), b"\x03"),
])
def test_presence_two_optional(present: tuple[int, ...], mask: bytes) -> None:
    schema = _opt_schema(2)
    registry = wire.SchemaRegistry([schema])
    # presence octets come first, then the values of the present properties in order
    body = (_record_prefix(schema) + mask + b"\x07"
            + b"".join(bytes((0x10 + i,)) for i in present) + b"\x02zz")
    (rec,) = wire.decode(body, registry)
    expected = (7, *(0x10 + i if i in present else None for i in (1, 2)), "zz")
    assert rec.properties == expected
    assert rec.properties_dict() == {
        "m": 7, "z": "zz", **{f"o{i}": 0x10 + i for i in present}}
    assert wire.encode([rec], registry) == body


@pytest.mark.parametrize(("present", "mask"), [
    ((), b"\x00\x00"), ((1,), b"\x01\x00"), ((8,), b"\x80\x00"), ((9,), b"\x00\x01"),
    ((1, 9), b"\x01\x01"), ((2, 3, 8, 9), b"\x86\x01"), (tuple(range(1, 10)), b"\xff\x01"),
])
def test_presence_nine_optional(present: tuple[int, ...], mask: bytes) -> None:
    schema = _opt_schema(9, mandatory_first=False)
    registry = wire.SchemaRegistry([schema])
    body = (_record_prefix(schema) + mask
            + b"".join(bytes((0x20 + i,)) for i in present) + b"\x00")
    (rec,) = wire.decode(body, registry)
    assert rec.properties == (*(0x20 + i if i in present else None for i in range(1, 10)), "")
    assert wire.encode([rec], registry) == body


def test_presence_applies_only_to_properties() -> None:
    # statistics are never optional: a 'g' record has presence octets before the
    # properties only
    schema = SchemaClass(ClassKind.OBJECT, key("mixed"),
                         properties=[SchemaProperty("o", QmfType.UINT16, optional=True)],
                         statistics=[SchemaStatistic("s", QmfType.UINT16)])
    registry = wire.SchemaRegistry([schema])
    body = _record_prefix(schema, "g") + b"\x00" + b"\x00\x05"
    (rec,) = wire.decode(body, registry)
    assert rec.properties == (None,) and rec.statistics == (5,)
    body_i = _record_prefix(schema, "i") + b"\x00\x05"
    assert wire.decode(body_i, registry)[0].statistics == (5,)


# ----------------------------------------------------------------------------- AMQP 0-10 values

AMQP_CASES: list[tuple[int, Any, bytes]] = [
    (0x00, 0xFE, b"\xfe"),  # bin8
    (0x01, -2, b"\xfe"),  # int8
    (0x02, 254, b"\xfe"),  # uint8
    (0x04, "\u00e9", b"\xe9"),  # char
    (0x08, True, b"\x01"),
    (0x08, False, b"\x00"),
    (0x10, 0xABCD, b"\xab\xcd"),  # bin16
    (0x11, -2, b"\xff\xfe"),
    (0x12, 65535, b"\xff\xff"),
    (0x20, 1, b"\0\0\0\x01"),  # bin32
    (0x21, -1, b"\xff" * 4),
    (0x22, 2**32 - 1, b"\xff" * 4),
    (0x23, -2.5, struct.pack(">f", -2.5)),
    (0x27, "\U0001F600", b"\x00\x01\xf6\x00"),  # utf32 char
    (0x30, 2**64 - 1, b"\xff" * 8),  # bin64
    (0x31, -(2**63), b"\x80" + b"\0" * 7),
    (0x32, 2**64 - 1, b"\xff" * 8),
    (0x33, 1e300, struct.pack(">d", 1e300)),
    (0x38, TS, struct.pack(">q", TS)),  # datetime
    (0x40, bytes(range(16)), bytes(range(16))),  # bin128
    (0x48, UID, UID.bytes),
    (0x50, b"\x01" * 32, b"\x01" * 32),
    (0x60, b"\x02" * 64, b"\x02" * 64),
    (0x70, b"\x03" * 128, b"\x03" * 128),
    (0xC0, b"12345", b"12345"),  # bin40
    (0xC8, b"\x02\0\0\0\x05", b"\x02\0\0\0\x05"),  # dec32
    (0xD0, b"123456789", b"123456789"),  # bin72
    (0xD8, b"\x02" + b"\0" * 8, b"\x02" + b"\0" * 8),  # dec64
    (0xF0, None, b""),
    (0xF1, True, b""),  # bit
    (0x80, b"\x00\xff", b"\x02\x00\xff"),  # vbin8
    (0x84, "caf\u00e9", b"\x04caf\xe9"),  # str8-latin
    (0x85, "caf\u00e9", b"\x05caf\xc3\xa9"),  # str8-utf8
    (0x86, "\u00e9", b"\x02\x00\xe9"),  # str8-utf16
    (0x90, b"abc", b"\x00\x03abc"),  # vbin16
    (0x94, "\u00e9", b"\x00\x01\xe9"),
    (0x95, "x" * 1000, b"\x03\xe8" + b"x" * 1000),
    (0x96, "ab", b"\x00\x04\x00a\x00b"),
    (0xA0, b"\0" * 3, b"\0\0\0\x03\0\0\0"),  # vbin32
    (0xAB, b"st", b"\0\0\0\x02st"),  # struct32 kept raw
    (0xA8, {}, b"\0\0\0\x04\0\0\0\0"),
    (0xA9, [], b"\0\0\0\x04\0\0\0\0"),
    (0xA9, [True, None], b"\0\0\0\x07\0\0\0\x02\x08\x01\xf0"),
    (0xAA, WireArray([], code=0x02), b"\0\0\0\x05\x02\0\0\0\0"),
    (0xAA, WireArray([1, 2], code=0x02), b"\0\0\0\x07\x02\0\0\0\x02\x01\x02"),
    (0xAA, WireArray(["a", "bc"], code=0x95),
     b"\0\0\0\x0c\x95\0\0\0\x02\0\x01a\0\x02bc"),
]


@pytest.mark.parametrize(("code", "value", "wire_bytes"), AMQP_CASES,
                         ids=[f"0x{c:02x}-{i}" for i, (c, _, _) in enumerate(AMQP_CASES)])
def test_amqp_typed_round_trip(code: int, value: Any, wire_bytes: bytes) -> None:
    out = bytearray()
    encode_typed(out, code, value)
    assert bytes(out) == wire_bytes
    buf = b"\xee" + wire_bytes + b"\xee"  # surrounded, so offsets and ends matter
    got, end = decode_typed(code, buf, 1, len(buf) - 1)
    assert end == 1 + len(wire_bytes)
    assert (got == value and type(got) is type(value)) or (
        isinstance(value, (list, dict)) and got == value)
    # inside a map, the code is remembered and reproduced
    m = WireMap({"k": value})
    m.types["k"] = code
    out = bytearray()
    encode_map(out, m)
    assert bytes(out) == _map_bytes(b"\x01k" + bytes((code,)) + wire_bytes, 1)
    back, end = decode_map(bytes(out), 0, len(out))
    assert end == len(out)
    assert back.types == {"k": code} and back == {"k": value}


def test_fixed_width_codes_without_meaning_stay_raw() -> None:
    # 0x03 (a 1-octet fixed type qpid does not use) and 0x13 (2 octets): raw bytes
    for code, width in ((0x03, 1), (0x13, 2), (0x24, 4), (0x34, 8)):
        buf = bytes(range(1, width + 1))
        value, end = decode_typed(code, buf, 0, len(buf))
        assert value == buf and end == width
        out = bytearray()
        encode_typed(out, code, value)
        assert bytes(out) == buf


def test_wire_map_keeps_types_and_nesting() -> None:
    inner_list = _map_bytes(b"\x02\x07" + b"\xa8" + _map_bytes(b"\x01x\x21" + _u32(5), 1), 2)
    entries = (b"\x01a\x02\x05"  # uint8
               + b"\x01b\x90\x00\x02hi"  # vbin16
               + b"\x01c\x95\x00\x02hi"  # str16
               + b"\x01d\xa9" + inner_list
               + b"\x01e\xaa" + _u32(5 + 2) + b"\x12" + _u32(1) + b"\x00\x09"
               + b"\x01f\x38" + struct.pack(">q", TS))
    body = _map_bytes(entries, 6)
    m, end = decode_map(body, 0, len(body))
    assert end == len(body)
    assert m == {"a": 5, "b": b"hi", "c": "hi", "d": [7, {"x": 5}], "e": [9], "f": TS}
    assert m.types == {"a": 0x02, "b": 0x90, "c": 0x95, "d": 0xA9, "e": 0xAA, "f": 0x38}
    assert m["d"].types == [0x02, 0xA8]
    assert m["d"][1].types == {"x": 0x21}
    assert m["e"].code == 0x12
    out = bytearray()
    encode_map(out, m)
    assert bytes(out) == body
    # a plain copy loses the codes: values are re-inferred
    plain = bytearray()
    encode_map(plain, dict(m))
    assert bytes(plain) != body
    p, _ = decode_map(bytes(plain), 0, len(plain))
    # (the nested WireArray object is kept by dict(), so "e" stays an array)
    assert p.types == {"a": 0x31, "b": 0xA0, "c": 0x95, "d": 0xA9, "e": 0xAA, "f": 0x31}


def test_wire_map_value_that_no_longer_fits_is_reinferred() -> None:
    m = WireMap({"n": 5, "s": "x"})
    m.types.update({"n": 0x02, "s": 0x85})
    m["n"] = "now text"
    m["s"] = "still text"
    m["new"] = 1.5
    out = bytearray()
    encode_map(out, m)
    back, _ = decode_map(bytes(out), 0, len(out))
    assert back == {"n": "now text", "s": "still text", "new": 1.5}
    assert back.types == {"n": 0x95, "s": 0x85, "new": 0x33}


@pytest.mark.parametrize(("value", "code"), [
    ("text", 0x95), (1, 0x31), (-(2**63), 0x31), (2**63, 0x32), (True, 0x08), (False, 0x08),
    (1.5, 0x33), (b"raw", 0xA0), (bytearray(b"r"), 0xA0), (None, 0xF0), (UID, 0x48),
    ({"a": 1}, 0xA8), ([1], 0xA9), ((1, 2), 0xA9), (WireArray([1], code=0x02), 0xAA),
])
def test_plain_values_infer_types(value: Any, code: int) -> None:
    assert infer_code(value) == code
    out = bytearray()
    encode_map(out, {"k": value})
    back, _ = decode_map(bytes(out), 0, len(out))
    assert back.types["k"] == code
    assert back["k"] == (list(value) if isinstance(value, tuple) else value)
    out = bytearray()
    encode_list(out, [value])
    lst, _ = decode_list(bytes(out), 0, len(out))
    assert lst.types == [code]


def test_plain_list_array_infers_item_type() -> None:
    out = bytearray()
    encode_array(out, ["a", "b"])
    arr, _ = decode_array(bytes(out), 0, len(out))
    assert arr == ["a", "b"] and arr.code == 0x95
    out = bytearray()
    encode_array(out, [])
    arr, _ = decode_array(bytes(out), 0, len(out))
    assert arr == [] and arr.code == 0xF0


@pytest.mark.parametrize(("code", "value"), [
    (0x02, 256), (0x02, -1), (0x01, 128), (0x12, 65536), (0x22, 2**32), (0x31, 2**63),
    (0x32, -1), (0x02, "1"), (0x02, 1.0), (0x02, True), (0x21, None), (0x23, "x"),
    (0x85, "x" * 256), (0x80, b"x" * 256), (0x95, "x" * 65536), (0x85, 5),
    (0x08, 1), (0x08, None), (0x48, "d9c0726a-1fa8-4bd8-9fb4-6fbd599657c5"), (0x48, b"\0" * 16),
    (0xF0, 0), (0x40, b"\0" * 15), (0xC0, "abcde"), (0xA8, [1]), (0xA9, {"a": 1}),
    (0xA9, "abc"), (0xAA, {"a": 1}), (0xAA, WireArray([1, "x"], code=0x31)), (0xB0, b""),
    (0x81, b""),
])
def test_amqp_encode_errors(code: int, value: Any) -> None:
    with pytest.raises(EncodeError):
        encode_typed(bytearray(), code, value)


def test_map_encode_errors() -> None:
    for bad in ({1: "int key"}, {"k" * 256: 1}, {"k": object()}, {"k": 2**64},
                {"k": {"deep": {1.5}}}, 5, "text"):
        with pytest.raises(EncodeError):
            encode_map(bytearray(), bad)
    with pytest.raises(EncodeError):
        encode_list(bytearray(), [object()])
    with pytest.raises(EncodeError):
        infer_code(object())
    with pytest.raises(EncodeError):
        infer_code(-(2**63) - 1)


# ----------------------------------------------------------------------------- record encode errors

def _record(t: QmfType, value: Any, optional: bool = False) -> tuple[ObjectRecord, Any]:
    schema = _one_field_schema(t, optional)
    return (ObjectRecord("c", 0, schema, TS, 0, 0, OID, (value,)),
            wire.SchemaRegistry([schema]))


@pytest.mark.parametrize(("t", "value"), [
    (QmfType.UINT8, 256), (QmfType.UINT8, -1), (QmfType.UINT16, 1 << 16),
    (QmfType.UINT32, 1 << 32), (QmfType.UINT64, 1 << 64), (QmfType.INT8, 128),
    (QmfType.INT64, 1 << 63), (QmfType.UINT8, "1"), (QmfType.UINT32, 1.0),
    (QmfType.UINT8, True), (QmfType.SSTR, "x" * 256), (QmfType.SSTR, "\u00e9" * 128),
    (QmfType.LSTR, "x" * 65536), (QmfType.SSTR, b"bytes"), (QmfType.REF, "0-1-1-0-26"),
    (QmfType.REF, b"\0" * 15), (QmfType.UUID, str(UID)), (QmfType.BOOL, "yes"),
    (QmfType.FLOAT, "1.5"), (QmfType.FLOAT, 1e300), (QmfType.DOUBLE, None),
    (QmfType.MAP, [1]), (QmfType.LIST, {"a": 1}), (QmfType.MAP, {"a": object()}),
    (QmfType.OBJECT, 5), (QmfType.ABSTIME, -1),
])
def test_record_encode_errors(t: QmfType, value: Any) -> None:
    rec, registry = _record(t, value)
    with pytest.raises(EncodeError):
        wire.encode([rec], registry)


def test_record_shape_errors() -> None:
    rec, registry = _record(QmfType.UINT8, 1)
    with pytest.raises(EncodeError):  # wrong number of values
        wire.encode([ObjectRecord("c", 0, rec.schema, TS, 0, 0, OID, (1, 2))], registry)
    with pytest.raises(EncodeError):  # 'c' without properties
        wire.encode([ObjectRecord("c", 0, rec.schema, TS, 0, 0, OID, None)], registry)
    with pytest.raises(EncodeError):  # 'i' without statistics
        wire.encode([ObjectRecord("i", 0, rec.schema, TS, 0, 0, OID, (1,))], registry)
    with pytest.raises(EncodeError):  # mandatory property missing
        wire.encode([ObjectRecord("c", 0, rec.schema, TS, 0, 0, OID, (None,))], registry)
    with pytest.raises(EncodeError):  # timestamp out of range
        wire.encode([ObjectRecord("c", 0, rec.schema, -1, 0, 0, OID, (1,))], registry)
    for seq in (-1, 2**32, "1"):
        with pytest.raises(EncodeError):
            wire.encode([CommandComplete(seq)])  # type: ignore[arg-type]
    with pytest.raises(EncodeError):
        wire.encode([CommandComplete(1, 0, "x" * 256)])
    with pytest.raises(EncodeError):
        wire.encode([PackageIndication(1, "p" * 256)])
    with pytest.raises(EncodeError):
        wire.encode([CommandComplete(1, 2**32)])


# ----------------------------------------------------------------------------- messages

EVENT = SchemaClass(ClassKind.EVENT, key("queueDeclare", h=HASH2), arguments=[
    SchemaArgument("qName", QmfType.SSTR), SchemaArgument("durable", QmfType.BOOL),
    SchemaArgument("args", QmfType.MAP), SchemaArgument("when", QmfType.ABSTIME)])
BROKER = SchemaClass(
    ClassKind.OBJECT, key("broker"),
    properties=[SchemaProperty("name", QmfType.SSTR, access=Access.RC, index=True),
                SchemaProperty("port", QmfType.UINT16, optional=True, unit="port",
                               desc="listening port", min=1, max=65535)],
    statistics=[SchemaStatistic("uptime", QmfType.DELTATIME, unit="ns")],
    methods=[
        SchemaMethod("echo", [SchemaArgument("sequence", QmfType.UINT32, direction="IO"),
                              SchemaArgument("body", QmfType.LSTR, direction="IO")]),
        SchemaMethod("query", [SchemaArgument("type", QmfType.SSTR, direction="I"),
                               SchemaArgument("results", QmfType.MAP, direction="O")],
                     desc="look up"),
        SchemaMethod("shutdown"),
    ])


def test_event_indication_round_trip() -> None:
    registry = wire.SchemaRegistry([EVENT])
    ev = EventIndication(0, EVENT, TS, 6, {"qName": "q1", "durable": True,
                                            "args": {"x": 1}, "when": TS})
    body = wire.encode([ev], registry)
    assert body == (b"AM2e" + _u32(0) + EVENT.class_key.to_wire() + struct.pack(">QB", TS, 6)
                    + b"\x02q1\x01" + _map_bytes(b"\x01x\x31" + struct.pack(">q", 1), 1)
                    + struct.pack(">Q", TS))
    (back,) = wire.decode(body, registry)
    assert back == ev and back.severity_name == "info"
    with pytest.raises(EncodeError):  # missing argument
        wire.encode([EventIndication(0, EVENT, TS, 6, {"qName": "q1"})], registry)
    with pytest.raises(EncodeError):  # unknown argument
        wire.encode([EventIndication(0, EVENT, TS, 6, {**ev.arguments, "extra": 1})],
                    registry)


def test_method_request_round_trip() -> None:
    registry = wire.SchemaRegistry([BROKER])
    req = MethodRequest(9, OID, BROKER.class_key, "query", {"type": "queue"})
    body = wire.encode([req], registry)
    assert body == (b"AM2M" + _u32(9) + OID.raw + BROKER.class_key.to_wire() + b"\x05query"
                    + b"\x05queue")  # only the I argument
    assert wire.decode(body, registry) == [req]
    echo = MethodRequest(10, OID, BROKER.class_key, "echo", {"sequence": 3, "body": "x"})
    assert wire.decode(wire.encode([echo], registry), registry) == [echo]
    # no schema: arguments stay raw and round-trip
    (raw,) = wire.decode(body, wire.SchemaRegistry())
    assert raw.arguments is None and raw.raw_arguments == b"\x05queue"
    assert wire.encode([raw]) == body
    with pytest.raises(EncodeError):
        wire.encode([MethodRequest(9, OID, BROKER.class_key, "query", {})], registry)
    with pytest.raises(UsageError):
        wire.encode([MethodRequest(9, OID, BROKER.class_key, "nope", {})], registry)


def test_method_request_arguments_not_ending_the_body_stay_raw() -> None:
    registry = wire.SchemaRegistry([BROKER])
    body = wire.encode([MethodRequest(9, OID, BROKER.class_key, "query", {"type": "q"})],
                       registry) + b"junk"
    (req,) = wire.decode(body, registry)
    assert req.arguments is None and req.raw_arguments == b"\x01qjunk"
    assert wire.encode([req]) == body


def test_method_response_round_trip() -> None:
    registry = wire.SchemaRegistry([BROKER])
    query = BROKER.method("query")
    resp = MethodResponse(11, 0, "OK", {"results": {"name": "q1", "depth": 3}})
    for target in ((BROKER, query), query):
        methods = {11: target}
        body = wire.encode([resp], registry, methods=methods)
        assert body.startswith(b"AM2m" + _u32(11) + _u32(0) + b"\x00\x02OK")
        assert wire.decode(body, registry, methods=methods) == [resp]
        (raw,) = wire.decode(body, registry)
        assert raw.arguments is None and raw.raw_arguments == body[4 + 4 + 4 + 4:]
    with pytest.raises(EncodeError):  # arguments without the method
        wire.encode([resp], registry)
    # errors carry no output arguments even with the method given
    err = MethodResponse(12, 7, "boom")
    body = wire.encode([err])
    assert wire.decode(body, registry, methods={12: (BROKER, query)}) == [err]
    # str8 status text (qpidd's unknown-method quirk) round-trips
    short = MethodResponse(13, 2, "UnknownMethod", short_text=True)
    body = wire.encode([short])
    assert body == b"AM2m" + _u32(13) + _u32(2) + b"\x0dUnknownMethod"
    assert wire.decode(body, registry) == [short]


def test_schema_response_round_trip_and_registers_when_the_caller_learns_it() -> None:
    for schema in (BROKER, EVENT):
        body = wire.encode([SchemaResponse(5, schema)])
        registry = wire.SchemaRegistry()
        messages = wire.decode(body, registry)
        (back,) = messages
        assert back.schema == schema
        assert registry.get(schema.class_key) is None  # decoding only reads the registry
        assert registry.learn(messages) == [schema]
        assert registry.get(schema.class_key) == schema
        assert registry.learn(messages) == []  # already known
        assert wire.encode([back]) == body
    assert BROKER.method("query").in_args[0].name == "type"
    assert [a.name for a in BROKER.method("echo").out_args] == ["sequence", "body"]


SIMPLE_MESSAGES = [
    BrokerRequest(), BrokerResponse(UID), CommandComplete(7, 1, "Package not found"),
    PackageQuery(8), PackageIndication(8, "org.apache.qpid.broker"),
    ClassQuery(9, "org.apache.qpid.broker"), ClassIndication(9, 2, key("bind")),
    SchemaRequest(10, key()), Heartbeat(TS), GetQuery(11, {"_class": "queue"}),
    AttachRequest(1, "agent", UID, 0, 0), AttachResponse(1, 1, 10), ConsoleAdded(0),
]


@pytest.mark.parametrize("msg", SIMPLE_MESSAGES, ids=[m.OPCODE for m in SIMPLE_MESSAGES])
def test_simple_messages_round_trip(msg: Any) -> None:
    body = wire.encode(msg)  # a single message needs no list
    assert body[:4] == b"AM2" + msg.OPCODE.encode()
    assert body[4:8] == _u32(msg.seq)
    assert wire.decode(body, wire.SchemaRegistry()) == [msg]


def test_several_messages_in_one_body() -> None:
    registry = wire.SchemaRegistry([BROKER, EVENT])
    rec_c = ObjectRecord("c", 0, BROKER, TS, 1, 0, OID, ("b1", None))
    rec_i = ObjectRecord("i", 0, BROKER, TS, 1, 0, OID, None, (99,))
    rec_g = ObjectRecord("g", 4, BROKER, TS, 1, 0, OID, ("b1", 5672), (100,))
    ev = EventIndication(0, EVENT, TS, 3, {"qName": "q", "durable": False, "args": {},
                                            "when": 0})
    msgs = [*SIMPLE_MESSAGES, rec_c, rec_i, ev, rec_g, CommandComplete(4)]
    body = wire.encode(msgs, registry)
    assert body == b"".join(wire.encode([m], registry) for m in msgs)
    assert body.count(b"AM2") == len(msgs)
    back = wire.decode(body, registry)
    assert back == msgs
    assert [m.OPCODE for m in back] == [m.OPCODE for m in msgs]


@pytest.mark.parametrize("body", [
    b"", b"AM2", b"AM2z\0\0\0", b"AM3z\0\0\0\0\0\0\0\0\x02OK", b"AM2z\0\0\0\0\0\0\0\0\x03OK",
    b"AM2Y\0\0\0\0", b"AM2b\0\0\0\0" + b"\0" * 15, b"AM2q\0\0\0\0\x03\x00\x00" + HASH,
    b"AM2h\0\0\0\0\0\0\0", b"AM2z\0\0\0\0\0\0\0\0\x02OKAM2",
])
def test_malformed_bodies_raise_decode_error(body: bytes) -> None:
    with pytest.raises(wire.DecodeError):
        wire.decode(body, wire.SchemaRegistry())


def test_lenient_record_values_reencode_canonically() -> None:
    # Deliberate leniency of the compiled record decoders (qpidd only writes 0/1 and
    # clear padding bits, but a sloppy agent's records should still be readable):
    # a boolean byte other than 0/1 reads as True, unused presence bits are ignored.
    # Re-encoding writes the canonical form; the values are unchanged.
    schema = SchemaClass(ClassKind.OBJECT, key("lenient"), properties=[
        SchemaProperty("b", QmfType.BOOL), SchemaProperty("o", QmfType.UINT8, optional=True)])
    registry = wire.SchemaRegistry([schema])
    body = _record_prefix(schema) + b"\xfe" + b"\x02"  # padding bits set, o absent; b=2
    (rec,) = wire.decode(body, registry)
    assert rec.properties == (True, None)
    canonical = wire.encode([rec], registry)
    assert canonical == _record_prefix(schema) + b"\x00" + b"\x01"
    assert wire.decode(canonical, registry) == [rec]


def test_class_names_with_odd_characters_decode() -> None:
    # names come from the wire: a NUL or non-ASCII character must not break the
    # compiled decoders
    schema = SchemaClass(ClassKind.OBJECT, ClassKey("p\x00k\u00e9", "c\x00\n>", HASH),
                         properties=[SchemaProperty("n\x00", QmfType.UINT8)],
                         statistics=[SchemaStatistic("s", QmfType.UINT8)])
    registry = wire.SchemaRegistry([schema])
    for opcode in "cig":
        rec = ObjectRecord(opcode, 0, schema, TS, 0, 0, OID,
                           None if opcode == "i" else (1,), None if opcode == "c" else (2,))
        assert wire.decode(wire.encode([rec], registry), registry) == [rec]


def test_zero_width_arrays_are_bounded_both_ways() -> None:
    # void/bit items take no wire bytes; the count is capped (decode and encode alike)
    ok = bytearray()
    encode_array(ok, WireArray([None] * 16, code=0xF0))
    arr, _ = decode_array(bytes(ok), 0, len(ok))
    assert arr == [None] * 16 and arr.code == 0xF0
    with pytest.raises(EncodeError):
        encode_array(bytearray(), WireArray([None] * 17, code=0xF0))
    with pytest.raises(EncodeError):
        encode_array(bytearray(), WireArray([True] * 17, code=0xF1))
    too_many = _u32(5) + b"\xf0" + _u32(17)
    with pytest.raises(wire.DecodeError):
        decode_array(too_many, 0, len(too_many))

"""QMF v2 objects as v1 records of their class (qmf_async/wire/_v2records.py), without
a broker or a console: the value rules, the opcode, the ids from the caller's
``ref_id``, the errors, and the bytes against the v1 encoder's."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from qmf_async.errors import DecodeError
from qmf_async.wire import (
    ClassKey,
    ObjectId,
    QmfType,
    SchemaClass,
    SchemaProperty,
    SchemaRegistry,
    SchemaStatistic,
    V2Data,
    V2ObjectId,
    V2RecordConverter,
    V2SchemaId,
    v2_class_key,
    v2_default,
    v2_value,
)

KEY = ClassKey("com.acme", "widget", bytes(range(16)))
SCHEMA = SchemaClass(
    1, KEY,
    properties=(SchemaProperty("name", "sstr", index=True),
                SchemaProperty("owner", "ref"),
                SchemaProperty("note", "lstr", optional=True),
                SchemaProperty("size", "uint32"),
                SchemaProperty("tags", "map"),
                SchemaProperty("live", "bool"),
                SchemaProperty("uid", "uuid"),
                SchemaProperty("count", "int64", optional=True)),
    statistics=(SchemaStatistic("hits", "uint64"), SchemaStatistic("ratio", "double")),
)
OID = V2ObjectId("com.acme:widget:w1", "acme.com:app:one", 3)


class _Ids:
    """A ref_id that records what it was asked: banks, then a counter."""

    def __init__(self) -> None:
        self.asked: list[tuple[tuple[int, int], V2ObjectId]] = []

    def __call__(self, banks: tuple[int, int], oid: V2ObjectId) -> bytes:
        self.asked.append((banks, oid))
        return ObjectId.make(broker_bank=banks[0], agent_bank=banks[1],
                             object=len(self.asked)).raw


def _converter(schema: SchemaClass = SCHEMA) -> tuple[V2RecordConverter, _Ids]:
    ids = _Ids()
    return V2RecordConverter(schema, SchemaRegistry([schema]).codec(schema), ids), ids


def _data(values: dict[str, Any], **kw: Any) -> V2Data:
    return V2Data(values, OID, V2SchemaId("com.acme", "widget", "_data",
                                          uuid.UUID(bytes=KEY.hash)), **kw)


def test_a_v2_object_becomes_a_g_record_with_v1_values() -> None:
    conv, ids = _converter()
    u = uuid.uuid4()
    rec = conv.record(_data({"name": b"w\xc3\xa91", "owner": {"_object_name": "o1"},
                             "size": 7, "tags": {"k": 1}, "live": 1, "uid": u.bytes,
                             "count": -2, "hits": 12, "ratio": 1, "extra": "ignored"},
                            update_ts=30, create_ts=20, delete_ts=5), (0, 4))
    assert rec.opcode == "g" and rec.timestamps == (30, 20, 5)
    assert rec.get("name") == "wé1"  # binary text decoded
    assert rec.get("note") is None  # an absent optional property
    assert rec.get("live") is True and rec.get("uid") == u
    assert rec.get("size") == 7 and rec.get("count") == -2 and rec.get("tags") == {"k": 1}
    assert rec.get("hits") == 12
    ratio = rec.get("ratio")
    assert ratio == 1.0 and isinstance(ratio, float)
    # the reference's id is asked before the object's own, both with the object's banks
    assert ids.asked == [((0, 4), V2ObjectId("o1")), ((0, 4), OID)]
    assert rec.get("owner") == ObjectId.make(agent_bank=4, object=1)
    assert rec.object_id == ObjectId.make(agent_bank=4, object=2)


def test_the_record_bytes_are_what_the_v1_record_writer_makes() -> None:
    conv, _ = _converter()
    rec = conv.record(_data({"name": b"w1", "size": 3, "hits": 4}, update_ts=9,
                            create_ts=8), (1, 0))
    oid = ObjectId.make(broker_bank=1, object=1)
    # absent elements are their type's zero, absent optional ones None
    props = ["w1", ObjectId(bytes(16)), None, 3, {}, False, uuid.UUID(int=0), None]
    expect = bytearray()
    conv.codec.write_record(expect, "g", 9, 8, 0, oid.raw, props, [4, 0.0])
    assert rec.raw == bytes(expect)
    assert rec.properties == tuple(props) and rec.statistics == (4, 0.0)


def test_statistics_alone_make_an_i_record_and_properties_alone_a_c() -> None:
    conv, _ = _converter()
    stats = conv.record(_data({"hits": 5}), (0, 1))
    assert stats.opcode == "i" and not stats.has_properties and stats.get("hits") == 5
    props = conv.record(_data({"name": "w1"}), (0, 1))
    assert props.opcode == "c" and not props.has_statistics
    assert props.get("owner") == ObjectId(bytes(16)) and props.get("size") == 0
    assert conv.opcode({}) == "c" and conv.opcode({"ratio": 1.0, "size": 1}) == "g"


def test_a_record_names_the_non_optional_elements_the_map_lacked() -> None:
    # the classic console lists only what arrived: the record keeps which elements were
    # filled with zeros (absent optional properties are None already)
    conv, _ = _converter()
    full = conv.record(_data({"name": "w1", "owner": {"_object_name": "o1"}, "size": 1,
                              "tags": {}, "live": True, "uid": bytes(16), "hits": 1,
                              "ratio": 0.5}), (0, 1))
    assert full.absent == frozenset()
    part = conv.record(_data({"name": "w1", "hits": 4}), (0, 1))
    assert part.absent == {"owner", "size", "tags", "live", "uid", "ratio"}
    same = V2RecordConverter(SCHEMA, conv.codec, lambda banks, oid: bytes(15) + b"\x01")
    stats = same.record(_data({"ratio": 2.0}), (0, 1))
    props = same.record(_data({"name": "w1", "size": 2}), (0, 1))
    assert stats.absent == {"hits"} and props.absent == {"owner", "tags", "live", "uid"}
    # a merge keeps each part's
    assert stats.merge(props).absent == {"hits", "owner", "tags", "live", "uid"}
    assert stats.merge(None).absent == {"hits"}


def test_a_class_without_statistics_makes_c_records() -> None:
    schema = SchemaClass(1, ClassKey("com.acme", "plain", bytes(16)),
                         properties=(SchemaProperty("name", "sstr"),))
    conv, _ = _converter(schema)
    rec = conv.record(_data({"name": "p", "hits": 3}), (0, 1))
    assert rec.opcode == "c" and rec.get("name") == "p"


@pytest.mark.parametrize(("values", "match"), [
    ({"name": "w1", "size": "seven"}, "does not fit"),
    ({"name": "w1", "size": 2**40}, "does not fit"),
    ({"name": "w1", "ratio": "half", "hits": 1}, "does not fit"),
    ({"name": "w1", "owner": 12}, "reference 'owner'"),
    ({"name": "w1", "owner": {"_agent_name": "a"}}, "_object_name"),
])
def test_values_that_do_not_fit_raise_a_decode_error(values: dict[str, Any],
                                                     match: str) -> None:
    conv, _ = _converter()
    with pytest.raises(DecodeError, match=match):
        conv.record(_data(values), (0, 1))


def test_an_object_without_an_id_is_a_decode_error() -> None:
    conv, ids = _converter()
    with pytest.raises(DecodeError, match="object id"):
        conv.record(V2Data({"name": "w1"}), (0, 1))
    assert ids.asked == []


def test_class_keys_come_from_16_byte_hashes() -> None:
    assert v2_class_key(V2SchemaId("p", "c", "_data", uuid.UUID(bytes=KEY.hash))) \
        == ClassKey("p", "c", KEY.hash)
    assert v2_class_key(V2SchemaId("p", "c", None, bytes(16))) == ClassKey("p", "c", bytes(16))
    assert v2_class_key(V2SchemaId("p", "c", None, b"short")) is None
    assert v2_class_key(V2SchemaId("p", "c")) is None
    assert v2_class_key(None) is None


def test_single_values_follow_the_same_rules() -> None:
    ids = _Ids()
    assert v2_value("n", QmfType.SSTR, b"x", (0, 1), ids) == "x"
    assert v2_value("n", QmfType.LSTR, 5, (0, 1), ids) == "5"
    assert v2_value("n", QmfType.UINT8, True, (0, 1), ids) == 1
    assert type(v2_value("n", QmfType.UINT8, True, (0, 1), ids)) is int
    assert v2_value("n", QmfType.BOOL, 0, (0, 1), ids) is False
    assert v2_value("n", QmfType.UUID, b"short", (0, 1), ids) == b"short"
    ref = ObjectId.make(object=9)
    assert v2_value("n", QmfType.REF, ref, (0, 1), ids) is ref and ids.asked == []
    assert v2_default(QmfType.SSTR) == "" and v2_default(QmfType.LIST) == []
    assert v2_default(QmfType.UUID) == uuid.UUID(int=0) and v2_default(QmfType.INT32) == 0


@pytest.mark.parametrize("values", [
    {"name": b"w1", "owner": {"_object_name": b"com.acme:widget:w0"}, "note": b"n",
     "size": 7, "tags": {"a": 1}, "live": 1, "uid": bytes(range(16)), "count": -3,
     "hits": 2**40, "ratio": 2, "extra": 9},
    {"name": "w1", "owner": {"_object_name": "x"}, "note": None, "size": True,
     "tags": {}, "live": False, "uid": uuid.UUID(int=5), "count": None, "hits": False,
     "ratio": 0.5},
    {"name": b"\xff\xfe", "size": 1, "hits": 3},  # absent fields: defaults, named
    {"hits": 1, "ratio": 1.5},  # statistics alone
    {"name": b"w", "owner": {"_object_name": b"o"}, "size": 1, "tags": {}, "live": True,
     "uid": b"0123456789abcdef", "hits": None, "ratio": 1.0},  # a null statistic
])
def test_the_fast_conversion_gives_the_slow_ones_values(values: dict[str, Any]) -> None:
    # a map with every field present takes the fast way; the lists, the names of
    # the absent fields and the ids asked for are those of the field-by-field way
    from qmf_async.wire._v2records import _compile_section

    fields = [(p.name, QmfType(p.type), p.optional) for p in SCHEMA.properties]
    stats = [(st.name, QmfType(st.type), False) for st in SCHEMA.statistics]
    for spec in (fields, stats):
        got: list[Any] = []
        for fast in (True, False):
            ids = _Ids()
            absent: list[str] = []
            out = _compile_section(spec, ids, "test", fast=fast)(values, (1, 2), absent)
            got.append((out, absent, ids.asked))
        assert got[0] == got[1]

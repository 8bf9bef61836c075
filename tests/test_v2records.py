"""QMF v2 objects as the values of v1 records of their class
(qmf_async/wire/_v2records.py), without a broker or a console: the value rules, the
opcode, the ids from the caller's ``ref_id``, the errors, and the values against what
a v1 record of them reads."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from qmf_async.errors import DecodeError
from qmf_async.wire import (
    ClassKey,
    ObjectId,
    ObjectRecord,
    QmfType,
    RawObjectRecord,
    RecordLayout,
    SchemaClass,
    SchemaProperty,
    SchemaRegistry,
    SchemaStatistic,
    V2Data,
    V2ObjectId,
    V2RecordConverter,
    V2SchemaId,
    decode,
    encode,
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
    rec = conv.convert(_data({"name": b"w\xc3\xa91", "owner": {"_object_name": "o1"},
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


def test_the_values_are_what_a_v1_record_of_them_reads() -> None:
    conv, _ = _converter()
    rec = conv.convert(_data({"name": b"w1", "size": 3, "hits": 4}, update_ts=9,
                             create_ts=8), (1, 0))
    oid = ObjectId.make(broker_bank=1, object=1)
    # absent elements are their type's zero, absent optional ones None
    props = ["w1", ObjectId(bytes(16)), None, 3, {}, False, uuid.UUID(int=0), None]
    body = encode(ObjectRecord("g", 0, SCHEMA, 9, 8, 0, oid, tuple(props), (4, 0.0)))
    (v1,) = decode(body, SchemaRegistry([SCHEMA]), lazy=True)
    assert isinstance(v1, RawObjectRecord)
    assert rec.header == v1.raw[:RecordLayout.HEADER_SIZE]
    assert rec.properties == v1.properties == tuple(props)
    assert rec.statistics == v1.statistics == (4, 0.0)
    assert rec.parts() == (rec.properties, rec.statistics)


def test_statistics_alone_make_an_i_record_and_properties_alone_a_c() -> None:
    conv, _ = _converter()
    stats = conv.convert(_data({"hits": 5}), (0, 1))
    assert stats.opcode == "i" and not stats.has_properties and stats.get("hits") == 5
    props = conv.convert(_data({"name": "w1"}), (0, 1))
    assert props.opcode == "c" and not props.has_statistics
    assert props.get("owner") == ObjectId(bytes(16)) and props.get("size") == 0
    assert conv.opcode({}) == "c" and conv.opcode({"ratio": 1.0, "size": 1}) == "g"


def test_a_record_names_the_non_optional_elements_the_map_lacked() -> None:
    # the classic console lists only what arrived: the record keeps which elements were
    # filled with zeros (absent optional properties are None already)
    conv, _ = _converter()
    full = conv.convert(_data({"name": "w1", "owner": {"_object_name": "o1"}, "size": 1,
                              "tags": {}, "live": True, "uid": bytes(16), "hits": 1,
                              "ratio": 0.5}), (0, 1))
    assert full.absent == frozenset()
    part = conv.convert(_data({"name": "w1", "hits": 4}), (0, 1))
    assert part.absent == {"owner", "size", "tags", "live", "uid", "ratio"}
    same = V2RecordConverter(SCHEMA, conv.codec, lambda banks, oid: bytes(15) + b"\x01")
    stats = same.convert(_data({"ratio": 2.0}), (0, 1))
    props = same.convert(_data({"name": "w1", "size": 2}), (0, 1))
    assert stats.absent == {"hits"} and props.absent == {"owner", "tags", "live", "uid"}


def test_a_class_without_statistics_makes_c_records() -> None:
    schema = SchemaClass(1, ClassKey("com.acme", "plain", bytes(16)),
                         properties=(SchemaProperty("name", "sstr"),))
    conv, _ = _converter(schema)
    rec = conv.convert(_data({"name": "p", "hits": 3}), (0, 1))
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
        conv.convert(_data(values), (0, 1))


def test_an_object_without_an_id_is_a_decode_error() -> None:
    conv, ids = _converter()
    with pytest.raises(DecodeError, match="object id"):
        conv.convert(V2Data({"name": "w1"}), (0, 1))
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


class _Int(int):
    pass


STATS_SCHEMA = SchemaClass(
    1, ClassKey("com.acme", "meter", bytes(range(1, 17))),
    properties=(SchemaProperty("name", "sstr", index=True),),
    statistics=(SchemaStatistic("u8", "uint8"), SchemaStatistic("u64", "uint64"),
                SchemaStatistic("i16", "int16"), SchemaStatistic("on", "bool"),
                SchemaStatistic("f", "float"), SchemaStatistic("d", "double"),
                SchemaStatistic("t", "absTime"), SchemaStatistic("who", "sstr"),
                SchemaStatistic("n", "uint32"), SchemaStatistic("long", "lstr")),
)
FIT_SCHEMA = SchemaClass(
    1, STATS_SCHEMA.class_key,
    properties=STATS_SCHEMA.properties,
    statistics=tuple(st for st in STATS_SCHEMA.statistics if st.name != "f"))
_GONE = object()
_FULL = {"u8": 7, "u64": 2**63, "i16": -5, "on": True, "f": 0.5, "d": 1e300, "t": 10**18,
         "who": b"me", "n": 3, "long": "l\u00e9"}


def _both(schema: SchemaClass, data: V2Data) -> list[Any]:
    """What the quick and the v1 codec's ways make of ``data``: the record's opcode,
    header, values (with their types) and absent names and the ids asked, or the
    error's text."""
    got: list[Any] = []
    codec = SchemaRegistry([schema]).codec(schema)
    for fast in (True, False):
        ids = _Ids()
        conv = V2RecordConverter(schema, codec, ids, fast=fast)
        try:
            rec = conv.convert(data, (1, 2))
            typed = [[(type(v), v) for v in part] if part is not None else None
                     for part in rec.parts()]
            got.append((rec.opcode, rec.header, typed, rec.absent, ids.asked))
        except DecodeError as exc:
            got.append(str(exc))
    return got


@pytest.mark.parametrize("change", [
    {}, {"name": b"m"},  # every statistic present, exactly typed: the quick fit
    {"u8": 256}, {"u64": -1}, {"i16": 2**15}, {"f": 1e300},  # out of range
    {"u8": True}, {"on": 1}, {"f": 2}, {"d": "x"}, {"u64": 2.0},  # other types
    {"u8": _Int(3)}, {"u64": None}, {"t": None, "name": b"m"},  # subclass, null
    {"i16": float("nan")}, {"d": float("inf")}, {"d": _GONE}, {"on": _GONE, "name": b"m"},
    {"who": "t\u00e9"}, {"who": b"\xff"}, {"who": "\ud800"}, {"who": bytearray(b"x")},
    {"who": b"x" * 255}, {"who": b"x" * 256}, {"long": b"y" * 300}, {"who": 5},
    {"who": None, "n": _GONE}, {"long": _GONE, "u8": 300}, {"f": 0.1},
])
@pytest.mark.parametrize("float_stat", [False, True])
def test_the_quick_fit_gives_the_v1_codecs_values(change: dict[str, Any],
                                                  float_stat: bool) -> None:
    # statistics kept as converted when they have exactly their types and fit: the
    # record (values and their types, opcode, absent names, ids) or the error of the
    # v1 codec's way (encoded and decoded again); a class with a float statistic
    # always goes the codec's way (its 4 bytes round the value)
    schema = STATS_SCHEMA if float_stat else FIT_SCHEMA
    names = {st.name for st in schema.statistics} | {"name"}
    values = {k: v for k, v in {**_FULL, **change}.items() if v is not _GONE and k in names}
    fast, slow = _both(schema, V2Data(values, OID, None, 1, 2, 0))
    assert fast == slow
    conv, _ = _converter(schema)
    assert (conv._fit is None) == float_stat
    if not change and not float_stat:  # the quick way was taken
        assert conv._fit is not None and conv._fit(conv.stats(values, (1, 2), [])) is not None


def test_the_quick_fit_on_qpidds_objects() -> None:
    # qpidd's captured queue objects, whole and statistics alone, through a schema
    # made from their values (ints as uint64 statistics): the same records both
    # ways, and the quick one taken for every object
    import base64
    import json
    from pathlib import Path

    from qmf_async.wire import decode_amqp10_message, decode_v2

    capture = Path(__file__).parent / "data" / "qmf2" / "qpidd-1.40-v2.jsonl"
    items: list[V2Data] = []
    for line in capture.read_text().splitlines():
        m = decode_amqp10_message(base64.b64decode(json.loads(line)["message_b64"]))
        if (m.application_properties or {}).get("qmf.content") == "_data":
            items += [i for i in decode_v2(m.application_properties, m.body).items
                      if isinstance(i, V2Data) and i.schema_id is not None
                      and i.schema_id.class_name == "queue"]
    assert len(items) > 20
    first = items[0].values
    texts = [k for k, v in first.items() if type(v) is bytes]
    stats = tuple(SchemaStatistic(k, "uint64") for k, v in first.items()
                  if type(v) is int) + tuple(SchemaStatistic(k, "sstr") for k in texts[1::2])
    props = tuple(SchemaProperty(k, "sstr") for k in texts[::2])
    schema = SchemaClass(1, ClassKey("org.apache.qpid.broker", "queue", bytes(16)),
                         properties=props, statistics=stats)
    names = {st.name for st in stats}
    conv, _ = _converter(schema)
    assert conv._fit is not None
    for item in items:
        for values in (item.values, {k: v for k, v in item.values.items() if k in names}):
            data = V2Data(values, item.object_id, item.schema_id, item.update_ts,
                          item.create_ts, item.delete_ts)
            fast, slow = _both(schema, data)
            assert fast == slow and not isinstance(fast, str)
            assert conv._fit(conv.stats(values, (1, 2), [])) is not None


def test_class_keys_by_identity_and_by_value_agree() -> None:
    # the key of a schema id object is remembered by its identity: an equal object
    # (another one) gets the same key, another hash its own; the tables stay bounded
    from qmf_async.wire import _v2records

    digest = uuid.UUID(bytes=bytes(range(16)))
    one = V2SchemaId("p", "c", "_data", digest)
    assert v2_class_key(one) == ClassKey("p", "c", digest.bytes)
    assert v2_class_key(one) is v2_class_key(V2SchemaId("p", "c", "_data", digest))
    assert v2_class_key(V2SchemaId("p", "c", "_data", uuid.UUID(int=1))) != v2_class_key(one)
    for i in range(_v2records._MAX_KEYS + 10):
        v2_class_key(V2SchemaId("p", f"c{i}", None, None))
    assert len(_v2records._BY_ID) <= _v2records._MAX_KEYS
    assert v2_class_key(one) == ClassKey("p", "c", digest.bytes)

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
_GONE = object()
_FULL = {"u8": 7, "u64": 2**63, "i16": -5, "on": True, "f": 0.5, "d": 1e300, "t": 10**18,
         "who": b"me", "n": 3, "long": "l\u00e9"}


def _both(schema: SchemaClass, data: V2Data) -> list[Any]:
    """What the fast and the field-by-field converters make of ``data``: a record
    and the ids asked, or the error's text."""
    got: list[Any] = []
    codec = SchemaRegistry([schema]).codec(schema)
    for fast in (True, False):
        ids = _Ids()
        conv = V2RecordConverter(schema, codec, ids, fast=fast)
        try:
            rec = conv.record(data, (1, 2))
            got.append((rec.opcode, rec.raw, rec.sofs, rec.absent, ids.asked))
        except DecodeError as exc:
            got.append(str(exc))
    return got


@pytest.mark.parametrize("change", [
    {}, {"name": b"m"},  # every statistic present, exactly typed: packed
    {"u8": 256}, {"u64": -1}, {"i16": 2**15}, {"f": 1e300},  # out of range
    {"u8": True}, {"on": 1}, {"f": 2}, {"d": "x"}, {"u64": 2.0},  # other types
    {"u8": _Int(3)}, {"u64": None}, {"t": None, "name": b"m"},  # subclass, null
    {"i16": float("nan")}, {"d": float("inf")}, {"d": _GONE}, {"on": _GONE, "name": b"m"},
    {"who": "t\u00e9"}, {"who": b"\xff"}, {"who": "\ud800"}, {"who": bytearray(b"x")},
    {"who": b"x" * 255}, {"who": b"x" * 256}, {"long": b"y" * 300}, {"who": 5},
    {"who": None, "n": _GONE}, {"long": _GONE, "u8": 300},
])
def test_packed_statistics_are_the_field_by_field_bytes(change: dict[str, Any]) -> None:
    # the statistics packed straight from the map give the record (bytes, opcode,
    # absent names, ids) or the error the field-by-field conversion gives
    values = {k: v for k, v in {**_FULL, **change}.items() if v is not _GONE}
    fast, slow = _both(STATS_SCHEMA, V2Data(values, OID, None, 1, 2, 0))
    assert fast == slow
    if not change:  # the packed way was taken
        conv, _ = _converter(STATS_SCHEMA)
        assert conv._pack_stats is not None and conv._pack_stats(values, []) == slow[1][slow[2]:]


def test_packed_statistics_on_qpidds_objects() -> None:
    # qpidd's captured queue objects, whole and statistics alone, through a schema
    # made from their values (ints as uint64 statistics): the same records
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
    # and one converter for them all, as a session keeps it (its packer learned from
    # the first objects): the same records again
    kept = V2RecordConverter(schema, SchemaRegistry([schema]).codec(schema), _Ids())
    for item in items:
        for values in (item.values, {k: v for k, v in item.values.items() if k in names}):
            data = V2Data(values, item.object_id, item.schema_id, item.update_ts,
                          item.create_ts, item.delete_ts)
            fast, slow = _both(schema, data)
            assert fast == slow and not isinstance(fast, str)
            ids = _Ids()
            kept.ref_id = ids
            rec = kept.record(data, (1, 2))
            assert (rec.opcode, rec.raw, rec.sofs, rec.absent, ids.asked) == slow
    assert kept._packer is not kept._pack_stats


@pytest.mark.parametrize("taught", [(), ("n", "who"), ("u8", "long", "on")])
@pytest.mark.parametrize("change", [
    {}, {"name": b"m"}, {"n": _GONE, "who": _GONE}, {"n": None, "who": _GONE},
    {"u8": _GONE, "long": _GONE, "on": None}, {"n": 4, "who": _GONE},  # missing ones back
    {"u8": 256}, {"on": 1}, {"u8": True}, {"u64": _Int(3)}, {"u64": None}, {"who": b"\xff"},
    {"who": None, "n": _GONE}, {"d": "x"}, {"who": b"x" * 256}, {"long": "\ud800"},
    {"f": 1e300}, {"u8": _GONE, "long": _GONE, "on": 1}, {"extra": 1},
])
def test_a_learned_packer_gives_the_field_by_field_bytes(taught: tuple[str, ...],
                                                         change: dict[str, Any]) -> None:
    # a converter that packed a map lacking the fields ``taught`` packs the maps lacking
    # the same by a packer made for them; every other map goes the general way: the
    # record (bytes, opcode, absent names, ids) or the error of the field-by-field way
    codec = SchemaRegistry([STATS_SCHEMA]).codec(STATS_SCHEMA)
    conv = V2RecordConverter(STATS_SCHEMA, codec, _Ids())
    teach = {k: v for k, v in _FULL.items() if k not in taught}
    conv.record(V2Data(teach, OID, None, 1, 2, 0), (1, 2))
    assert conv._packer is not conv._pack_stats  # learned
    values = {k: v for k, v in {**teach, **change}.items() if v is not _GONE}
    data = V2Data(values, OID, None, 1, 2, 0)
    ids = _Ids()
    conv.ref_id = ids
    try:
        rec = conv.record(data, (1, 2))
        fast: Any = (rec.opcode, rec.raw, rec.sofs, rec.absent, ids.asked)
    except DecodeError as exc:
        fast = str(exc)
    assert [fast] == _both(STATS_SCHEMA, data)[1:]


def test_a_learned_packer_that_misses_gives_way_to_another() -> None:
    # maps that keep departing from the learned packer's send the converter back to
    # the general packer, which learns again (a bounded number of times)
    from qmf_async.wire._v2records import _MAX_LEARNS, _MAX_MISSES

    conv, _ = _converter(STATS_SCHEMA)
    conv.record(V2Data({**_FULL, "n": None}, OID, None, 1, 2, 0), (1, 2))
    first = conv._packer
    assert first is not conv._pack_stats
    for _ in range(_MAX_MISSES):
        rec = conv.record(V2Data(dict(_FULL), OID, None, 1, 2, 0), (1, 2))
        assert rec.absent == frozenset()
    assert conv._packer is not first and conv._packer is not conv._pack_stats
    for i in range(3 * _MAX_LEARNS * _MAX_MISSES):  # alternating: learns stop
        conv.record(V2Data({**_FULL, "n": None} if i % 2 else dict(_FULL), OID, None, 1, 2,
                           0), (1, 2))
    assert conv._learns == _MAX_LEARNS


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

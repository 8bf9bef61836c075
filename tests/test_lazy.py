"""Lazy object records (``qmf_async.wire._record``) and the proxies built on them.

The session scans ``c``/``i``/``g`` records (framing only) and decodes values when they
are read.  Every check here compares with the eager decoder, which the golden tests
hold to the captured qpidd bytes: the same values, from every captured record and from
generated schemas, value by value and section by section; malformed input raises
DecodeError, at receipt when the framing is broken, at the read when a value is.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qmf_async import (
    ClassKind,
    DecodeError,
    QmfObject,
    QmfType,
    SchemaClass,
    SchemaProperty,
    SchemaStatistic,
    wire,
)
from qmf_async.wire import RawObjectRecord, reader_of
from qmf_async.wire._codec import decode
from qmf_async.wire._values import ClassKey, ObjectId

# every captured body and one registry holding every captured schema
from .test_codec_fuzz import (
    BODIES,
    RECORDS,
    REGISTRY,
    _nan_safe_equal,
    mutated_bodies,
    time_limit,
)


def _values_of(rec: RawObjectRecord) -> tuple[tuple[Any, ...] | None, tuple[Any, ...] | None]:
    """Every value through the per-value readers (not the section decoders)."""
    reader = reader_of(rec.codec)
    props = stats = None
    if rec.opcode != "i":
        props = tuple(reader.prop(rec.raw, i) for i in range(len(rec.schema.properties)))
    if rec.opcode != "c":
        stats = tuple(reader.stat(rec.raw, rec.sofs, i) for i in range(len(rec.schema.statistics)))
    return props, stats


def test_every_captured_record_reads_as_the_eager_decoder_reads_it() -> None:
    seen = {"c": 0, "i": 0, "g": 0}
    absent_optional = 0
    for body in BODIES:
        eager = wire.decode(body, REGISTRY)
        lazy = decode(body, REGISTRY, lazy=True)
        assert len(lazy) == len(eager)
        for e, raw in zip(eager, lazy, strict=True):
            if not isinstance(e, wire.ObjectRecord):
                assert raw == e  # other messages are decoded as before
                continue
            assert type(raw) is RawObjectRecord
            seen[e.opcode] += 1
            assert raw.to_record() == e
            assert (raw.opcode, raw.seq, raw.schema, raw.object_id) == (
                e.opcode, e.seq, e.schema, e.object_id)
            assert (raw.timestamp, raw.created, raw.deleted) == (e.timestamp, e.created, e.deleted)
            assert raw.properties_dict() == e.properties_dict()
            assert raw.statistics_dict() == e.statistics_dict()
            assert _values_of(raw) == (e.properties, e.statistics)
            absent_optional += sum(1 for v in e.properties or () if v is None)
    assert min(seen.values()) > 20, seen
    assert absent_optional > 0  # optional properties left out by qpidd are covered


def test_scanning_checks_the_framing_of_every_truncation() -> None:
    # every proper prefix of a body holding records: the eager and lazy decoders
    # agree on which prefixes are whole messages, and on their values
    bodies = [r["_body"] for r in RECORDS if r["opcode"] in "cig"][:60]
    with time_limit(30.0):
        for body in bodies:
            for cut in range(1, len(body)):
                try:
                    eager = wire.decode(body[:cut], REGISTRY)
                except DecodeError:
                    eager = None
                try:
                    lazy = decode(body[:cut], REGISTRY, lazy=True)
                except DecodeError:
                    lazy = None
                if eager is None:
                    # only a value the scanner does not look into can differ
                    assert lazy is None or any(
                        type(m) is RawObjectRecord and _fails(m) for m in lazy)
                    continue
                assert lazy is not None
                assert [m.to_record() if type(m) is RawObjectRecord else m for m in lazy] == eager


def _fails(rec: RawObjectRecord) -> bool:
    try:
        rec.to_record()
    except DecodeError:
        return True
    return False


@settings(max_examples=1500, deadline=None)
@given(mutated_bodies())
def test_mutated_bodies_raise_only_decode_errors_at_receipt_or_read(body: bytes) -> None:
    try:
        with time_limit(5.0):
            msgs = decode(body, REGISTRY, lazy=True)
    except DecodeError:
        return
    for m in msgs:
        if type(m) is not RawObjectRecord:
            continue
        obj = QmfObject.from_record(None, None, None, m)
        for read in (m.to_record, obj.get_properties, obj.get_statistics,
                     lambda m=m: _values_of(m), obj.get_object_id, obj.get_timestamps,
                     obj.__repr__):
            try:
                with time_limit(5.0):
                    read()
            except DecodeError:
                pass
        # what reads by value also reads whole, and the other way round
        try:
            whole = m.to_record()
        except DecodeError:
            continue
        by_value = _values_of(m)
        assert _nan_safe_equal(by_value, (whole.properties, whole.statistics))


# ----------------------------------------------------------------------------- generated

_TYPES: dict[QmfType, st.SearchStrategy[Any]] = {
    QmfType.UINT8: st.integers(0, 255),
    QmfType.UINT16: st.integers(0, 0xFFFF),
    QmfType.UINT32: st.integers(0, 0xFFFFFFFF),
    QmfType.UINT64: st.integers(0, (1 << 64) - 1),
    QmfType.INT8: st.integers(-128, 127),
    QmfType.INT32: st.integers(-(1 << 31), (1 << 31) - 1),
    QmfType.INT64: st.integers(-(1 << 63), (1 << 63) - 1),
    QmfType.ABSTIME: st.integers(0, (1 << 64) - 1),
    QmfType.BOOL: st.booleans(),
    QmfType.DOUBLE: st.floats(allow_nan=False),
    QmfType.SSTR: st.text(max_size=30).filter(lambda s: len(s.encode()) <= 255),
    QmfType.LSTR: st.text(max_size=300),
    QmfType.REF: st.binary(min_size=16, max_size=16).map(ObjectId),
    QmfType.UUID: st.uuids(),
    QmfType.MAP: st.dictionaries(st.text(max_size=8).filter(lambda s: len(s.encode()) <= 255),
                                 st.one_of(st.integers(-(1 << 63), (1 << 63) - 1),
                                           st.text(max_size=10), st.booleans()),
                                 max_size=4),
    QmfType.LIST: st.lists(st.one_of(st.integers(0, 1000), st.text(max_size=6)), max_size=4),
}


@st.composite
def schema_and_records(draw: st.DrawFn) -> tuple[SchemaClass, list[wire.ObjectRecord]]:
    types = sorted(_TYPES, key=int)
    pfields = draw(st.lists(st.tuples(st.sampled_from(types), st.booleans()), max_size=12))
    sfields = draw(st.lists(st.sampled_from(types), max_size=12))
    props = [SchemaProperty(f"p{i}", t, optional=opt) for i, (t, opt) in enumerate(pfields)]
    stats = [SchemaStatistic(f"s{i}", t) for i, t in enumerate(sfields)]
    schema = SchemaClass(ClassKind.OBJECT, ClassKey("org.example", "thing", bytes(range(16))),
                         props, stats, [], [])
    records = []
    for n in range(draw(st.integers(1, 3))):
        pvals = tuple(None if p.optional and draw(st.booleans()) else draw(_TYPES[p.type])
                      for p in props)
        svals = tuple(draw(_TYPES[s.type]) for s in stats)
        opcode = draw(st.sampled_from("cig"))
        records.append(wire.ObjectRecord(
            opcode, n, schema, draw(st.integers(0, (1 << 64) - 1)), 7,
            draw(st.sampled_from([0, 9])),
            ObjectId.make(agent_bank=3, object=n + 1),
            pvals if opcode != "i" else None, svals if opcode != "c" else None))
    return schema, records


def _comparable(v: Any) -> Any:
    if isinstance(v, float):
        return ("float", v.hex())
    if isinstance(v, dict):
        return {k: _comparable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_comparable(x) for x in v]
    return v


@settings(max_examples=300, deadline=None)
@given(schema_and_records())
def test_generated_schemas_read_back_value_by_value(
        case: tuple[SchemaClass, list[wire.ObjectRecord]]) -> None:
    schema, records = case
    reg = wire.SchemaRegistry([schema])
    body = wire.encode(records, reg)
    lazy = decode(body, reg, lazy=True)
    assert [m.to_record() for m in lazy] == wire.decode(body, reg)
    for m, rec in zip(lazy, records, strict=True):
        assert _comparable(_values_of(m)) == _comparable((rec.properties, rec.statistics))
        obj = QmfObject.from_record(None, None, None, m)
        for p, v in zip(schema.properties, rec.properties or (), strict=False):
            if v is None:
                assert not hasattr(obj, p.name)
            else:
                assert _comparable(getattr(obj, p.name)) == _comparable(v)
        for s, v in zip(schema.statistics, rec.statistics or (), strict=False):
            assert _comparable(getattr(obj, s.name)) == _comparable(v)
        if rec.opcode == "c" and schema.statistics:
            assert not hasattr(obj, schema.statistics[0].name)
        if rec.opcode == "i" and schema.properties:
            assert not hasattr(obj, schema.properties[0].name)
        assert obj.get_object_id() == rec.object_id
        assert obj.get_timestamps() == (rec.timestamp, rec.created, rec.deleted)
        assert obj.is_deleted() == bool(rec.deleted)


# ----------------------------------------------------------------------------- malformed

_WIDGET = SchemaClass(
    ClassKind.OBJECT, ClassKey("org.example", "widget", bytes(16)),
    [SchemaProperty("vhostRef", QmfType.REF), SchemaProperty("name", QmfType.SSTR),
     SchemaProperty("note", QmfType.LSTR, optional=True),
     SchemaProperty("arguments", QmfType.MAP), SchemaProperty("label", QmfType.SSTR)],
    [SchemaStatistic("depth", QmfType.UINT64), SchemaStatistic("tag", QmfType.SSTR),
     SchemaStatistic("total", QmfType.UINT32)], [], [])


def _widget_body(name: str = "w1", arguments: dict[str, Any] | None = None) -> bytes:
    reg = wire.SchemaRegistry([_WIDGET])
    rec = wire.ObjectRecord("g", 5, _WIDGET, 30, 20, 0, ObjectId.make(agent_bank=2, object=9),
                            (ObjectId.make(object=1), name, None, arguments or {"x": 1}, "L"),
                            (12, "t", 7))
    return wire.encode([rec], reg)


def test_bad_utf8_is_found_when_read_and_other_values_stay_readable() -> None:
    body = bytearray(_widget_body(name="ab"))
    at = body.index(b"\x02ab") + 1
    body[at] = 0xFF  # "ab" becomes invalid UTF-8
    reg = wire.SchemaRegistry([_WIDGET])
    with pytest.raises(DecodeError):
        wire.decode(bytes(body), reg)  # the eager decoder drops the whole body
    (rec,) = decode(bytes(body), reg, lazy=True)
    obj = QmfObject.from_record(None, None, None, rec)
    with pytest.raises(DecodeError, match="name"):
        _ = obj.name
    with pytest.raises(DecodeError):
        obj.get_properties()
    # nothing else is lost: the rest of the record reads
    assert obj.depth == 12 and obj.tag == "t" and obj.total == 7
    assert obj.label == "L" and obj.arguments == {"x": 1}
    assert obj.get_object_id() == ObjectId.make(agent_bank=2, object=9)
    assert "widget" in repr(obj)


def test_broken_map_framing_is_refused_at_receipt() -> None:
    body = bytearray(_widget_body())
    at = body.index(b"\x01x")  # the map: size(4) count(4) then the key "x"
    body[at - 8:at - 4] = (2).to_bytes(4, "big")  # a map size below its count field
    with pytest.raises(DecodeError, match="size"):
        decode(bytes(body), wire.SchemaRegistry([_WIDGET]), lazy=True)


def test_broken_map_contents_are_found_when_read() -> None:
    body = bytearray(_widget_body())
    at = body.index(b"\x01x")
    body[at + 2] = 0xEE  # the value's type code: no such AMQP 0-10 type
    (rec,) = decode(bytes(body), wire.SchemaRegistry([_WIDGET]), lazy=True)
    obj = QmfObject.from_record(None, None, None, rec)
    with pytest.raises(DecodeError):
        _ = obj.arguments
    assert obj.name == "w1" and obj.label == "L" and obj.depth == 12


@pytest.mark.parametrize("cut", [1, 8, 20, 41, 60])
def test_truncated_records_are_refused_at_receipt(cut: int) -> None:
    body = _widget_body()
    with pytest.raises(DecodeError):
        decode(body[:-cut], wire.SchemaRegistry([_WIDGET]), lazy=True)


def test_proxies_keep_no_decoded_values() -> None:
    (rec,) = decode(_widget_body(), wire.SchemaRegistry([_WIDGET]), lazy=True)
    obj = QmfObject.from_record(None, None, None, rec)
    first = obj.arguments
    assert obj.arguments == first and obj.arguments is not first  # decoded per read
    assert obj._p is None and obj._s is None


def test_proxies_of_decoded_values_read_the_same() -> None:
    reg = wire.SchemaRegistry([_WIDGET])
    (rec,) = decode(_widget_body(), reg, lazy=True)
    lazy_obj = QmfObject.from_record(None, None, None, rec)
    eager = rec.to_record()
    plain = QmfObject(None, None, None, _WIDGET, eager.object_id, eager.properties,
                      eager.statistics, (eager.timestamp, eager.created, eager.deleted))
    assert plain == lazy_obj
    assert plain.values() == lazy_obj.values()
    assert plain.get_timestamps() == lazy_obj.get_timestamps() == (30, 20, 0)
    assert plain.name == lazy_obj.name == "w1"
    assert not hasattr(plain, "note") and not hasattr(lazy_obj, "note")
    assert not hasattr(lazy_obj, "nonsense")
    props_only = QmfObject(None, None, None, _WIDGET, eager.object_id, eager.properties, None,
                           (1, 2, 0))
    with pytest.raises(AttributeError, match="statistics of this object were not received"):
        _ = props_only.depth
    assert props_only.get_statistics() == {} and props_only.get("depth", "-") == "-"
    assert props_only != plain


def test_uuid_and_ref_at_fixed_offsets() -> None:
    schema = SchemaClass(ClassKind.OBJECT, ClassKey("org.example", "ids", bytes(16)),
                         [SchemaProperty("u", QmfType.UUID), SchemaProperty("r", QmfType.REF),
                          SchemaProperty("o", QmfType.UINT8, optional=True)], [], [], [])
    reg = wire.SchemaRegistry([schema])
    u = uuid.uuid4()
    for o in (None, 200):
        rec = wire.ObjectRecord("c", 0, schema, 1, 1, 0, ObjectId.make(object=3),
                                (u, ObjectId.make(object=4), o), None)
        (raw,) = decode(wire.encode([rec], reg), reg, lazy=True)
        obj = QmfObject.from_record(None, None, None, raw)
        assert obj.u == u and obj.r == ObjectId.make(object=4)
        assert obj.get("o") == o

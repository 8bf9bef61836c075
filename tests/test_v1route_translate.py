"""qpidd's fast path, its translation alone (console/_v1route.py): a v1 record gets
the id v2 gives its object and its references are rewritten in place where the codec
finds them (``ClassCodec.ref_offsets``), the same bytes as decoding, changing and
encoding the properties, which is what a class the codec cannot scan gets.  No broker:
test_fast_path_qpidd.py checks the path on qpidd."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from qmf_async import ClassKind, ObjectId, QmfType, SchemaClass, SchemaProperty, wire
from qmf_async.console._v1route import V1Route, _Ids
from qmf_async.wire import ClassCodec, ClassKey, RawObjectRecord, SchemaStatistic

QUEUE = SchemaClass(
    ClassKind.OBJECT, ClassKey("org.apache.qpid.broker", "queue", bytes(range(16))),
    properties=[SchemaProperty("vhostRef", QmfType.REF, index=True),
                SchemaProperty("name", QmfType.SSTR, index=True),
                SchemaProperty("arguments", QmfType.MAP),
                SchemaProperty("note", QmfType.LSTR, optional=True),
                SchemaProperty("altExchange", QmfType.REF, optional=True)],
    statistics=[SchemaStatistic("msgDepth", QmfType.UINT64)])
VHOST = ObjectId.make(sequence=1, broker_bank=1, agent_bank=0, object=5)
ALT = ObjectId.make(sequence=1, broker_bank=1, agent_bank=0, object=6)
NAMES = {VHOST.raw: "org.apache.qpid.broker:vhost:/", ALT.raw: "amq.direct"}


def v2_id(banks: tuple[int, int], name: str, epoch: int | None) -> bytes:
    return bytes(8) + hashlib.blake2b(name.encode(), digest_size=8).digest()


def record(i: int, props: tuple[Any, ...], opcode: str = "g") -> RawObjectRecord:
    reg = wire.SchemaRegistry([QUEUE])
    oid = ObjectId.make(sequence=1, broker_bank=1, agent_bank=0, object=100 + i)
    NAMES[oid.raw] = f"queue-{i}"
    rec = wire.ObjectRecord(opcode, 3, QUEUE, 10, 20, 0, oid,
                            props if opcode != "i" else None, (i,) if opcode != "c" else None)
    (raw,) = wire.decode(wire.encode([rec], reg), reg, lazy=True)
    assert type(raw) is RawObjectRecord
    return raw


def translate(rec: RawObjectRecord) -> RawObjectRecord | None:
    route = V1Route(None)  # type: ignore[arg-type]  # translation reads no broker
    ids = _Ids(v2_id, (1, 0), NAMES, {})
    return route._translate(rec, route._ref_slots(rec), ids)


CASES = [
    (VHOST, "q0", {"x-max": 1}, "ü note", ALT),
    (VHOST, "q1", {}, None, None),          # the optional reference absent
    (VHOST, "q2", {}, None, ObjectId(bytes(16))),  # a null reference: left as it is
]


@pytest.mark.parametrize("props", CASES)
def test_references_are_rewritten_in_place(props: tuple[Any, ...]) -> None:
    rec = record(CASES.index(props), props)
    new = translate(rec)
    assert new is not None and len(new.raw) == len(rec.raw) and new.sofs == rec.sofs
    got = new.properties
    assert got is not None
    want = [ObjectId(v2_id((1, 0), NAMES[v.raw], None)) if isinstance(v, ObjectId)
            and v.raw in NAMES else v for v in props]
    assert list(got) == want
    assert new.object_id_bytes == v2_id((1, 0), NAMES[rec.object_id_bytes], None)
    assert new.statistics == rec.statistics and new.timestamp == rec.timestamp


@pytest.mark.parametrize("props", CASES)
def test_a_class_the_codec_cannot_scan_gets_the_same_bytes(
        props: tuple[Any, ...], monkeypatch: pytest.MonkeyPatch) -> None:
    rec = record(CASES.index(props), props)
    scanned = translate(rec)
    monkeypatch.setattr(ClassCodec, "ref_offsets", lambda self, raw: None)
    decoded = translate(rec)
    assert scanned is not None and decoded is not None
    assert (decoded.raw, decoded.sofs) == (scanned.raw, scanned.sofs)


def test_an_unknown_reference_fails_the_translation_and_an_i_has_none() -> None:
    stranger = ObjectId.make(sequence=1, broker_bank=1, agent_bank=0, object=999)
    assert translate(record(7, (VHOST, "q7", {}, None, stranger))) is None
    stats_only = record(8, (), opcode="i")
    new = translate(stats_only)
    assert new is not None and new.statistics == (8,) and new.properties is None

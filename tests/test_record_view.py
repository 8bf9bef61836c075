"""The object record owned in one place (``qmf_async.wire``): the layout
(:class:`RecordLayout`), the view of a received record (:class:`RawObjectRecord`: header
fields, deleted, value access, the merge of a ``c`` and an ``i`` of one object), the one
compiled :class:`ClassCodec` per schema hash that serves decoding, scanning, reading and
the agent's encoding, and ``decode`` leaving the registry as it was."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from qmf_async import (
    ClassKind,
    ObjectId,
    QmfType,
    SchemaClass,
    SchemaProperty,
    SchemaStatistic,
    wire,
)
from qmf_async.wire import ClassCodec, ClassKey, RawObjectRecord, RecordLayout

from .test_codec_fuzz import BODIES, REGISTRY

QUEUE = SchemaClass(
    ClassKind.OBJECT, ClassKey("test.pkg", "queue", bytes(range(16))),
    properties=[SchemaProperty("name", QmfType.SSTR, index=True),
                SchemaProperty("durable", QmfType.BOOL),
                SchemaProperty("altExchange", QmfType.REF, optional=True),
                SchemaProperty("arguments", QmfType.MAP)],
    statistics=[SchemaStatistic("msgDepth", QmfType.UINT64),
                SchemaStatistic("label", QmfType.LSTR),
                SchemaStatistic("byteDepth", QmfType.UINT32)])
OID = ObjectId.make(sequence=3, broker_bank=1, agent_bank=2, object=77)
OTHER = ObjectId.make(sequence=3, broker_bank=1, agent_bank=2, object=78)
PROPS = ("q1", True, None, {"x": 1})
STATS = (12, "deep", 4096)


def _record(opcode: str, ts: int, *, oid: ObjectId = OID, deleted: int = 0,
            props: tuple[object, ...] = PROPS, stats: tuple[object, ...] = STATS,
            registry: wire.SchemaRegistry | None = None) -> RawObjectRecord:
    """One record of QUEUE, encoded and scanned as a session receives it."""
    reg = registry if registry is not None else wire.SchemaRegistry([QUEUE])
    rec = wire.ObjectRecord(opcode, 0, QUEUE, ts, 100, deleted, oid,
                            props if opcode != "i" else None, stats if opcode != "c" else None)
    (raw,) = wire.decode(wire.encode([rec], reg), reg, lazy=True)
    assert type(raw) is RawObjectRecord
    return raw


# ----------------------------------------------------------------------------- header fields

@pytest.mark.parametrize("opcode", ["c", "i", "g"])
def test_header_fields_read_as_the_eager_decoder_reads_them(opcode: str) -> None:
    rec = _record(opcode, 5_000, deleted=0)
    eager = rec.to_record()
    assert rec.timestamps == (eager.timestamp, eager.created, eager.deleted) == (5_000, 100, 0)
    assert (rec.timestamp, rec.created, rec.deleted) == rec.timestamps
    assert rec.object_id == OID and rec.object_id_bytes == OID.raw
    assert not rec.is_deleted()
    assert rec.has_properties == (opcode != "i") and rec.has_statistics == (opcode != "c")
    # the layout functions read the same bytes the same way
    assert RecordLayout.timestamps(rec.raw) == rec.timestamps
    assert RecordLayout.object_id(rec.raw) == OID
    assert RecordLayout.object_id_bytes(rec.raw) == OID.raw
    assert RecordLayout.header(5_000, 100, 0, OID) == rec.raw[:RecordLayout.HEADER_SIZE]
    assert RecordLayout.pack_header(5_000, 100, 0, OID.raw) == rec.raw[:wire.HEADER_SIZE]


def test_deleted_is_read_from_the_header() -> None:
    gone = _record("c", 9_000, deleted=8_999)
    assert gone.is_deleted() and gone.deleted == 8_999
    assert RecordLayout.is_deleted(gone.raw)
    assert not RecordLayout.is_deleted(_record("c", 9_000).raw)


def test_every_captured_record_header_matches_the_eager_decoder() -> None:
    seen = 0
    for body in BODIES:
        try:
            lazy = wire.decode(body, REGISTRY, lazy=True)
        except wire.DecodeError:
            continue
        for raw in lazy:
            if type(raw) is not RawObjectRecord:
                continue
            eager = raw.to_record()
            assert raw.timestamps == (eager.timestamp, eager.created, eager.deleted)
            assert raw.object_id == eager.object_id
            assert raw.is_deleted() == (eager.deleted != 0)
            seen += 1
    assert seen > 100


# ----------------------------------------------------------------------------- value access

def test_values_by_index_and_by_name() -> None:
    g = _record("g", 1)
    assert [g.prop(i) for i in range(4)] == list(PROPS)
    assert [g.stat(i) for i in range(3)] == list(STATS)
    assert g.get("name") == "q1" and g.get("msgDepth") == 12 and g.get("label") == "deep"
    assert g.get("altExchange", "absent") == "absent"  # an absent optional property
    assert g.get("nope", 7) == 7
    assert g.properties_dict() == {"name": "q1", "durable": True, "arguments": {"x": 1}}
    assert g.statistics_dict() == {"msgDepth": 12, "label": "deep", "byteDepth": 4096}


def test_a_part_the_record_does_not_carry_is_not_read() -> None:
    c, i = _record("c", 1), _record("i", 2)
    assert c.get("msgDepth", "none") == "none" and i.get("name", "none") == "none"
    assert c.statistics is None and i.properties is None
    with pytest.raises(LookupError):
        c.stat(0)
    with pytest.raises(LookupError):
        i.prop(0)


# ----------------------------------------------------------------------------- merge

def test_a_c_merged_with_an_earlier_i_carries_both() -> None:
    i = _record("i", 10, stats=(5, "five", 50))
    c = _record("c", 20, props=("q2", False, OTHER, {}))
    merged = c.merge(i)
    assert merged.opcode == "g" and merged.has_properties and merged.has_statistics
    assert merged.timestamp == 20  # the newer record's header
    assert merged.properties == ("q2", False, OTHER, {})
    assert merged.statistics == (5, "five", 50)
    assert merged.get("name") == "q2" and merged.get("label") == "five"
    assert merged.to_record() == wire.ObjectRecord("g", 0, QUEUE, 20, 100, 0, OID,
                                                   ("q2", False, OTHER, {}), (5, "five", 50))


def test_an_i_merged_with_an_earlier_c_and_then_a_newer_c() -> None:
    c1 = _record("c", 10, props=("old", True, None, {}))
    i = _record("i", 20, stats=(7, "seven", 70))
    first = i.merge(c1)
    assert (first.timestamp, first.properties, first.statistics) == (
        20, ("old", True, None, {}), (7, "seven", 70))
    c2 = _record("c", 30, props=("new", True, None, {}))
    second = c2.merge(first)  # the newest properties, the statistics kept
    assert (second.timestamp, second.properties, second.statistics) == (
        30, ("new", True, None, {}), (7, "seven", 70))
    assert [second.stat(k) for k in range(3)] == [7, "seven", 70]


def test_merge_keeps_the_record_when_nothing_completes_it() -> None:
    c = _record("c", 10)
    assert c.merge(None) is c
    assert c.merge(_record("c", 5)) is c  # same part
    assert c.merge(_record("i", 5, oid=OTHER)) is c  # another object
    g = _record("g", 10)
    assert g.merge(_record("i", 5)) is g  # nothing missing
    other_class = SchemaClass(ClassKind.OBJECT, ClassKey("test.pkg", "queue", bytes(16)),
                              properties=QUEUE.properties, statistics=QUEUE.statistics)
    reg = wire.SchemaRegistry([other_class])
    rec = wire.ObjectRecord("i", 0, other_class, 5, 100, 0, OID, None, STATS)
    (foreign,) = wire.decode(wire.encode([rec], reg), reg, lazy=True)
    assert c.merge(foreign) is c  # another schema hash


def test_a_deleted_record_merges_and_says_deleted() -> None:
    i = _record("i", 10)
    gone = _record("c", 20, deleted=19)
    merged = gone.merge(i)
    assert merged.is_deleted() and merged.deleted == 19 and merged.statistics == STATS


# ------------------------------------------------------------------ one codec per class

def test_one_codec_per_schema_hash_serves_every_face() -> None:
    reg = wire.SchemaRegistry([QUEUE])
    codec = reg.codec(QUEUE)
    assert isinstance(codec, ClassCodec)
    assert reg.codec(QUEUE.class_key) is codec
    assert wire.reader_of(codec) is codec  # the former reader is the codec itself
    rec = _record("g", 1, registry=reg)
    assert rec.codec is codec
    assert codec.record_scanner("g") is codec.record_scanner("g")
    assert codec.record_decoder("c") is codec.record_decoder("c")
    assert codec.props == {"name": 0, "durable": 1, "altExchange": 2, "arguments": 3}
    assert codec.prop(rec.raw, 0) == "q1" and codec.stat(rec.raw, rec.sofs, 2) == 4096


@pytest.mark.parametrize("cached", [False, True])
def test_the_encoder_face_writes_what_encode_writes(cached: bool) -> None:
    reg = wire.SchemaRegistry([QUEUE])
    codec = reg.codec(QUEUE)
    for op in "cig":
        props, stats = list(PROPS), list(STATS)
        if cached:  # sections as an agent keeps them
            p_out, s_out = bytearray(), bytearray()
            codec.properties[1](p_out, props)
            codec.statistics[1](s_out, stats)
            parts: tuple[object, object] = (bytes(p_out), bytes(s_out))
        else:
            parts = (props, stats)
        out = bytearray(codec.record_prefix(op, 9))
        codec.write_record(out, op, 50, 40, 0, OID.raw, *parts)  # type: ignore[arg-type]
        rec = wire.ObjectRecord(op, 9, QUEUE, 50, 40, 0, OID,
                                PROPS if op != "i" else None, STATS if op != "c" else None)
        assert bytes(out) == wire.encode([rec], reg)


def test_captured_records_rewrite_byte_for_byte_through_the_encoder_face() -> None:
    written = 0
    for body in BODIES:
        try:
            msgs = wire.decode(body, REGISTRY)
        except wire.DecodeError:
            continue
        if not msgs or not all(isinstance(m, wire.ObjectRecord) for m in msgs):
            continue
        out = bytearray()
        for m in msgs:
            codec = REGISTRY.codec(m.schema)
            out += codec.record_prefix(m.opcode, m.seq)
            codec.write_record(out, m.opcode, m.timestamp, m.created, m.deleted,
                               m.object_id.raw, m.properties, m.statistics)
            written += 1
        assert bytes(out) == body
    assert written > 100


# ------------------------------------------------------------------ decode has no side effect

def _schema_bodies() -> list[bytes]:
    return [b for b in BODIES if b[3:4] == b"s"]


def test_decode_leaves_the_registry_unchanged() -> None:
    bodies = _schema_bodies()
    assert bodies
    registry = wire.SchemaRegistry()
    for body in bodies:
        for lazy in (False, True):
            msgs = wire.decode(body, registry, lazy=lazy, defer_unknown=True)
            assert any(isinstance(m, wire.SchemaResponse) for m in msgs)
            assert len(registry) == 0 and list(registry) == []
    # registering what was received is the caller's decision
    learned = []
    for body in bodies:
        learned += registry.learn(wire.decode(body, registry))
    assert len(registry) == len(learned) == len({s.class_key for s in learned})
    before = list(registry)
    for body in BODIES:
        try:
            wire.decode(body, registry, defer_unknown=True)
        except wire.DecodeError:
            pass
    assert list(registry) == before


def test_a_known_registry_is_not_changed_by_a_peers_schema() -> None:
    registry = wire.SchemaRegistry([QUEUE])
    changed = SchemaClass(ClassKind.OBJECT, ClassKey("test.pkg", "other", bytes(16)),
                          properties=QUEUE.properties)
    (msg,) = wire.decode(wire.encode([wire.SchemaResponse(1, changed)]), registry)
    assert msg.schema == changed
    assert list(registry) == [QUEUE]


# ----------------------------------------------------------------------------- no import circle

def _wire_imports() -> dict[str, set[str]]:
    """Module -> the wire modules it imports (also under TYPE_CHECKING and in
    functions)."""
    root = Path(wire.__file__).parent
    graph: dict[str, set[str]] = {}
    for path in root.glob("*.py"):
        name = path.stem
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                if node.module:
                    deps.add(node.module.split(".")[0])
                else:
                    deps.update(a.name for a in node.names)
        graph[name] = deps & {p.stem for p in root.glob("*.py")}
    return graph


def test_no_import_circle_inside_wire() -> None:
    graph = _wire_imports()
    assert "_classcodec" in graph and "_record" in graph
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        if module in path:
            raise AssertionError(f"import circle: {' -> '.join((*path, module))}")
        if module in done:
            return
        for dep in sorted(graph.get(module, ())):
            visit(dep, (*path, module))
        done.add(module)

    for module in sorted(graph):
        visit(module, ())
    assert "_codec" not in graph["_record"] and "_codec" not in graph["_classcodec"]

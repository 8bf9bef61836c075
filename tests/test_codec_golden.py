"""Golden vectors: the real qpidd 1.40 captures decode and re-encode byte for byte.

Every record of ``/work/shared/captures/*.jsonl`` is replayed once, in capture order,
through ONE shared :class:`SchemaRegistry` (schema responses add their classes, so
the content, event and method bodies that follow them can be decoded).  Each record
then gets its own test (named by file, ``n``, direction and opcode) that checks what
the replay produced for it, so a failure names the record and its note.
"""

from __future__ import annotations

import itertools
import json
import re
import uuid
from typing import Any

import attrs
import pytest

from qmf_async import ClassKind, ObjectId, QmfType, wire
from qmf_async.wire._messages import (
    AttachRequest,
    AttachResponse,
    BrokerResponse,
    ClassIndication,
    EventIndication,
    GetQuery,
    Heartbeat,
    MethodRequest,
    MethodResponse,
    ObjectRecord,
    PackageIndication,
    SchemaResponse,
    UndecodedTail,
)

from ._captures import load_records

BROKER_ID = uuid.UUID("d9c0726a-1fa8-4bd8-9fb4-6fbd599657c5")
BROKER_PKG = "org.apache.qpid.broker"

# A missing capture set fails collection loudly (FileNotFoundError), never looks green.
RECORDS = load_records()


def _rid(rec: dict[str, Any]) -> str:
    stem = rec["_file"].removeprefix("qpidd-1.40-").removesuffix(".jsonl")
    return f"{stem}-n{rec['n']}-{rec['dir']}-{rec['opcode']}"


@attrs.define
class Replayed:
    rec: dict[str, Any]
    msgs: list[Any] | None = None
    error: BaseException | None = None
    reencoded: bytes | None = None
    encode_error: BaseException | None = None


@attrs.define
class Replay:
    registry: wire.SchemaRegistry
    by_id: dict[str, Replayed]

    def find(self, *, opcode: str | None = None, direction: str | None = None,
             note: str | None = None, n: int | None = None, file: str | None = None
             ) -> list[Replayed]:
        found = [r for r in self.by_id.values()
                 if (opcode is None or r.rec["opcode"] == opcode)
                 and (direction is None or r.rec["dir"] == direction)
                 and (note is None or note in r.rec["note"])
                 and (n is None or r.rec["n"] == n)
                 and (file is None or file in r.rec["_file"])]
        assert found, f"no capture record matches opcode={opcode} dir={direction} " \
                      f"note={note!r} n={n} file={file}"
        for r in found:
            assert r.error is None, f"{_rid(r.rec)} did not decode: {r.error!r}"
        return found

    def one(self, **kw: Any) -> Replayed:
        found = self.find(**kw)
        assert len(found) == 1, f"{len(found)} records match {kw}"
        return found[0]


@pytest.fixture(scope="module")
def replay() -> Replay:
    """Decode every record in capture order with one registry, then re-encode it."""
    registry = wire.SchemaRegistry()
    by_id: dict[str, Replayed] = {}
    for rec in RECORDS:
        r = Replayed(rec)
        by_id[_rid(rec)] = r
        try:
            r.msgs = wire.decode(rec["_body"], registry)
            registry.learn(r.msgs)  # as a console does with the schemas it receives
        except Exception as exc:  # recorded, asserted by the per-record test
            r.error = exc
            continue
        try:
            r.reencoded = wire.encode(r.msgs, registry)
        except Exception as exc:
            r.encode_error = exc
    return Replay(registry, by_id)


def test_capture_set_is_complete() -> None:
    names = {r["_file"] for r in RECORDS}
    assert names == {"qpidd-1.40-qmf1.jsonl", "qpidd-1.40-agent-attach.jsonl"}
    assert len(RECORDS) == 452
    assert len({_rid(r) for r in RECORDS}) == len(RECORDS), "record ids must be unique"


@pytest.mark.parametrize("rid", [_rid(r) for r in RECORDS])
def test_record_round_trips(replay: Replay, rid: str) -> None:
    r = replay.by_id[rid]
    rec = r.rec
    what = f"record n={rec['n']} ({rec['_file']}:{rec['_line']}, {rec['dir']}): {rec['note']}"
    assert r.error is None, f"decode failed for {what}: {r.error!r}"
    assert r.msgs, f"nothing decoded for {what}"
    assert not any(isinstance(m, UndecodedTail) for m in r.msgs), f"undecoded tail in {what}"
    assert r.encode_error is None, f"re-encode failed for {what}: {r.encode_error!r}"
    assert r.reencoded == rec["_body"], (
        f"re-encoded bytes differ for {what}:\n got  {r.reencoded.hex()}\n want "
        f"{rec['_body'].hex()}")
    ops = [m.OPCODE for m in r.msgs]
    if "batch" in rec:
        expected = rec["batch"]
    elif "two S requests in ONE message body" in rec["note"]:
        expected = ["S", "S"]
    else:
        expected = [rec["opcode"]]
    assert ops == expected, f"opcodes {ops} != {expected} for {what}"
    assert r.msgs[0].seq == rec["seq"], f"seq {r.msgs[0].seq} != {rec['seq']} for {what}"


def test_every_record_decodes_deterministically(replay: Replay) -> None:
    # Decoding again with the (now complete) registry gives equal values.
    for r in replay.by_id.values():
        again = wire.decode(r.rec["_body"], replay.registry)
        assert again == r.msgs, _rid(r.rec)


def test_registry_learned_every_schema(replay: Replay) -> None:
    schema_msgs = [m for r in replay.find(opcode="s") for m in r.msgs]
    keys = {m.schema.class_key for m in schema_msgs}
    assert len(keys) == len(replay.registry) == 38
    # every class the broker announced (q) got its schema
    announced = {m.class_key for r in replay.find(opcode="q") for m in r.msgs}
    assert announced <= keys
    assert replay.registry.packages() == [BROKER_PKG]


# ----------------------------------------------------------------------------- content


def test_broker_response_id(replay: Replay) -> None:
    (msg,) = replay.one(opcode="b").msgs
    assert isinstance(msg, BrokerResponse)
    assert msg.broker_id == BROKER_ID
    assert msg.seq == 0


def test_package_indication_batch(replay: Replay) -> None:
    r = replay.one(opcode="p")
    assert r.rec["batch"] == ["p", "p"]
    assert all(isinstance(m, PackageIndication) for m in r.msgs)
    assert [m.package for m in r.msgs] == ["org.apache.qpid.acl", BROKER_PKG]
    assert {m.seq for m in r.msgs} == {r.rec["seq"]} == {1795352984}


def test_class_indications_kinds(replay: Replay) -> None:
    msgs = [m for r in replay.find(opcode="q") for m in r.msgs]
    assert all(isinstance(m, ClassIndication) for m in msgs)
    kinds = {m.class_key.name: m.kind for m in msgs}
    assert kinds["queue"] == ClassKind.OBJECT == 1
    assert kinds["agent"] == ClassKind.OBJECT
    assert kinds["bind"] == ClassKind.EVENT == 2
    assert kinds["queueDeclare"] == ClassKind.EVENT
    assert {int(k) for k in kinds.values()} == {1, 2}
    assert {m.class_key.package for m in msgs} == {BROKER_PKG}
    # hashes are 16 raw bytes and the text form names them
    agent = next(m for m in msgs if m.class_key.name == "agent")
    assert agent.class_key.hash.hex() == "d9e7e6304319941e6685be8f8892f3a5"
    assert str(agent.class_key) == f"{BROKER_PKG}:agent(d9e7e6304319941e6685be8f8892f3a5)"


def _queue_schema(replay: Replay):  # type: ignore[no-untyped-def]
    (schema,) = replay.registry.find("queue", BROKER_PKG)
    return schema


def test_queue_schema(replay: Replay) -> None:
    r = replay.one(opcode="s", note="schema response org.apache.qpid.broker:queue; during: connect")
    (msg,) = r.msgs
    assert isinstance(msg, SchemaResponse)
    schema = msg.schema
    assert schema == _queue_schema(replay)
    assert schema.kind == ClassKind.OBJECT
    assert schema.class_key.hash.hex() == "3db4e9111b6b1523a48b6855f4c5627b"
    props = {p.name: p for p in schema.properties}
    assert [p.name for p in schema.properties] == [
        "vhostRef", "name", "durable", "autoDelete", "exclusive", "arguments", "altExchange"]
    assert (props["vhostRef"].type, props["vhostRef"].index) == (QmfType.REF, True)
    assert (props["name"].type, props["name"].index) == (QmfType.SSTR, True)
    assert schema.index_names == ("vhostRef", "name")
    for name in ("durable", "autoDelete", "exclusive"):
        assert props[name].type == QmfType.BOOL and not props[name].index
    assert props["arguments"].type == QmfType.MAP
    assert props["arguments"].desc == "Arguments supplied in queue.declare"
    assert props["altExchange"].type == QmfType.REF
    assert props["altExchange"].optional is True
    assert [p.name for p in schema.properties if p.optional] == ["altExchange"]
    stats = {s.name: s for s in schema.statistics}
    assert stats["msgDepth"].type == QmfType.UINT64 and stats["msgDepth"].unit == "message"
    assert stats["byteDepth"].unit == "octet"
    assert stats["consumerCount"].type == QmfType.UINT32
    assert stats["messageLatencyAverage"].type == QmfType.DELTATIME
    assert stats["flowStopped"].type == QmfType.BOOL
    assert stats["creator"].type == QmfType.SSTR
    assert len(schema.statistics) == 47


def test_queue_purge_method(replay: Replay) -> None:
    schema = _queue_schema(replay)
    assert [m.name for m in schema.methods] == ["purge", "reroute"]
    purge = schema.method("purge")
    assert [(a.name, a.type, a.direction) for a in purge.arguments] == [
        ("request", QmfType.UINT32, "I"), ("filter", QmfType.MAP, "I")]
    assert purge.out_args == ()
    reroute = schema.method("reroute")
    assert [a.name for a in reroute.in_args] == ["request", "useAltExchange", "exchange",
                                                  "filter"]


def test_schema_maps_use_vbin16_strings(replay: Replay) -> None:
    # qpidd writes schema strings as vbin16 (0x90) and type/access as uint8 (0x02);
    # re-encoding from the schema objects (not from remembered maps) must match.
    schema = _queue_schema(replay)
    m = schema.properties[0].to_map()
    assert m.types["name"] == 0x90 and m["name"] == b"vhostRef"
    assert m.types["type"] == 0x02 and m["type"] == int(QmfType.REF)
    assert m.types["access"] == 0x02
    assert list(m) == sorted(m)


def _queue_g(replay: Replay) -> ObjectRecord:
    r = replay.one(opcode="g", note="by _objectId", direction="in",
                   n=277)
    (msg,) = r.msgs
    assert isinstance(msg, ObjectRecord)
    return msg


def test_queue_g_record_values(replay: Replay) -> None:
    rec = _queue_g(replay)
    assert rec.opcode == "g"
    assert rec.class_key.name == "queue"
    props = rec.properties_dict()
    assert props["name"] == "capq-1"
    assert props["durable"] is False and props["autoDelete"] is False
    assert props["exclusive"] is False
    assert props["arguments"] == {}
    assert isinstance(props["vhostRef"], ObjectId) and str(props["vhostRef"]) == "0-0-1-0-3"
    assert "altExchange" not in props  # optional, absent
    assert rec.properties[-1] is None
    stats = rec.statistics_dict()
    assert stats["msgDepth"] == 5 and type(stats["msgDepth"]) is int
    assert stats["msgTotalEnqueues"] == 5
    assert stats["byteDepth"] == 275
    assert stats["bindingCount"] == 2
    assert stats["consumerCount"] == 0
    assert stats["flowStopped"] is False
    assert stats["creator"] == "guest@QPID"
    assert len(stats) == 47
    assert str(rec.object_id) == "0-1-1-0-26"
    assert rec.deleted == 0
    assert rec.created < rec.timestamp
    assert 1_577_836_800 * 10**9 < rec.created < 4_102_444_800 * 10**9  # 2020..2100 in ns


def test_object_ids_text_round_trip(replay: Replay) -> None:
    seen = set()
    for r in replay.find(direction="in"):
        for m in r.msgs:
            if isinstance(m, ObjectRecord):
                oid = m.object_id
                text = str(oid)
                assert re.fullmatch(r"0-[01]-1-0-\d+", text), text
                back = ObjectId.parse(text)
                assert back == oid and back.raw == oid.raw and hash(back) == hash(oid)
                seen.add(text)
    assert "0-1-1-0-26" in seen
    assert len(seen) > 20
    # queue objects are non-persistent (boot sequence 1); the broker object is persistent
    q = _queue_g(replay)
    assert (q.object_id.sequence, q.object_id.broker_bank, q.object_id.agent_bank,
            q.object_id.object) == (1, 1, 0, 26)


def test_heartbeat_timestamps(replay: Replay) -> None:
    beats = [m for r in replay.find(opcode="h") for m in r.msgs]
    assert len(beats) == 15
    assert all(isinstance(m, Heartbeat) and m.seq == 0 for m in beats)
    ts = [m.timestamp for m in beats]
    assert all(1_577_836_800 * 10**9 < t < 4_102_444_800 * 10**9 for t in ts)
    assert ts == sorted(ts)
    # published every 2 s (--mgmt-pub-interval 2): gaps are whole multiples of 2e9 ns
    for a, b in itertools.pairwise(ts):
        gap = b - a
        assert gap > 0
        assert abs(gap - round(gap / 2e9) * 2e9) < 10_000_000, gap


def test_events_decode_by_schema(replay: Replay) -> None:
    r = replay.find(opcode="e", note="org.apache.qpid.broker:queueDeclare; during: traffic")[0]
    (ev,) = r.msgs
    assert isinstance(ev, EventIndication)
    assert ev.class_key.name == "queueDeclare"
    assert ev.severity == 6 and ev.severity_name == "info"
    assert ev.arguments["qName"] == "capq-1"
    assert ev.arguments["disp"] == "created"
    assert ev.arguments["durable"] is False
    assert ev.arguments["args"] == {}
    assert list(ev.arguments) == [a.name for a in ev.schema.arguments]


# ----------------------------------------------------------------------------- methods


def test_unknown_method_status_text_is_str8(replay: Replay) -> None:
    r = replay.one(opcode="m", note="UnknownMethod")
    body = r.rec["_body"]
    (msg,) = r.msgs
    assert isinstance(msg, MethodResponse)
    assert (msg.status, msg.text, msg.short_text) == (2, "UnknownMethod", True)
    assert msg.raw_arguments == b"" and msg.arguments is None
    assert body[8:13] == b"\x00\x00\x00\x02\x0d"  # status, then a one-byte length
    assert wire.encode([msg]) == body
    # deterministic: decoding twice gives equal values
    assert wire.decode(body, replay.registry) == wire.decode(body, replay.registry) == [msg]


def test_other_method_responses_use_str16(replay: Replay) -> None:
    msgs = [m for r in replay.find(opcode="m") for m in r.msgs]
    assert len(msgs) >= 10
    for m in msgs:
        if m.text != "UnknownMethod":
            assert m.short_text is False, m
    texts = {m.status: m.text for m in msgs}
    assert texts[1] == "UnknownObject"
    assert texts[4] == "InvalidParameter"
    assert texts[7] == "Invalid log level name: garbage!!"


def _broker_schema(replay: Replay):  # type: ignore[no-untyped-def]
    (schema,) = replay.registry.find("broker", BROKER_PKG)
    return schema


def test_echo_response_output_args(replay: Replay) -> None:
    r = replay.one(opcode="m", note="broker.echo(1,'hi')")
    body = r.rec["_body"]
    seq = r.rec["seq"]
    (raw,) = r.msgs
    assert raw.arguments is None
    assert raw.raw_arguments == b"\x00\x00\x00\x01\x00\x02hi"
    schema = _broker_schema(replay)
    echo = schema.method("echo")
    for target in ((schema, echo), echo):
        methods = {seq: target}
        (msg,) = wire.decode(body, replay.registry, methods=methods)
        assert msg.arguments == {"sequence": 1, "body": "hi"}
        assert msg.raw_arguments == b""
        assert wire.encode([msg], replay.registry, methods=methods) == body
    # another seq in the map does not apply
    (other,) = wire.decode(body, replay.registry, methods={seq + 1: (schema, echo)})
    assert other.arguments is None and other == raw


def test_get_log_level_response_output_arg(replay: Replay) -> None:
    r = replay.one(opcode="m", note="broker.getLogLevel()")
    schema = _broker_schema(replay)
    methods = {r.rec["seq"]: (schema, schema.method("getLogLevel"))}
    (msg,) = wire.decode(r.rec["_body"], replay.registry, methods=methods)
    assert msg.arguments == {"level": "info+,debug+:management"}
    assert wire.encode([msg], replay.registry, methods=methods) == r.rec["_body"]


def test_method_requests_decode_by_schema(replay: Replay) -> None:
    (echo,) = replay.one(opcode="M", note="broker.echo(1,'hi')").msgs
    assert isinstance(echo, MethodRequest)
    assert echo.method == "echo"
    assert echo.arguments == {"sequence": 1, "body": "hi"}
    assert echo.raw_arguments == b""
    assert str(echo.object_id) == "0-0-1-0-2"
    assert echo.class_key == _broker_schema(replay).class_key

    (create,) = replay.one(opcode="M", note="broker.create queue capq-qmf").msgs
    assert create.arguments == {"type": "queue", "name": "capq-qmf",
                                "properties": {"auto_delete": False}, "strict": False}
    assert isinstance(create.arguments["properties"], wire.WireMap)
    assert create.arguments["properties"].types == {"auto_delete": 0x08}

    (purge,) = replay.one(opcode="M", note="queue.purge(2) on capq-2").msgs
    assert purge.arguments == {"request": 2, "filter": {}}
    assert purge.class_key.name == "queue"

    (move,) = replay.one(opcode="M", note="queueMoveMessages").msgs
    assert move.arguments == {"srcQueue": "capq-1", "destQueue": "capq-3", "qty": 1,
                              "filter": {}}


def test_method_request_encodes_from_arguments(replay: Replay) -> None:
    # Building the echo request from scratch gives the console's bytes.
    r = replay.one(opcode="M", note="broker.echo(1,'hi')")
    (orig,) = r.msgs
    fresh = MethodRequest(orig.seq, ObjectId.parse("0-0-1-0-2"),
                          _broker_schema(replay).class_key, "echo",
                          {"body": "hi", "sequence": 1})
    assert wire.encode([fresh], replay.registry) == r.rec["_body"]


def test_unknown_and_mismatched_methods_stay_raw(replay: Replay) -> None:
    (unknown,) = replay.one(opcode="M", note="raw M unknown method name").msgs
    assert unknown.method == "noSuchMethod" and unknown.arguments is None
    (mismatch,) = replay.one(opcode="M", note="class mismatch").msgs
    # class key names queue with the broker's hash: no schema, arguments kept raw
    assert mismatch.arguments is None
    assert mismatch.raw_arguments == bytes.fromhex("000000000000000400000000")


def test_truncated_echo_request_keeps_raw_arguments(replay: Replay) -> None:
    r = replay.one(opcode="M", direction="out", note="truncated")
    (msg,) = r.msgs
    assert msg.method == "echo"
    assert msg.arguments is None
    assert msg.raw_arguments == b"\x00\x00"
    assert wire.encode([msg], replay.registry) == r.rec["_body"]


def test_get_by_objectid_uses_str16(replay: Replay) -> None:
    r = replay.one(opcode="G", note='query={"_objectid": "0-1-1-0-26"}')
    (msg,) = r.msgs
    assert isinstance(msg, GetQuery)
    assert msg.query == {"_objectid": "0-1-1-0-26"}
    assert isinstance(msg.query, wire.WireMap)
    assert msg.query.types == {"_objectid": 0x95}
    assert ObjectId.parse(msg.query["_objectid"]) == _queue_g(replay).object_id
    # a plain dict infers str16 as well: the console's request is reproduced
    assert wire.encode([GetQuery(msg.seq, {"_objectid": "0-1-1-0-26"})]) == r.rec["_body"]


def test_get_queries_by_class(replay: Replay) -> None:
    for r in replay.find(opcode="G"):
        (msg,) = r.msgs
        m = re.search(r"query=(\{.*?\});", r.rec["note"])
        assert m, r.rec["note"]
        assert msg.query == json.loads(m.group(1))
        assert set(msg.query.types.values()) <= {0x95}


def test_agent_attach(replay: Replay) -> None:
    (req,) = replay.one(opcode="A", file="agent-attach").msgs
    assert isinstance(req, AttachRequest)
    assert req.label == "capture-agent"
    assert isinstance(req.system_id, uuid.UUID)
    assert (req.broker_bank, req.agent_bank) == (0, 0)
    (resp,) = replay.one(opcode="a", file="agent-attach").msgs
    assert isinstance(resp, AttachResponse)
    assert (resp.broker_bank, resp.agent_bank) == (1, 10)
    assert resp.seq == req.seq == 1


# ----------------------------------------------------------------------------- unknown schemas


def test_content_without_schema_raises_naming_the_class(replay: Replay) -> None:
    body = replay.one(n=277, opcode="g").rec["_body"]
    with pytest.raises(wire.UnknownSchemaError) as info:
        wire.decode(body, wire.SchemaRegistry())
    key = _queue_schema(replay).class_key
    assert info.value.class_key == key
    assert info.value.opcode == "g"
    assert str(key) in str(info.value)
    assert isinstance(info.value, wire.DecodeError)


@pytest.mark.parametrize("opcode", ["g", "c", "i", "e"])
def test_defer_unknown_then_decode_remaining(replay: Replay, opcode: str) -> None:
    r = next(x for x in replay.find(opcode=opcode, direction="in"))
    body = r.rec["_body"]
    key = r.msgs[0].class_key
    schema = replay.registry.get(key)
    assert schema is not None
    # prefix with a message that needs no schema: it decodes, the rest is deferred
    prefix = wire.encode([wire.CommandComplete(5, 0, "OK")])
    fresh = wire.SchemaRegistry()
    with pytest.raises(wire.UnknownSchemaError):
        wire.decode(prefix + body, fresh)
    out = wire.decode(prefix + body, fresh, defer_unknown=True)
    assert out[0] == wire.CommandComplete(5, 0, "OK")
    tail = out[-1]
    assert len(out) == 2 and isinstance(tail, UndecodedTail)
    assert (tail.opcode, tail.seq, tail.class_key, tail.offset) == (
        opcode, r.rec["seq"], key, len(prefix))
    assert tail.remaining == body
    # an UndecodedTail re-encodes as the bytes it kept
    assert wire.encode(out, fresh) == prefix + body
    fresh.add(schema)
    assert wire.decode(tail.remaining, fresh) == r.msgs

"""The console protocol core without I/O: bodies in (built with ``wire.encode``),
events out, requests returned as bytes, time passed in.  No event loop runs here."""

from __future__ import annotations

import ast
import pathlib
from typing import Any

import pytest

from qmf_async import wire
from qmf_async.errors import AgentGoneError, ConnectionLostError, QmfError, UsageError
from qmf_async.protocol import (
    AgentArrived,
    AgentLeft,
    AgentRelabeled,
    BodyMalformed,
    ClassSeen,
    ConsoleProtocol,
    EventReceived,
    HeartbeatReceived,
    HeldDropped,
    ObjectUpdate,
    PackageSeen,
    QueryDone,
    Reply,
    RequestFailed,
    SchemaNeeded,
    SchemaSeen,
)
from qmf_async.wire import (
    BrokerResponse,
    ClassIndication,
    ClassKind,
    CommandComplete,
    EventIndication,
    GetQuery,
    Heartbeat,
    MethodRequest,
    MethodResponse,
    ObjectId,
    ObjectRecord,
    PackageIndication,
    QmfType,
    SchemaArgument,
    SchemaMethod,
    SchemaProperty,
    SchemaRegistry,
    SchemaResponse,
    SchemaStatistic,
)
from tests.fake_transport import BROKER_AGENT_SCHEMA, event_schema, object_schema

QUEUE = object_schema(
    "test.pkg", "queue",
    properties=[SchemaProperty("name", QmfType.SSTR, index=True)],
    statistics=[SchemaStatistic("depth", QmfType.UINT32)],
    methods=[SchemaMethod("echo", [
        SchemaArgument("seq", QmfType.UINT32, direction="IO"),
        SchemaArgument("total", QmfType.UINT64, direction="O"),
    ])],
)
DECLARE = event_schema("test.pkg", "queueDeclare", [SchemaArgument("qName", QmfType.SSTR)])
A5 = (1, 5)
A6 = (1, 6)


def oid(n: int, ab: int = 5) -> ObjectId:
    return ObjectId.make(sequence=1, broker_bank=1, agent_bank=ab, object=n)


def record(seq: int, n: int, opcode: str = "g", *, deleted: int = 0) -> ObjectRecord:
    return ObjectRecord(opcode, seq, QUEUE, 10, 1, deleted, oid(n),
                        (f"q{n}",) if opcode != "i" else None,
                        (n,) if opcode != "c" else None)


def full_registry() -> SchemaRegistry:
    reg = SchemaRegistry()
    for schema in (QUEUE, DECLARE, BROKER_AGENT_SCHEMA):
        reg.add(schema)
    return reg


def body(*messages: Any, methods: Any = None) -> bytes:
    """One AMQP body holding ``messages`` (encoded with every schema known)."""
    reg = full_registry()
    return b"".join(wire.encode(m, reg, methods=methods) for m in messages)


def names(records: list[Any]) -> list[str]:
    return [r.properties_dict()["name"] for r in records]


def only(events: list[Any], kind: type) -> list[Any]:
    return [e for e in events if type(e) is kind]


def core_with_agents(*banks: tuple[int, int], **kwargs: Any) -> ConsoleProtocol:
    core = ConsoleProtocol(full_registry(), where="test", start_seq=100, **kwargs)
    for bb, ab in banks:
        assert core.see_agent(bb, ab, 0.0, label=f"agent-{ab}") == [
            AgentArrived((bb, ab), f"agent-{ab}")]
    return core


# ----------------------------------------------------------------------------- requests


def test_sequence_numbers_are_allocated_released_and_skip_zero_and_those_in_use() -> None:
    core = ConsoleProtocol(SchemaRegistry(), start_seq=0xFFFFFFFE)
    first = core.send_query(A5, {"_class": "queue"})
    second = core.send_query(A5, {"_class": "queue"})
    assert (first.seq, second.seq) == (0xFFFFFFFE, 0xFFFFFFFF)
    assert first.key == "agent.1.5"
    (msg,) = wire.decode(first.body, SchemaRegistry())
    assert msg == GetQuery(first.seq, {"_class": "queue"})
    core.correlator._next = 0xFFFFFFFF  # wrap around onto a number in use
    third = core.send_query(A6, {"_class": "queue"})
    assert third.seq == 1  # 0 is never used, 0xFFFFFFFF is in use
    assert len(core) == 3
    assert core.cancel(second.seq) and not core.cancel(second.seq)
    assert len(core) == 2
    # a cancelled request ignores its answer; the body goes nowhere
    assert core.receive(body(CommandComplete(second.seq)), "qmf-reply", 1.0) == []
    core.correlator._next = 0xFFFFFFFF
    assert core.send_query(A5, {"_class": "queue"}).seq == 0xFFFFFFFF  # free again


def test_broker_request_uses_sequence_zero_once() -> None:
    core = ConsoleProtocol(SchemaRegistry())
    out = core.send_broker_request()
    assert (out.seq, out.key, out.exchange) == (0, "broker", "qpid.management")
    with pytest.raises(UsageError):
        core.send_broker_request()
    reply = BrokerResponse(__import__("uuid").UUID(int=7))
    events = core.receive(body(reply), "qmf-reply", 0.0)
    assert events == [Reply(0, reply)] and len(core) == 0


def test_query_collects_items_until_z() -> None:
    core = core_with_agents(A5)
    out = core.send_query(A5, {"_class": "queue"})
    assert core.receive(body(record(out.seq, 1), record(out.seq, 2)), "r", 1.0) == []
    assert core.receive(body(record(out.seq, 3)), "r", 1.0) == []
    (done,) = core.receive(body(CommandComplete(out.seq)), "r", 1.0)
    assert type(done) is QueryDone and done.request == out.seq and done.code == 0
    assert names(done.items) == ["q1", "q2", "q3"]
    assert len(core) == 0


def test_query_with_a_sink_streams_records_and_ends_empty() -> None:
    core = core_with_agents(A5)
    got: list[Any] = []
    out = core.send_query(A5, {"_class": "queue"}, sink=got.append)
    assert core.receive(body(record(out.seq, 1), record(out.seq, 2), CommandComplete(out.seq)),
                        "r", 1.0) == [QueryDone(out.seq, [])]
    assert names(got) == ["q1", "q2"]


def test_z_with_an_error_code_ends_the_query_with_that_code() -> None:
    core = core_with_agents(A5)
    out = core.send_query(A5, {"_class": "queue"})
    core.receive(body(record(out.seq, 1)), "r", 1.0)
    (done,) = core.receive(body(CommandComplete(out.seq, 7, "no such class")), "r", 1.0)
    assert (done.code, done.text, names(done.items)) == (7, "no such class", ["q1"])
    # a plain request answered by a failing z ends the same way, with nothing collected
    req = core.send_schema_request(QUEUE.class_key, A5)
    assert core.receive(body(CommandComplete(req.seq, 3, "unknown")), "r", 1.0) == [
        QueryDone(req.seq, [], 3, "unknown")]


def test_duplicates_after_the_end_are_ignored() -> None:
    core = core_with_agents(A5)
    got: list[Any] = []
    out = core.send_query(A5, {"_class": "queue"}, sink=got.append)
    core.receive(body(record(out.seq, 1), CommandComplete(out.seq)), "r", 1.0)
    # the same answer again (a redelivery): not an update, not a second end
    assert core.receive(body(record(out.seq, 1), CommandComplete(out.seq)), "r", 1.0) == []
    assert names(got) == ["q1"]


def test_a_reply_of_another_opcode_does_not_answer_a_request() -> None:
    core = core_with_agents(A5)
    req = core.send_schema_request(QUEUE.class_key, A5)
    assert core.receive(body(PackageIndication(req.seq, "test.pkg")), "r", 1.0) == [
        PackageSeen("test.pkg")]  # not an s: seen as an indication, the request waits
    assert len(core) == 1
    events = core.receive(body(SchemaResponse(req.seq, QUEUE)), "r", 1.0)
    assert events == [SchemaSeen(QUEUE), Reply(req.seq, SchemaResponse(req.seq, QUEUE))]
    assert len(core) == 0


# ----------------------------------------------------------------------------- held for a schema


def test_bodies_held_for_a_schema_are_released_in_arrival_order() -> None:
    reg = SchemaRegistry()  # the console knows no class yet
    core = ConsoleProtocol(reg, start_seq=100)
    core.see_agent(1, 5, 0.0)
    out = core.send_query(A5, {"_class": "queue"})
    first = core.receive(body(record(out.seq, 1), record(out.seq, 2)), "r", 1.0)
    assert first == [SchemaNeeded(QUEUE.class_key, A5)]  # asked for once, from the agent
    assert core.receive(body(record(out.seq, 3)), "r", 1.0) == []
    # an unsolicited update of the same class waits too
    assert core.receive(body(record(0, 9, "c")), "console.obj.1.5.test.pkg.queue", 1.0) == []
    assert core.receive(body(CommandComplete(out.seq)), "r", 1.0) == []  # held: still open
    assert core.held_count == 3 and len(core) == 1
    # a duplicate received after the z is not held
    assert core.receive(body(record(out.seq, 4)), "r", 1.0) == []
    assert core.held_count == 3
    reg.add(QUEUE)
    events = core.schema_known(QUEUE.class_key, 2.0)
    done = only(events, QueryDone)
    # the query ends when its last held body (received before the z) is routed
    assert [type(e) for e in events] == [QueryDone, ObjectUpdate]
    assert names(done[0].items) == ["q1", "q2", "q3"]
    (update,) = only(events, ObjectUpdate)
    assert update.agent == A5 and update.record.object_id == oid(9)
    assert core.held_count == 0 and core.held == {} and len(core) == 0
    core.fetch_finished(QUEUE.class_key)
    assert core.fetching == set()


def test_held_bodies_overflow_is_counted() -> None:
    reg = SchemaRegistry()
    core = ConsoleProtocol(reg, max_held=2)
    key = "console.obj.1.5.test.pkg.queue"
    assert type(core.receive(body(record(0, 1, "c")), key, 0.0)[-1]) is SchemaNeeded
    assert core.receive(body(record(0, 2, "c")), key, 0.0) == []
    events = core.receive(body(record(0, 3, "c")), key, 0.0)
    assert events == [HeldDropped(QUEUE.class_key, 1, "too many bodies waiting for schemas")]
    assert core.held_count == 2


def test_a_failed_schema_fetch_drops_the_held_bodies_and_fails_their_query() -> None:
    core = ConsoleProtocol(SchemaRegistry(), start_seq=5)
    core.see_agent(1, 5, 0.0)
    out = core.send_query(A5, {"_class": "queue"})
    core.receive(body(record(out.seq, 1)), "r", 0.0)
    core.receive(body(record(out.seq, 2)), "r", 0.0)
    events = core.drop_held("no schema", QUEUE.class_key)
    assert [type(e) for e in events] == [RequestFailed, HeldDropped]
    assert events[0].request == out.seq and str(events[0].error) == "no schema"
    assert events[1].count == 2 and core.held_count == 0 and len(core) == 0


def test_an_unsolicited_body_held_and_dropped_leaves_the_broker_request_alone() -> None:
    # ``B`` and unsolicited publications both use sequence 0: an update of a class not
    # known yet, arriving on the topic before ``b``, is no part of the ``B``
    reg = SchemaRegistry()
    core = ConsoleProtocol(reg)
    out = core.send_broker_request()
    key = "console.obj.1.0.test.pkg.queue"
    events = core.receive(body(record(0, 1, "c")), key, 0.0)
    assert events == [AgentArrived((1, 0), ""), SchemaNeeded(QUEUE.class_key, (1, 0))]
    assert core.drop_held("no agent to ask", QUEUE.class_key) == [
        HeldDropped(QUEUE.class_key, 1, "no agent to ask")]
    assert len(core) == 1  # the B still waits for its b
    reply = BrokerResponse(__import__("uuid").UUID(int=7))
    assert core.receive(body(reply), "qmf-reply", 1.0) == [Reply(out.seq, reply)]
    # and released instead of dropped, it is routed as an update, the B untouched
    out = core.send_broker_request()
    core.receive(body(record(0, 2, "c")), key, 2.0)
    reg.add(QUEUE)
    assert [type(e) for e in core.schema_known(QUEUE.class_key, 2.0)] == [ObjectUpdate]
    assert len(core) == 1


# ----------------------------------------------------------------------------- agents


def test_heartbeats_keep_an_agent_and_aging_with_now_removes_it() -> None:
    core = ConsoleProtocol(full_registry(), start_seq=1, agent_interval=10.0,
                           min_agent_interval=0.1, missed_heartbeats=3)
    key = "console.heartbeat.1.5"
    assert core.receive(body(Heartbeat(111)), key, 100.0) == [
        AgentArrived((1, 5), ""), HeartbeatReceived((1, 5), 111)]
    for t in (101.0, 102.0, 103.0, 104.0, 105.0, 106.0, 107.0, 108.0, 109.0, 110.0):
        assert core.receive(body(Heartbeat(int(t))), key, t) == [
            HeartbeatReceived((1, 5), int(t))]
    interval = core.agents[A5].interval
    assert 1.0 <= interval < 4.0  # follows the real 1 s period (smoothed from 10 s)
    out = core.send_query(A5, {"_class": "queue"})
    assert core.age(110.0 + 3 * interval - 0.01) == []  # not yet three intervals missed
    events = core.age(110.0 + 3 * interval + 0.01)
    assert [type(e) for e in events] == [RequestFailed, AgentLeft]
    assert events[0].request == out.seq and isinstance(events[0].error, AgentGoneError)
    assert "no heartbeat for" in events[1].why and A5 not in core.agents
    assert core.departed_why(A5) == events[1].why
    # heard again: it arrives again and is no longer departed
    assert core.receive(body(Heartbeat(1)), key, 200.0)[0] == AgentArrived((1, 5), "")
    assert core.departed_why(A5) is None


def test_the_management_brokers_own_agent_is_not_aged() -> None:
    core = ConsoleProtocol(full_registry())
    core.see_agent(1, 0, 0.0, label="broker")
    core.has_management = True
    assert core.age(1e6) == []
    core.has_management = False
    assert [type(e) for e in core.age(1e6)] == [AgentLeft]


def test_agent_objects_of_the_management_broker_add_relabel_and_delete_agents() -> None:
    core = core_with_agents((1, 0))
    reg = full_registry()

    def agent_obj(ab: int, label: str, deleted: int = 0, opcode: str = "c") -> bytes:
        return wire.encode(ObjectRecord(opcode, 0, BROKER_AGENT_SCHEMA, 1, 1, deleted,
                                        oid(ab, 0), (label, 1, ab), ()), reg)

    key = "console.obj.1.0.org.apache.qpid.broker.agent"
    events = core.receive(agent_obj(6, "agent-6"), key, 1.0)
    assert events[0] == AgentArrived((1, 6), "agent-6") and type(events[1]) is ObjectUpdate
    events = core.receive(agent_obj(6, "renamed"), key, 2.0)
    assert events[0] == AgentRelabeled((1, 6), "renamed")
    out = core.send_query(A6, {"_class": "queue"})
    events = core.receive(agent_obj(6, "renamed", deleted=5), key, 3.0)
    assert [type(e) for e in events] == [RequestFailed, AgentLeft, ObjectUpdate]
    assert events[0].request == out.seq
    assert "deleted by the management broker" in str(events[0].error)
    assert core.departed_why(A6) == "deleted by the management broker"
    # the answer to the agent list query goes the same way
    records = wire.decode(agent_obj(7, "agent-7", opcode="g"), reg, lazy=True)
    assert core.agent_objects(records, 4.0) == [AgentArrived((1, 7), "agent-7")]


def test_departed_agents_are_remembered_up_to_a_bound() -> None:
    core = core_with_agents(max_departed=3)
    for ab in range(1, 6):
        core.see_agent(1, ab, 0.0)
    core.has_management = False
    core.age(1e6)
    assert list(core.departed) == [(1, 3), (1, 4), (1, 5)]  # the oldest forgotten


# ----------------------------------------------------------------------------- methods


def test_a_method_reply_is_decoded_with_its_target_and_the_target_released() -> None:
    core = core_with_agents(A5)
    echo = QUEUE.methods[0]
    out = core.send_method(A5, "agent.1.5", QUEUE, echo, oid(1).raw, {"seq": 4})
    assert out.key == "agent.1.5" and core.method_targets == {out.seq: (QUEUE, echo)}
    (request,) = wire.decode(out.body, full_registry())
    assert isinstance(request, MethodRequest) and request.seq == out.seq
    reply = MethodResponse(out.seq, 0, "OK", {"seq": 4, "total": 8})
    (event,) = core.receive(body(reply, methods={out.seq: (QUEUE, echo)}), "r", 1.0)
    assert type(event) is Reply and event.request == out.seq
    assert event.message.arguments == {"seq": 4, "total": 8}
    assert core.method_targets == {} and len(core) == 0


def test_a_cancelled_method_call_releases_its_target() -> None:
    core = core_with_agents(A5)
    out = core.send_method(A5, "agent.1.5", QUEUE, QUEUE.methods[0], oid(1).raw, {"seq": 1})
    assert core.cancel(out.seq)
    assert core.method_targets == {} and len(core) == 0


def test_method_calls_to_an_agent_that_leaves_fail() -> None:
    core = core_with_agents(A5, A6)
    to5 = core.send_method(A5, "agent.1.5", QUEUE, QUEUE.methods[0], oid(1).raw, {"seq": 1})
    to6 = core.send_method(A6, "agent.1.6", QUEUE, QUEUE.methods[0], oid(1).raw, {"seq": 1})
    core.agents[A5].last_seen = -100.0
    events = core.age(0.0)
    assert [(type(e), getattr(e, "request", None)) for e in events] == [
        (RequestFailed, to5.seq), (AgentLeft, None)]
    assert to6.seq in core.correlator


# ----------------------------------------------------------------------------- unsolicited


def test_unsolicited_content_events_and_indications() -> None:
    core = ConsoleProtocol(full_registry())
    events = core.receive(body(record(0, 1, "i")), "console.obj.1.5.test.pkg.queue", 1.0)
    assert events[0] == AgentArrived((1, 5), "")
    assert type(events[1]) is ObjectUpdate and events[1].agent == A5
    ev = EventIndication(0, DECLARE, 5, 3, {"qName": "q1"})
    events = core.receive(body(ev), "console.event.1.6.test.pkg.queueDeclare", 1.0)
    assert events[0] == AgentArrived((1, 6), "")
    assert type(events[1]) is EventReceived and events[1].agent == A6
    assert events[1].message.arguments == {"qName": "q1"}
    events = core.receive(body(ClassIndication(0, ClassKind.OBJECT, QUEUE.class_key)),
                          "schema.class", 1.0)
    assert events == [PackageSeen("test.pkg"), ClassSeen(1, QUEUE.class_key)]
    # a g nobody waits for is dropped; an update without a routing key names its agent by id
    assert core.receive(body(record(77, 1)), "r", 1.0) == []
    events = core.receive(body(record(0, 2, "c")), "r", 1.0)
    assert [type(e) for e in events] == [ObjectUpdate] and events[0].agent == A5


def test_a_malformed_body_is_reported_not_raised() -> None:
    core = ConsoleProtocol(full_registry())
    (event,) = core.receive(b"AM2zjunk", "console.obj.1.5.x", 1.0)
    assert type(event) is BodyMalformed and event.routing_key == "console.obj.1.5.x"
    assert isinstance(event.error, QmfError)


# ----------------------------------------------------------------------------- connection


def test_connection_loss_fails_every_request_and_every_agent_leaves() -> None:
    reg = SchemaRegistry()
    reg.add(QUEUE)
    core = ConsoleProtocol(reg, start_seq=1)
    core.see_agent(1, 5, 0.0)
    core.see_agent(1, 6, 0.0)
    query = core.send_query(A5, {"_class": "queue"})
    call = core.send_method(A6, "agent.1.6", QUEUE, QUEUE.methods[0], oid(1).raw, {"seq": 1})
    # an event of an unknown class waits for its schema
    held = wire.encode(EventIndication(0, DECLARE, 5, 3, {"qName": "q1"}), full_registry())
    assert type(core.receive(held, "console.event.1.6.test.pkg.queueDeclare", 0.0)[0]) \
        is SchemaNeeded
    lost = ConnectionLostError("gone")
    events = core.connection_lost(lost)
    failed = only(events, RequestFailed)
    assert {e.request for e in failed} == {query.seq, call.seq}
    assert all(e.error is lost for e in failed)
    assert only(events, HeldDropped) == [HeldDropped(None, 1, "connection lost")]
    assert only(events, AgentLeft) == [AgentLeft((1, 5), "connection lost"),
                                       AgentLeft((1, 6), "connection lost")]
    assert len(core) == 0 and core.method_targets == {} and core.agents == {}
    assert core.departed == {}  # a lost connection is not an agent leaving the bus
    # replies that still come are nobody's
    assert core.receive(body(CommandComplete(query.seq)), "r", 1.0) == []


def test_the_protocol_package_imports_neither_asyncio_nor_a_client_library() -> None:
    root = pathlib.Path(__file__).resolve().parent.parent / "qmf_async" / "protocol"
    for path in sorted(root.glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                mods = [node.module or ""] if node.level == 0 else []
            else:
                continue
            for mod in mods:
                assert mod.split(".")[0] not in {"asyncio", "aiormq", "pamqp"}, (path, mod)

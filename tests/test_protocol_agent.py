"""The agent's sans-I/O protocol core: bodies in, events out; the bodies it builds
are compared with what the codec writes for the same messages.  No event loop."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import pytest

from qmf_async import wire
from qmf_async.agent import Arg, Property, Statistic, event_class, method, object_class
from qmf_async.errors import DecodeError, EncodeError, UsageError
from qmf_async.protocol import (
    DIRECT,
    MANAGEMENT,
    AgentProtocol,
    AttachAnswered,
    BodyMalformed,
    ClassesRequested,
    ConsoleJoined,
    GetRequested,
    GetSelection,
    MethodRequested,
    Outgoing,
    PackagesRequested,
    RequestDropped,
    SchemaRequested,
    reply_target,
    validate_arguments,
)
from qmf_async.wire import ClassKey, ObjectId

PKG = "org.qmfasync.core"
THING = object_class(
    PKG, "thing",
    properties=[Property("name", "sstr", index=True)],
    statistics=[Statistic("hits", "uint64")],
    methods=[method("add", Arg("a", "uint32", direction="I", max=100),
                    Arg("b", "uint32", direction="I"), Arg("sum", "uint64", direction="O")),
             method("say", Arg("text", "sstr", direction="I", maxlen=4))],
)
OTHER = object_class("org.qmfasync.other", "box", properties=[Property("name", "sstr")])
ALARM = event_class(PKG, "alarm", arguments=[Arg("text", "sstr")])
OID = ObjectId.make(sequence=1, broker_bank=3, agent_bank=44, object=7)


def core(**options: int) -> AgentProtocol:
    return AgentProtocol(wire.SchemaRegistry([THING, OTHER, ALARM]), broker_bank=3,
                         agent_bank=44, **options)


def decoded(sends: Sequence[Outgoing]) -> list[list[wire.Message]]:
    registry = wire.SchemaRegistry([THING, OTHER, ALARM])
    return [list(wire.decode(s.body, registry)) for s in sends]


def test_every_request_kind_becomes_its_event() -> None:
    c = core()
    body = wire.encode([
        wire.GetQuery(1, {"_class": "thing"}),
        wire.MethodRequest(2, OID, THING.class_key, "add", {"a": 1, "b": 2}),
        wire.SchemaRequest(3, THING.class_key),
        wire.PackageQuery(4),
        wire.ClassQuery(5, PKG),
        wire.ConsoleAdded(),
        wire.CommandComplete(6),
        wire.Heartbeat(7),
    ], c.registry, methods={2: THING.method("add")})
    events = c.receive(body, "agent.3.44", "amq.direct/me")
    assert events == [
        GetRequested(1, "amq.direct/me", {"_class": "thing"}, GetSelection(class_name="thing")),
        MethodRequested(2, "amq.direct/me", OID, THING.class_key, "add", {"a": 1, "b": 2}),
        SchemaRequested(3, "amq.direct/me", THING.class_key),
        PackagesRequested(4, "amq.direct/me"),
        ClassesRequested(5, "amq.direct/me", PKG),
        ConsoleJoined(),
    ]
    assert c.messages_in == 8


def test_attach_answer_needs_no_reply_key_and_renames_the_agent() -> None:
    c = core()
    body = wire.encode(wire.AttachResponse(9, 5, 1234))
    (event,) = c.receive(body, "", None)
    assert event == AttachAnswered(9, 5, 1234)
    assert not c.attached
    assert c.attached_as(event) is True
    assert (c.broker_bank, c.agent_bank, c.attached) == (5, 1234, True)
    assert c.agent_key == "agent.5.1234"
    assert c.attached_as(AttachAnswered(10, 5, 1234)) is False


def test_attach_request_asks_for_the_banks_it_had_once_attached() -> None:
    c = core()
    sid = uuid.UUID(int=5)
    first = c.attach_request(1, "lbl", sid, "my-queue")
    assert (first.exchange, first.key, first.reply_to) == (MANAGEMENT, "broker", "my-queue")
    assert first.body == wire.encode(wire.AttachRequest(1, "lbl", sid, 0, 0))
    c.attached_as(AttachAnswered(1, 6, 77))
    again = c.attach_request(2, "lbl", sid, "my-queue")
    assert again.body == wire.encode(wire.AttachRequest(2, "lbl", sid, 6, 77))


def test_malformed_bodies_and_requests_without_reply_key_are_dropped() -> None:
    c = core()
    (bad,) = c.receive(b"AM2\x00garbage", "agent.3.44", "r")
    assert isinstance(bad, BodyMalformed) and isinstance(bad.error, DecodeError)
    assert bad.routing_key == "agent.3.44"
    (dropped,) = c.receive(wire.encode(wire.PackageQuery(1)), "agent.3.44", None)
    assert dropped == RequestDropped("P", "request without reply-to")
    (odd,) = c.receive(wire.encode(wire.PackageIndication(1, PKG)), "agent.3.44", "r")
    assert odd == RequestDropped("p", "unexpected message")


def test_empty_get_gets_no_event_and_a_bad_query_an_error() -> None:
    c = core()
    assert c.receive(wire.encode(wire.GetQuery(1, {})), "k", "r") == []
    (event,) = c.receive(wire.encode(wire.GetQuery(2, {"_objectid": "not-an-id"})), "k", "r")
    assert isinstance(event, GetRequested) and event.selection is None
    assert event.error is not None and event.error.startswith("invalid query: ")
    (z,) = decoded([c.complete(2, "r", 4, event.error)])
    assert z == [wire.CommandComplete(2, 4, event.error)]


def test_get_selection_parses_ids_keys_and_hashes() -> None:
    assert GetSelection.parse({"_objectid": OID}).object_id == OID
    assert GetSelection.parse({"_objectid": OID.raw}).object_id == OID
    assert GetSelection.parse({"_objectid": str(OID)}).object_id == OID
    key = THING.class_key
    sel = GetSelection.parse({"_key": str(key)})
    assert (sel.class_name, sel.package, sel.hash) == (key.name, key.package, key.hash)
    assert sel.matches(key) and not sel.matches(OTHER.class_key)
    sel = GetSelection.parse({"_class": b"thing", "_package": b"org.nope",
                              "_hash": key.hash.hex()})
    assert sel == GetSelection(None, "thing", "org.nope", key.hash)
    assert not sel.matches(key)
    assert GetSelection.parse({"_package": PKG}).matches(key)


def test_get_answer_is_split_into_bodies_then_z() -> None:
    c = core(max_get_per_body=3)
    calls: list[tuple[list[int], int, int]] = []

    def encode(chunk: Sequence[int], seq: int, ts: int) -> bytes | None:
        calls.append((list(chunk), seq, ts))
        return None if chunk[0] == 3 else bytes(chunk)  # the second body does not encode

    sends = list(c.answer_get(8, "amq.direct/me", 99, list(range(8)), encode))
    assert calls == [([0, 1, 2], 8, 99), ([3, 4, 5], 8, 99), ([6, 7], 8, 99)]
    assert [s.body for s in sends[:-1]] == [bytes([0, 1, 2]), bytes([6, 7])]
    assert sends[-1].body == wire.encode(wire.CommandComplete(8))
    assert {(s.exchange, s.key) for s in sends} == {("amq.direct", "me")}
    assert [s.body for s in c.answer_get(9, "q", 1, [], encode)] == [
        wire.encode(wire.CommandComplete(9))]


def test_packages_classes_and_schema_answers() -> None:
    c = core(max_per_body=1)
    p = c.answer_packages(4, "r")
    assert decoded(p) == [[wire.PackageIndication(4, PKG)],
                          [wire.PackageIndication(4, "org.qmfasync.other")],
                          [wire.CommandComplete(4)]]
    assert all((s.exchange, s.key) == (DIRECT, "r") for s in p)
    c.max_per_body = 22
    q = c.answer_classes(5, "ex/key", PKG)
    assert [s.key for s in q] == ["key", "key"] and q[0].exchange == "ex"
    assert decoded(q) == [[wire.ClassIndication(5, THING.kind, THING.class_key),
                           wire.ClassIndication(5, ALARM.kind, ALARM.class_key)],
                          [wire.CommandComplete(5)]]
    assert decoded(c.answer_classes(6, "r", "org.nope")) == [[wire.CommandComplete(6)]]
    (s,) = c.answer_schema(7, "r", THING.class_key)
    assert s.body == wire.encode(wire.SchemaResponse(7, THING))
    missing = ClassKey(PKG, "nope", b"\x00" * 16)
    (z,) = c.answer_schema(8, "r", missing)
    assert z.body == wire.encode(wire.CommandComplete(8, 1, "Schema not found"))


def test_method_statuses_for_unknown_targets_and_arguments() -> None:
    c = core()
    assert c.unknown_object(ClassKey("org.nope", "thing", THING.class_key.hash)) == (
        8, "UnknownPackage: org.nope")
    assert c.unknown_object(ClassKey(PKG, "nope", THING.class_key.hash)) == (
        9, f"UnknownClass: {PKG}:nope")
    assert c.unknown_object(THING.class_key) == (1, "UnknownObject")
    err = c.method_error(3, "amq.direct/me", 2, "UnknownMethod")
    assert (err.exchange, err.key) == ("amq.direct", "me")
    assert err.body == wire.encode(wire.MethodResponse(3, 2, "UnknownMethod"))
    add, say = THING.method("add"), THING.method("say")
    assert add is not None and say is not None
    assert validate_arguments(add, {"a": 100, "b": 5}) is None
    assert validate_arguments(add, {"a": 101}) == "argument 'a'=101 is above its maximum 100"
    assert validate_arguments(say, {"text": "hello"}) == "argument 'text' is longer than 4 bytes"


def test_publication_heartbeat_event_and_broadcast_routing_keys() -> None:
    c = core(max_per_body=2)
    sends = c.publication({THING.class_key: [1, 2, 3], OTHER.class_key: [4]}, 55,
                          lambda chunk, seq, ts: bytes([seq, *chunk]))
    assert [(s.key, s.body) for s in sends[:-1]] == [
        (f"console.obj.3.44.{PKG}.thing", bytes([0, 1, 2])),
        (f"console.obj.3.44.{PKG}.thing", bytes([0, 3])),
        ("console.obj.3.44.org.qmfasync.other.box", bytes([0, 4])),
    ]
    assert sends[-1] == Outgoing(MANAGEMENT, "console.heartbeat.3.44",
                                 wire.encode(wire.Heartbeat(55)))
    assert all(s.exchange == MANAGEMENT for s in sends)
    ev = c.event(ALARM, 77, 3, {"text": "hot"})
    assert ev.key == f"console.event.3.44.{PKG}.alarm"
    assert ev.body == wire.encode(wire.EventIndication(0, ALARM, 77, 3, {"text": "hot"}),
                                  c.registry)
    with pytest.raises(EncodeError):
        c.event(ALARM, 77, 3, {"nope": 1})
    b = c.broadcast_all()
    keys = [(s.key, m) for s, ms in zip(b, decoded(b), strict=True) for m in ms]
    assert keys == [
        ("schema.package", wire.PackageIndication(0, PKG)),
        ("schema.class", wire.ClassIndication(0, THING.kind, THING.class_key)),
        ("schema.package", wire.PackageIndication(0, "org.qmfasync.other")),
        ("schema.class", wire.ClassIndication(0, OTHER.kind, OTHER.class_key)),
        ("schema.class", wire.ClassIndication(0, ALARM.kind, ALARM.class_key)),
    ]


def test_reply_target_and_bad_banks() -> None:
    assert reply_target("k") == (DIRECT, "k")
    assert reply_target("ex/k/x") == ("ex", "k/x")
    with pytest.raises(UsageError):
        AgentProtocol(wire.SchemaRegistry(), agent_bank=1 << 28)
    with pytest.raises(UsageError):
        AgentProtocol(wire.SchemaRegistry(), broker_bank=1 << 20)
    with pytest.raises(UsageError):
        AgentProtocol(wire.SchemaRegistry(), max_get_per_body=0)

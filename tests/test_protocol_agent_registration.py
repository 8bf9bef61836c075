"""The agent core's side of registering classes with a management broker (qpidd):
announcements carrying the agent's reply key, and the broker's ``S`` without one
answered to ``broker``.  No event loop, no broker."""

from __future__ import annotations

from qmf_async import wire
from qmf_async.agent import Arg, Property, event_class, object_class
from qmf_async.protocol import (
    MANAGEMENT,
    AgentProtocol,
    Outgoing,
    RequestDropped,
    SchemaRequested,
)

PKG = "org.qmfasync.registration"
THING = object_class(PKG, "thing", properties=[Property("name", "sstr", index=True)])
ALARM = event_class(PKG, "alarm", arguments=[Arg("text", "sstr")])


def core() -> AgentProtocol:
    return AgentProtocol(wire.SchemaRegistry([THING, ALARM]), broker_bank=1, agent_bank=10)


def test_announcements_carry_the_reply_key_when_given() -> None:
    c = core()
    plain = c.broadcast_all()
    assert {s.reply_to for s in plain} == {None}
    keyed = c.broadcast_all("amq.direct/agent-q")
    assert [(s.exchange, s.key, s.body) for s in keyed] == \
        [(s.exchange, s.key, s.body) for s in plain]
    assert [s.key for s in keyed] == ["schema.package", "schema.class", "schema.class"]
    assert {s.reply_to for s in keyed} == {"amq.direct/agent-q"}
    (q,) = c.schema_broadcast(ALARM, announce_package=False, reply_to="k")
    assert q == Outgoing(MANAGEMENT, "schema.class",
                     wire.encode(wire.ClassIndication(0, ALARM.kind, ALARM.class_key)), "k")


def test_a_schema_request_without_reply_key_is_the_brokers_and_answered_to_broker() -> None:
    c = core()
    (event,) = c.receive(wire.encode(wire.SchemaRequest(7, THING.class_key)), "agent-q", None)
    assert event == SchemaRequested(7, "", THING.class_key, from_broker=True)
    (answer,) = c.schema_to_broker(7, THING.class_key, "agent-q")
    assert (answer.exchange, answer.key, answer.reply_to) == \
        (MANAGEMENT, "broker", "agent-q")
    assert answer.body == wire.encode(wire.SchemaResponse(7, THING))
    # with a reply key it is a console's, answered there as before
    (event,) = c.receive(wire.encode(wire.SchemaRequest(8, THING.class_key)), "k", "r")
    assert event == SchemaRequested(8, "r", THING.class_key)
    assert not event.from_broker


def test_the_broker_asking_for_an_unknown_class_gets_nothing() -> None:
    c = core()
    other = wire.ClassKey(PKG, "nothing", bytes(16))
    (event,) = c.receive(wire.encode(wire.SchemaRequest(3, other)), "agent-q", None)
    assert isinstance(event, SchemaRequested) and event.from_broker
    assert c.schema_to_broker(3, other, "agent-q") == []


def test_other_requests_without_reply_key_are_still_dropped() -> None:
    c = core()
    (dropped,) = c.receive(wire.encode(wire.ClassQuery(1, PKG)), "agent-q", None)
    assert dropped == RequestDropped("Q", "request without reply-to")

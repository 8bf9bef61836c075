"""The management-broker role as a pure core (protocol/_role.py): the agent directory
(banks, attach, adoption by heartbeat, aging and the bank's grace, with the time passed
in) and the answers to what comes to ``broker``.  test_broker_role.py checks the role
itself on RabbitMQ."""

from __future__ import annotations

import uuid

from qmf_async import wire
from qmf_async.protocol import (
    MAX_BANK,
    AgentAttached,
    AttachRefused,
    ClassAnnounced,
    ConsoleArrived,
    Outgoing,
    RequestDropped,
    RoleDirectory,
    RoleProtocol,
    SchemaForward,
)
from tests.fake_transport import object_schema

A, B = uuid.UUID(int=1), uuid.UUID(int=2)


def directory(**kw: int | float) -> RoleDirectory:
    settings = {"first_agent_bank": 10, "max_agents": 100, "agent_timeout": 3.0,
                "bank_grace": 6.0, **kw}
    return RoleDirectory(1, **settings)  # type: ignore[arg-type]


def test_an_agent_keeps_the_bank_it_asks_for_unless_another_holds_it() -> None:
    d = directory()
    got = d.attach(1, 42, "app", A, "reply-a", 0.0)
    assert got is not None and got[1] and got[0].agent_bank == 42
    again = d.attach(0, 42, "app", A, "reply-a2", 1.0)  # the same agent, re-attaching
    assert again is not None and again == (got[0], False) and got[0].reply_to == "reply-a2"
    other = d.attach(1, 42, "other", B, "reply-b", 1.0)  # taken: the next free bank
    assert other is not None and other[0].agent_bank == 10
    assert d.attach(7, 50, "x", B, "r", 1.0)[0].agent_bank == 11  # type: ignore[index]
    assert d.attach(1, 5, "y", B, "r", 1.0)[0].agent_bank == 12  # type: ignore[index]
    assert sorted(d.peers) == [10, 11, 12, 42]


def test_heartbeats_adopt_unknown_agents_who_give_their_bank_to_one_that_attaches() -> None:
    d = directory()
    assert d.heartbeat_bank("console.heartbeat.1.20") == 20
    for key in ("console.heartbeat.2.20", "console.heartbeat.1.0", "console.heartbeat.1.x",
                "console.heartbeat.1.20.9", f"console.heartbeat.1.{MAX_BANK + 1}"):
        assert d.heartbeat_bank(key) is None, key
    peer, what = d.heartbeat(20, 0.0)
    assert peer is not None and what == "adopted" and peer.adopted and peer.label == ""
    assert d.heartbeat(20, 1.0) == (peer, "")
    attached = d.attach(1, 20, "app", A, "reply", 2.0)
    assert attached == (peer, False) and not peer.adopted and peer.label == "app"


def test_silent_agents_age_out_and_their_banks_are_freed_after_the_grace() -> None:
    d = directory()
    a = d.attach(1, 30, "a", A, "ra", 0.0)[0]  # type: ignore[index]
    b = d.attach(1, 31, "b", B, "rb", 0.0)[0]  # type: ignore[index]
    d.heartbeat(31, 2.0)
    assert d.age(3.5) == ([a], [])  # a silent for 3.5 s > 3 s
    assert not a.live and d.live() == [b]
    # its bank stays reserved: another agent asking for it gets another one
    other = d.attach(1, 30, "c", uuid.UUID(int=3), "rc", 4.0)
    assert other is not None and other[0].agent_bank == 10
    # a heartbeat brings it back
    assert d.heartbeat(30, 5.0) == (a, "back") and a.live
    d.age(8.6)  # a: 3.6 s silent; b: 6.6 s
    assert not a.live and not b.live
    aged, freed = d.age(14.7)  # 6 s of grace after 8.6 (c, silent since 4.0, too)
    assert aged == [] and sorted(freed) == [10, 30, 31] and d.peers == {}


def test_a_full_directory_refuses_attach_and_adoption() -> None:
    d = directory(max_agents=2)
    assert d.attach(1, 10, "a", A, "r", 0.0) is not None
    assert d.heartbeat(11, 0.0)[1] == "adopted"
    # full, whatever bank a new agent asks for (a free one included)
    assert d.attach(1, 12, "c", uuid.UUID(int=3), "r", 0.0) is None
    assert d.attach(1, 0, "c", uuid.UUID(int=3), "r", 0.0) is None
    assert d.heartbeat(13, 0.0) == (None, "full")
    assert d.attach(1, 10, "a", A, "r2", 1.0) is not None  # known agents still re-attach
    assert d.attach(1, 11, "b", B, "r3", 1.0) is not None  # and adopted ones attach


def test_reconnected_restarts_the_clocks_of_live_agents() -> None:
    d = directory()
    a = d.attach(1, 10, "a", A, "r", 0.0)[0]  # type: ignore[index]
    assert d.reconnected(50.0) == [a] and a.last_seen == 50.0
    assert d.age(52.0) == ([], [])


# ---------------------------------------------------------------------- the answers

ROLE_ID = uuid.UUID(int=99)
OWN = object_schema("org.apache.qpid.broker", "agent")
THING = object_schema("org.example", "thing")


def role(**kw: int | float) -> RoleProtocol:
    return RoleProtocol(ROLE_ID, directory(**kw), wire.SchemaRegistry([OWN]), per_body=2)


def answers(items: list[object]) -> list[tuple[str, str, list[str]]]:
    """(exchange, key, opcodes) of each Outgoing in ``items``."""
    registry = wire.SchemaRegistry([OWN, THING])
    return [(o.exchange, o.key, [m.OPCODE for m in wire.decode(o.body, registry)])
            for o in items if isinstance(o, Outgoing) and isinstance(o.body, bytes)]


def test_b_from_a_console_is_answered_and_every_live_agent_asked_to_republish() -> None:
    r = role()
    r.directory.attach(1, 20, "app", A, "reply-a", 0.0)
    r.directory.heartbeat(21, 0.0)
    out = r.request(wire.BrokerRequest(0), "console-q", 1.0, own_reply="role-q")
    assert answers(out) == [("amq.direct", "console-q", ["b"]),
                            ("qpid.management", "agent.1.20", ["x"]),
                            ("qpid.management", "agent.1.21", ["x"])]
    assert out[-1] == ConsoleArrived()
    (b,) = wire.decode(out[0].body, wire.SchemaRegistry())  # type: ignore[union-attr]
    assert isinstance(b, wire.BrokerResponse) and b.broker_id == ROLE_ID
    # the role's own probe is answered only
    own = r.request(wire.BrokerRequest(5), "role-q", 1.0, own_reply="role-q")
    assert answers(own) == [("amq.direct", "role-q", ["b"])] and len(own) == 1


def test_p_and_q_are_packed_as_qpidd_packs_them() -> None:
    r = role()
    r.registry.add(THING)
    p = r.request(wire.PackageQuery(3), "amq.direct/c", 0.0)
    assert answers(p) == [("amq.direct", "c", ["p", "p"]), ("amq.direct", "c", ["z"])]
    q = r.request(wire.ClassQuery(4, "nowhere"), "c", 0.0)  # unknown package: z 0
    assert answers(q) == [("amq.direct", "c", ["z"])]
    assert r.request(wire.PackageIndication(0, "org.example"), "c", 0.0) == []


def test_s_is_answered_forwarded_to_a_holder_or_refused() -> None:
    r = role()
    known = r.request(wire.SchemaRequest(7, OWN.class_key), "c", 0.0)
    assert answers(known) == [("amq.direct", "c", ["s"])]
    peer, _ = r.directory.attach(1, 20, "app", A, "reply-a", 0.0)  # type: ignore[misc]
    peer.classes.add(THING.class_key)
    (forward,) = r.request(wire.SchemaRequest(8, THING.class_key), "c", 0.0)
    assert forward == SchemaForward(8, "c", THING.class_key, (peer,))
    other = object_schema("org.example", "other").class_key
    refused = r.request(wire.SchemaRequest(9, other), "c", 0.0)
    assert answers(refused) == [("amq.direct", "c", ["z"])]
    (z,) = wire.decode(refused[0].body, wire.SchemaRegistry())  # type: ignore[union-attr]
    assert isinstance(z, wire.CommandComplete) and (z.code, z.text) == (1, "Class key not found")
    elsewhere = object_schema("org.nowhere", "x").class_key
    (answer,) = r.request(wire.SchemaRequest(10, elsewhere), "c", 0.0)
    assert isinstance(answer, Outgoing) and isinstance(answer.body, bytes)
    (z,) = wire.decode(answer.body, wire.SchemaRegistry())
    assert isinstance(z, wire.CommandComplete) and z.text == "Package not found"


def test_attach_answers_banks_or_refuses_when_full() -> None:
    r = role(max_agents=1)
    out = r.request(wire.AttachRequest(2, "app", A, 0, 42), "reply-a", 0.0)
    assert answers(out) == [("amq.direct", "reply-a", ["a"])]
    (a,) = wire.decode(out[0].body, wire.SchemaRegistry())  # type: ignore[union-attr]
    assert isinstance(a, wire.AttachResponse) and (a.broker_bank, a.agent_bank) == (1, 42)
    assert out[1] == AgentAttached(r.directory.peers[42], True)
    refused = r.request(wire.AttachRequest(3, "late", B, 0, 0), "reply-b", 0.0)
    assert answers(refused) == [("amq.direct", "reply-b", ["z"])]
    assert refused[1] == AttachRefused("late")


def test_an_announced_class_is_fetched_and_a_request_without_reply_key_dropped() -> None:
    r = role()
    peer, _ = r.directory.attach(1, 20, "app", A, "reply-a", 0.0)  # type: ignore[misc]
    indication = wire.ClassIndication(0, THING.kind, THING.class_key)
    assert r.request(indication, "reply-a", 0.0) == [ClassAnnounced(THING.class_key, "reply-a")]
    assert THING.class_key in peer.classes
    own = wire.ClassIndication(0, OWN.kind, OWN.class_key)
    assert r.request(own, "reply-a", 0.0) == []  # known already
    assert r.request(wire.PackageQuery(1), None, 0.0) == [RequestDropped("P", "no reply key")]
    (dropped,) = r.request(wire.Heartbeat(1), "c", 0.0)
    assert isinstance(dropped, RequestDropped) and dropped.opcode == "h"

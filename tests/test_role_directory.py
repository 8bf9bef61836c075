"""The management-broker role's agent directory as a pure core (protocol/_role.py):
banks, attach, adoption by heartbeat, aging and the bank's grace, with the time passed
in.  test_broker_role.py checks the role itself on RabbitMQ."""

from __future__ import annotations

import uuid

from qmf_async.protocol import MAX_BANK, RoleDirectory

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

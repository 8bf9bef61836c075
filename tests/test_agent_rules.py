"""What the v1 and v2 cores share about agents (protocol/_agents.py): one directory with
one aging rule, and an agent seen over QMF v1 and v2 listed once (the twin rule), with
no connection.
test_session_v2_agents.py checks the twins on a live bus."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from qmf_async.protocol import (
    AGENT_VENDOR,
    AgentDirectory,
    AgentInfo,
    ConsoleProtocol,
    ConsoleProtocolV2,
    Twins,
    V2AgentInfo,
    agent_v2_name,
    is_twin,
    silence_allowed,
)
from qmf_async.wire import SchemaRegistry


def test_the_name_is_built_from_the_label_and_read_back() -> None:
    instance = str(uuid.UUID(int=7))
    name = agent_v2_name("billing:east", instance)
    assert name == f"qmf-async:billing_east:{instance}"
    assert is_twin("billing:east", name) and is_twin("billing_east", name)
    assert not is_twin("billing", name)
    assert not is_twin("", name) and not is_twin("billing:east", None)
    assert not is_twin("billing:east", f"acme:billing_east:{instance}")  # another vendor
    assert not is_twin("x", "qmf-async:x")  # no instance part
    assert AGENT_VENDOR == "qmf-async"


@given(st.text(min_size=1), st.text())
def test_every_label_is_the_twin_of_its_own_name(label: str, instance: str) -> None:
    assert is_twin(label, agent_v2_name(label, instance))


def test_a_v1_agent_arriving_after_its_v2_twin_is_hidden() -> None:
    twins = Twins()
    v2 = agent_v2_name("app", "i-1")
    assert twins.v1_arrived((2, 5), "app", ["apache.org:qpidd:x", v2])
    assert (2, 5) in twins
    assert not twins.v1_arrived((2, 6), "other", [v2])
    assert (2, 6) not in twins
    twins.forget((2, 5))  # the v1 agent left
    assert (2, 5) not in twins


def test_a_v2_agent_hides_the_twins_already_listed_and_gives_them_back() -> None:
    twins = Twins()
    v2 = agent_v2_name("app", "i-1")
    listed = {(2, 5): "app", (2, 6): "other", (2, 7): "app"}
    assert twins.v2_arrived(v2, listed) == [(2, 5), (2, 7)]
    assert twins.v2_arrived(v2, listed) == []  # hidden ones are not hidden twice
    # the v2 agent leaves: its twins still alive over v1 come back; the one that died
    # meanwhile is forgotten
    assert twins.v2_left(v2, {(2, 5): "app"}) == [(2, 5)]
    assert twins.hidden == set()


def test_a_v2_agent_leaving_gives_back_only_its_own_twins() -> None:
    twins = Twins()
    a, b = agent_v2_name("a", "1"), agent_v2_name("b", "1")
    twins.v2_arrived(a, {(2, 1): "a"})
    twins.v2_arrived(b, {(2, 2): "b"})
    assert twins.v2_left(a, {(2, 1): "a", (2, 2): "b"}) == [(2, 1)]
    assert twins.hidden == {(2, 2)}
    twins.clear()
    assert (2, 2) not in twins


def test_one_aging_rule_for_both_versions() -> None:
    assert silence_allowed(2.0, 3, 0.1) == 6.0
    assert silence_allowed(0.01, 3, 0.1) == 3 * 0.1  # the interval's floor
    assert silence_allowed(2.0, 3, 0.1, grace=5.0) == 11.0  # owing an answer


def test_the_directory_ages_by_the_one_rule_and_remembers_who_left() -> None:
    d: AgentDirectory[str, V2AgentInfo] = AgentDirectory(max_departed=2)
    for name, interval in (("a", 1.0), ("b", 5.0), ("c", 0.01)):
        d.add(name, V2AgentInfo(name, 0.0, interval))
    # 3 missed intervals, at least 0.5 s each: a after 3 s, b after 15 s, c after 1.5 s
    assert d.silent(1.4, 3, 0.5) == []
    assert d.silent(3.5, 3, 0.5) == [("a", 3.5), ("c", 3.5)]
    assert d.silent(3.5, 3, 0.5, grace=lambda k: 1.0 if k == "a" else 0.0) == [("c", 3.5)]
    assert d.silent(3.5, 3, 0.5, exempt=lambda k: k == "c") == [("a", 3.5)]
    for key, silent in d.silent(20.0, 3, 0.5):
        assert d.leave(key, f"silent {silent}") is not None
    assert len(d) == 0 and d.leave("a", "again") is None
    # the oldest departure is forgotten first; one back is not departed any more
    assert list(d.departed) == ["b", "c"] and d.departed_why("a") is None
    d.add("b", V2AgentInfo("b", 21.0, 1.0))
    assert d.departed_why("b") is None and d.departed_why("c") == "silent 20.0"
    assert d.clear() == ["b"] and d.departed_why("b") is None


def test_both_console_cores_keep_their_agents_in_the_one_directory() -> None:
    v1 = ConsoleProtocol(SchemaRegistry(), agent_interval=1.0, min_agent_interval=0.1,
                         missed_heartbeats=3)
    v2 = ConsoleProtocolV2(agent_interval=1.0, min_agent_interval=0.1, missed=3)
    assert isinstance(v1.directory, AgentDirectory) and isinstance(v2.directory,
                                                                  AgentDirectory)
    v1.see_agent(1, 5, 0.0)
    assert isinstance(v1.directory.agents[(1, 5)], AgentInfo)
    assert v1.agents is v1.directory.agents and v2.agents is v2.directory.agents
    assert [type(e).__name__ for e in v1.age(3.5)] == ["AgentLeft"]
    assert v1.departed_why((1, 5)) == "no heartbeat for 3.5s"

"""What the v1 and v2 cores share about agents (protocol/_agents.py): one aging rule,
and an agent seen over QMF v1 and v2 listed once (the twin rule), with no connection.
test_session_v2_agents.py checks the twins on a live bus."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from qmf_async.protocol import AGENT_VENDOR, Twins, agent_v2_name, is_twin, silence_allowed


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

"""The choice of the QMF version spoken to qpidd (``protocol.VersionChoice``), pure:
the early v1 event keys, qpidd's v1 events held, and the two outcomes (qpidd
publishes v2: dropped; it publishes v1 only: the connection turns and gets them)."""

from __future__ import annotations

from qmf_async.protocol import QPIDD_V1_EVENT, VersionChoice

KEYS = ["schema.#", "console.obj.#", "console.event.#", "console.event.1.0.org.#"]


def test_a_v2_heartbeat_of_qpidd_drops_what_was_held_and_holds_no_more() -> None:
    choice = VersionChoice()
    assert choice.start(True, KEYS) == ["console.event.#", "console.event.1.0.org.#"]
    choice.hold((1, 0), "e1")
    choice.hold((1, 5), "not qpidd's")
    assert list(choice.held) == ["e1"]
    assert not choice.drops(QPIDD_V1_EVENT + "org.apache.qpid.broker.queueDelete")
    choice.v2_beat_of((1, 5))  # another agent's: nothing known of qpidd yet
    assert list(choice.held) == ["e1"]
    choice.v2_beat_of((1, 0))
    assert not choice.held and not choice.early_keys
    choice.hold((1, 0), "e2")
    assert not choice.held
    # qpidd's v1 events still on the early bindings are dropped unread, others not
    assert choice.drops(QPIDD_V1_EVENT + "org.apache.qpid.broker.queueDelete")
    assert not choice.drops("console.event.1.5.com.acme.thing")
    assert not choice.v1_beat(True) and choice.v1_beats == 0  # no turning after v2
    assert choice.more_keys(["console.event.#.new"], []) == []


def test_two_v1_heartbeats_and_no_v2_one_turn_the_connection_once() -> None:
    choice = VersionChoice(max_held=2)
    choice.start(True, KEYS)
    for ev in ("e1", "e2", "e3"):
        choice.hold((1, 0), ev)
    assert not choice.v1_beat(False) and choice.v1_beats == 0  # it could not turn
    assert not choice.v1_beat(True)
    assert choice.v1_beat(True) and not choice.v1_beat(True)  # the second, once
    assert choice.turn() == ["e2", "e3"]  # the newest max_held, in order
    assert not choice.early_keys and not choice.held
    # a new connection starts over; not choosing: no early keys, nothing held
    assert choice.start(False, KEYS) == [] and choice.v1_beats == 0
    choice.hold((1, 0), "e4")
    assert not choice.held and not choice.turning


def test_the_users_new_event_keys_are_bound_early_while_choosing() -> None:
    choice = VersionChoice()
    choice.start(True, ["console.event.#"])
    assert choice.more_keys(["console.event.*.*.com.acme.#", "console.obj.#",
                             "console.event.#"], ["console.event.#"]) == [
        "console.event.*.*.com.acme.#"]
    assert choice.early_keys == ["console.event.#", "console.event.*.*.com.acme.#"]

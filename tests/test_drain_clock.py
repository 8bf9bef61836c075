"""``protocol.DrainClock``, pure: as of when a console has handled its input (the
moment its agents are aged as of), with and without drain probes."""

from __future__ import annotations

from qmf_async.protocol import DrainClock


def test_without_probes_a_backlog_holds_the_clock_back() -> None:
    clock = DrainClock(10.0)
    assert clock.as_of(11.0, probing=False, overdue=True, backlog=0) == (11.0, False)
    assert clock.as_of(12.0, probing=False, overdue=True, backlog=5) == (11.0, False)
    assert clock.as_of(13.0, probing=False, overdue=False, backlog=0) == (13.0, False)


def test_a_probe_ages_as_of_its_sending_once_back() -> None:
    clock = DrainClock(10.0, retry=5.0)
    assert clock.as_of(11.0, probing=True, overdue=False, backlog=9) == (11.0, False)
    assert clock.as_of(12.0, probing=True, overdue=True, backlog=9) == (11.0, True)
    body = DrainClock.probe(12.0)
    assert clock.as_of(13.0, probing=True, overdue=True, backlog=9) == (11.0, False)
    assert not clock.back(b"another message", 14.0)
    assert clock.back(body, 14.0) and clock.sent is None
    assert clock.as_of(14.5, probing=True, overdue=True, backlog=9) == (12.0, True)


def test_a_lost_probe_is_given_up_only_when_nothing_came_meanwhile() -> None:
    clock = DrainClock(0.0, retry=1.0)
    assert clock.as_of(1.0, probing=True, overdue=True, backlog=0) == (0.0, True)
    clock.received += 1  # something arrived after the probe left: sent again
    assert clock.as_of(2.5, probing=True, overdue=True, backlog=0) == (0.0, True)
    # nothing since: lost, the input is idle, the agents are aged as of now
    assert clock.as_of(4.0, probing=True, overdue=True, backlog=0) == (4.0, False)
    clock.probe_failed(5.0)
    assert clock.sent is None and clock.drained_at == 5.0
    clock.start(6.0)
    assert clock.as_of(6.0, probing=True, overdue=True, backlog=0) == (6.0, True)

"""Correlation: the core's sans-I/O pending table (``protocol.Correlator``: plain
entries, events out, no loop) and the console's futures and shared-timeout timers
(``console._waits.Waits``), without a broker."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from qmf_async.console._waits import Expired, Waits
from qmf_async.errors import AgentGoneError, ConnectionLostError, UsageError
from qmf_async.protocol import Correlator, QueryDone, Reply, RequestFailed
from qmf_async.wire import CommandComplete, PackageIndication

from ._util import wait_until

# ----------------------------------------------------------------------------- the core's table


def test_register_and_discard_release_numbers() -> None:
    corr = Correlator(start=1)
    a = corr.register(query=False)
    b = corr.register(query=True, agent=(1, 5))
    assert (a.seq, b.seq) == (1, 2) and len(corr) == 2 and a.seq in corr
    with pytest.raises(UsageError):
        corr.register(query=False, seq=2)  # in use
    assert corr.discard(a.seq, a) and not corr.discard(a.seq, a)
    reused = corr.register(query=False, seq=1)
    assert not corr.discard(1, a)  # an old entry does not drop the one reusing its number
    assert corr.get(1) is reused and len(corr) == 2


def test_resolve_completes_a_request_with_its_first_expected_reply() -> None:
    corr = Correlator(start=1)
    entry = corr.register(query=False, expect="s")
    events: list[Any] = []
    assert not corr.resolve(PackageIndication(entry.seq, "x"), events)  # not an s
    assert not corr.resolve(CommandComplete(99), events)  # nobody waits for 99
    assert corr.resolve(CommandComplete(entry.seq), events)  # a z always answers
    assert events == [Reply(entry.seq, CommandComplete(entry.seq))]
    assert len(corr) == 0


def test_a_query_collects_until_z_or_streams_to_its_sink() -> None:
    corr = Correlator(start=1)
    kept = corr.register(query=True)
    got: list[Any] = []
    streamed = corr.register(query=True, sink=got.append)
    events: list[Any] = []
    for entry in (kept, streamed):
        assert corr.resolve(PackageIndication(entry.seq, "a"), events)
        assert corr.resolve(PackageIndication(entry.seq, "b"), events)
    assert events == [] and got == [PackageIndication(streamed.seq, "a"),
                                     PackageIndication(streamed.seq, "b")]
    assert corr.resolve(CommandComplete(kept.seq, 4, "bad"), events)
    assert corr.resolve(CommandComplete(streamed.seq), events)
    assert events == [
        QueryDone(kept.seq, [PackageIndication(kept.seq, "a"), PackageIndication(kept.seq, "b")],
                  4, "bad"),
        QueryDone(streamed.seq, [])]
    assert len(corr) == 0


def test_item_sink_is_the_stream_of_an_open_query_only() -> None:
    corr = Correlator(start=1)
    got: list[object] = []
    sink = got.append  # one bound method object, compared by identity
    query = corr.register(query=True, sink=sink)
    kept = corr.register(query=True)  # no sink: records are kept, resolve() does it
    call = corr.register(query=False)
    assert corr.item_sink(query.seq, arrival=5) is sink
    assert corr.item_sink(kept.seq, arrival=5) is None
    assert corr.item_sink(call.seq, arrival=5) is None
    assert corr.item_sink(999, arrival=5) is None
    # a z that waits for held bodies: records received before it still stream
    events: list[Any] = []
    assert corr.hold(query.seq) and not corr.hold(call.seq)
    assert corr.resolve(CommandComplete(query.seq), events, arrival=7)
    assert events == [] and corr.item_sink(query.seq, arrival=6) is sink
    assert corr.item_sink(query.seq, arrival=8) is None  # after the z: a duplicate
    corr.unhold(query.seq, events)
    assert events == [QueryDone(query.seq, [])]
    assert corr.item_sink(query.seq, arrival=6) is None  # finished


def test_fail_all_and_fail_agent_emit_one_failure_per_request() -> None:
    corr = Correlator(start=1)
    to_a1 = corr.register(query=False, agent="a1")
    to_a2 = corr.register(query=True, agent="a2")
    events: list[Any] = []
    gone = AgentGoneError("agent left")
    assert corr.fail_agent("a1", gone, events) == 1
    assert events == [RequestFailed(to_a1.seq, gone)] and to_a2.seq in corr
    lost = ConnectionLostError("gone")
    events.clear()
    corr.fail_all(lost, events)
    assert events == [RequestFailed(to_a2.seq, lost)] and len(corr) == 0
    assert not corr.fail(to_a2.seq, lost, events)  # already released


def test_deadlines_are_numbers_the_caller_compares() -> None:
    corr = Correlator(start=1)
    early = corr.register(query=False, deadline=10.0)
    corr.register(query=False, deadline=20.0)
    corr.register(query=False)  # no deadline
    assert corr.expired(9.9) == [] and corr.expired(10.0) == [early.seq]
    assert len(corr.expired(25.0)) == 2 and len(corr) == 3  # expiry releases nothing


# ----------------------------------------------------------------------------- the console's waits


async def test_each_wait_fails_at_its_own_deadline() -> None:
    waits = Waits()
    loop = asyncio.get_running_loop()
    done_at: dict[int, float] = {}
    started: dict[int, float] = {}
    entries = []
    for i in range(3):
        wait = waits.open(i + 1)
        wait.future.add_done_callback(lambda _f, i=i: done_at.setdefault(i, loop.time()))
        started[i] = loop.time()
        waits.expire_after(wait, 0.15)
        entries.append(wait)
        if i < 2:
            await asyncio.sleep(0.05)
    assert len(waits._lanes) == 1  # one timeout value: one lane
    for wait in entries:
        with pytest.raises(TimeoutError):
            await wait.future
    for i in range(3):  # never early (lower bounds only: the machine may be busy)
        assert done_at[i] - started[i] >= 0.149
    await wait_until(lambda: not waits._lanes)  # an idle lane is dropped
    for wait in entries:
        assert waits.close(wait)  # still registered: the core's entry must go too
    assert len(waits) == 0


async def test_same_timeout_waits_share_one_loop_timer() -> None:
    waits = Waits()
    loop = asyncio.get_running_loop()
    timers = len(loop._scheduled)  # type: ignore[attr-defined]
    entries = [waits.open(seq) for seq in range(1, 101)]
    for wait in entries:
        waits.expire_after(wait, 30.0)
    assert len(loop._scheduled) == timers + 1  # type: ignore[attr-defined]
    for wait in entries:
        waits.close(wait)
    assert all(w.future.cancelled() for w in entries)
    assert waits._lanes[30.0].waits == {}


async def test_finishing_a_wait_stops_its_timer() -> None:
    waits = Waits()
    wait = waits.open(1)
    waits.expire_after(wait, 0.05)
    assert waits.finish(1) is wait and waits.finish(1) is None
    wait.future.set_result("reply")
    assert wait.timer is None and waits._lanes[0.05].waits == {}
    await asyncio.sleep(0.1)  # the lane's timer fires with nothing to expire
    assert wait.future.result() == "reply"
    assert not waits.close(wait) and len(waits) == 0  # already finished


async def test_distinct_timeouts_each_get_a_lane_forgotten_when_idle() -> None:
    waits = Waits()
    entries = [waits.open(seq) for seq in range(1, 13)]
    for i, wait in enumerate(entries):
        waits.expire_after(wait, 0.05 + i / 1000)
    assert len(waits._lanes) == 12
    for wait in entries:
        with pytest.raises(Expired):
            await wait.future
    await wait_until(lambda: not waits._lanes)
    for wait in entries:
        waits.close(wait)
    assert len(waits) == 0


async def test_one_deadline_for_many_waits_is_one_timer() -> None:
    """A query to many agents arms every answer's wait with the caller's one deadline
    (``expire_at``): one loop timer, and every wait fails with ``Expired`` by then."""
    waits = Waits()
    loop = asyncio.get_running_loop()
    timers = len(loop._scheduled)  # type: ignore[attr-defined]
    deadline = loop.time() + 0.05
    entries = [waits.open(seq) for seq in range(1, 51)]
    for wait in entries:
        waits.expire_at(wait, deadline)
    assert len(loop._scheduled) == timers + 1  # type: ignore[attr-defined]
    await asyncio.gather(*(w.future for w in entries), return_exceptions=True)
    assert loop.time() >= deadline
    assert all(isinstance(w.future.exception(), Expired) for w in entries)
    for wait in entries:
        assert waits.close(wait)  # still registered: the core's entry must go too
    assert len(waits) == 0


async def test_the_request_primitive_cleans_up_on_every_exit() -> None:
    """``Waits.request``: registered, published, answered or timed out or cancelled or
    not sent, and every time the wait is gone and the core told (``cancel``) unless the
    answer came."""
    from qmf_async.errors import NotConnectedError, QmfTimeout
    from qmf_async.protocol import Outgoing

    cancelled: list[int] = []
    sent: list[Outgoing] = []
    fail = [False]

    async def publish(out: Outgoing) -> None:
        if fail[0]:
            raise NotConnectedError("not connected")
        sent.append(out)

    waits = Waits(publish, cancelled.append)
    out = Outgoing("qpid.management", "agent.1.0", b"M")
    # answered
    asked = asyncio.ensure_future(waits.request(1, out, 5.0, lambda: QmfTimeout("late")))
    await wait_until(lambda: 1 in waits and sent)
    waits.finish(1).future.set_result("m")  # type: ignore[union-attr]
    assert await asked == "m" and cancelled == [] and len(waits) == 0
    # timed out
    with pytest.raises(QmfTimeout, match="late"):
        await waits.request(2, out, 0.02, lambda: QmfTimeout("late"))
    assert cancelled == [2] and len(waits) == 0 and not waits._lanes.get(0.02)
    # cancelled by its caller
    asked = asyncio.ensure_future(waits.request(3, out, 5.0, lambda: QmfTimeout("late")))
    await wait_until(lambda: 3 in waits)
    asked.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asked
    assert cancelled == [2, 3] and len(waits) == 0
    # lost: the error it failed with, nothing left to cancel in the core
    asked = asyncio.ensure_future(waits.request(4, out, 5.0, lambda: QmfTimeout("late")))
    await wait_until(lambda: 4 in waits)
    waits.fail_all(ConnectionLostError("gone"))
    with pytest.raises(ConnectionLostError):
        await asked
    assert cancelled == [2, 3] and len(waits) == 0
    # not sent
    fail[0] = True
    with pytest.raises(NotConnectedError):
        await waits.request(5, out, 5.0, lambda: QmfTimeout("late"))
    assert cancelled == [2, 3, 5] and len(waits) == 0


async def test_the_request_primitive_without_an_error_builder_raises_expired() -> None:
    """A caller that builds its own timeout error (the method-call path: no closure per
    call) gets :class:`Expired`; the wait is cleaned up all the same, and its deadline
    shares the lane of every other wait of that timeout."""
    from qmf_async.protocol import Outgoing

    cancelled: list[int] = []

    async def publish(out: Outgoing) -> None:
        pass

    waits = Waits(publish, cancelled.append)
    out = Outgoing("qpid.management", "agent.1.0", b"M")
    other = waits.open(9)
    waits.expire_after(other, 0.05)
    with pytest.raises(Expired):
        await waits.request(1, out, 0.05)
    assert cancelled == [1] and list(waits._waits) == [9]
    assert isinstance(other.future.exception(), Expired)  # the same lane served both
    assert waits.close(other) and not waits._lanes


async def test_fail_all_wins_over_a_pending_timeout() -> None:
    waits = Waits()
    wait = waits.open(1)
    waits.expire_after(wait, 0.05)
    lost = ConnectionLostError("gone")
    waits.fail_all(lost)
    assert wait.future.exception() is lost and wait.timer is None and len(waits) == 0
    await asyncio.sleep(0.1)
    assert wait.future.exception() is lost


async def test_expire_after_twice_keeps_one_timer() -> None:
    waits = Waits()
    wait = waits.open(1)
    waits.expire_after(wait, 30.0)
    waits.expire_after(wait, 0.05)
    assert waits._lanes[30.0].waits == {}
    with pytest.raises(Expired):
        await wait.future
    waits.close(wait)


async def test_a_wait_reopened_under_the_same_number_is_not_dropped_by_the_old_one() -> None:
    waits = Waits()
    old = waits.open(7)
    assert waits.finish(7) is old
    new = waits.open(7)
    assert not waits.close(old)  # the old wait's ``finally`` runs late
    assert waits.get(7) is new and not new.future.done()
    assert waits.close(new)

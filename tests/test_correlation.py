"""Correlator timeouts (``expire_after``) and entry release, without a broker."""

from __future__ import annotations

import asyncio

import pytest

from qmf_async import _correlation
from qmf_async.protocol._correlation import Correlator
from qmf_async.errors import ConnectionLostError
from qmf_async.wire._messages import CommandComplete

from ._util import wait_until


async def test_each_wait_fails_at_its_own_deadline() -> None:
    corr = Correlator(start=1)
    loop = asyncio.get_running_loop()
    done_at: dict[int, float] = {}
    started: dict[int, float] = {}
    entries = []
    for i in range(3):
        entry = corr.register(query=False, release_on_done=False)
        entry.future.add_done_callback(lambda _f, i=i: done_at.setdefault(i, loop.time()))
        started[i] = loop.time()
        corr.expire_after(entry, 0.15)
        entries.append(entry)
        if i < 2:
            await asyncio.sleep(0.05)
    assert len(corr._lanes) == 1  # one timeout value: one lane
    for entry in entries:
        with pytest.raises(TimeoutError):
            await entry.future
    for i in range(3):  # never early (lower bounds only: the machine may be busy)
        assert done_at[i] - started[i] >= 0.149
    await wait_until(lambda: not corr._lanes)  # an idle lane is dropped
    for entry in entries:
        corr.discard(entry)
    assert len(corr) == 0


async def test_same_timeout_waits_share_one_loop_timer() -> None:
    corr = Correlator(start=1)
    loop = asyncio.get_running_loop()
    timers = len(loop._scheduled)  # type: ignore[attr-defined]
    entries = [corr.register(query=False, release_on_done=False) for _ in range(100)]
    for entry in entries:
        corr.expire_after(entry, 30.0)
    assert len(loop._scheduled) == timers + 1  # type: ignore[attr-defined]
    for entry in entries:
        corr.discard(entry)
    assert all(e.future.cancelled() for e in entries)
    assert corr._lanes[30.0].waits == {}


async def test_a_reply_stops_the_timer() -> None:
    corr = Correlator(start=1)
    entry = corr.register(query=False, release_on_done=False)
    corr.expire_after(entry, 0.05)
    assert corr.resolve(CommandComplete(entry.seq))
    assert entry.future.result() == CommandComplete(entry.seq)
    assert entry.timer is None and corr._lanes[0.05].waits == {}
    await asyncio.sleep(0.1)  # the lane's timer fires with nothing to expire
    assert entry.future.result() == CommandComplete(entry.seq)
    assert len(corr) == 0


async def test_many_distinct_timeouts_fall_back_to_a_timer_each() -> None:
    corr = Correlator(start=1)
    entries = [corr.register(query=False, release_on_done=False)
               for _ in range(_correlation._MAX_LANES + 3)]
    for i, entry in enumerate(entries):
        corr.expire_after(entry, 0.05 + i / 1000)
    assert len(corr._lanes) == _correlation._MAX_LANES
    assert isinstance(entries[-1].timer, asyncio.TimerHandle)
    for entry in entries:
        with pytest.raises(TimeoutError):
            await entry.future
    corr.discard(entries[0])
    kept = corr.register(query=False, release_on_done=False)
    corr.expire_after(kept, 30.0)
    corr.discard(kept)  # cancels the lane wait; nothing left pending
    for entry in entries[1:]:
        corr.discard(entry)
    assert len(corr) == 0


async def test_fail_all_wins_over_a_pending_timeout() -> None:
    corr = Correlator(start=1)
    entry = corr.register(query=False, release_on_done=False)
    corr.expire_after(entry, 0.05)
    lost = ConnectionLostError("gone")
    corr.fail_all(lost)
    assert entry.future.exception() is lost and entry.timer is None
    await asyncio.sleep(0.1)
    assert entry.future.exception() is lost


async def test_fail_agent_stops_the_timer() -> None:
    corr = Correlator(start=1)
    entry = corr.register(query=False, agent="a1", release_on_done=False)
    other = corr.register(query=False, agent="a2", release_on_done=False)
    corr.expire_after(entry, 0.05)
    corr.expire_after(other, 0.05)
    assert corr.fail_agent("a1", ConnectionLostError("agent left")) == 1
    assert entry.timer is None
    with pytest.raises(TimeoutError):
        await other.future
    assert isinstance(entry.future.exception(), ConnectionLostError)


async def test_release_on_done() -> None:
    corr = Correlator(start=1)
    kept = corr.register(query=False, release_on_done=False)
    released = corr.register(query=False)
    kept.future.cancel()  # e.g. the awaiting task was cancelled
    released.future.cancel()
    await asyncio.sleep(0)
    assert kept.seq in corr and released.seq not in corr
    corr.discard(kept)  # callers that opt out discard in ``finally``
    assert len(corr) == 0


async def test_expire_after_twice_keeps_one_timer() -> None:
    corr = Correlator(start=1)
    entry = corr.register(query=False, release_on_done=False)
    corr.expire_after(entry, 30.0)
    corr.expire_after(entry, 0.05)
    assert corr._lanes[30.0].waits == {}
    with pytest.raises(TimeoutError):
        await entry.future
    corr.discard(entry)


async def test_item_sink_is_the_stream_of_an_open_query_only() -> None:
    corr = Correlator(start=1)
    got: list[object] = []
    sink = got.append  # one bound method object, compared by identity
    query = corr.register(query=True, on_item=sink)
    kept = corr.register(query=True)  # no on_item: records are kept, resolve() does it
    call = corr.register(query=False)
    assert corr.item_sink(query.seq, arrival=5) is sink
    assert corr.item_sink(kept.seq, arrival=5) is None
    assert corr.item_sink(call.seq, arrival=5) is None
    assert corr.item_sink(999, arrival=5) is None
    # a z that waits for held bodies: records received before it still stream
    query.holds = 1
    assert corr.resolve(CommandComplete(query.seq), arrival=7)
    assert corr.item_sink(query.seq, arrival=6) is sink
    assert corr.item_sink(query.seq, arrival=8) is None  # after the z: a duplicate
    corr.unhold(query.seq)
    assert query.future.done()
    assert corr.item_sink(query.seq, arrival=6) is None  # finished
    other = corr.register(query=True, on_item=sink)
    other.future.cancel()
    assert corr.item_sink(other.seq, arrival=1) is None
    for entry in (kept, call, other):
        corr.discard(entry)

"""Flat memory under queue churn, on a genuine stock qpidd (QMF v2 only): temporary
queues declared and deleted (as RPC clients' reply queues come and go) must leave
nothing behind in a Session following queue updates, nor in a Session feeding the
exporter's store.

Both run in this process; tracemalloc measures what the process holds after a warm-up
round of churn and again after a second round of as many queues.  At 1e2a8ad every
deleted queue left ~1 KB in a plain Session (its last view among the object view's
``gone``, its v2 id in the link's ``oids``) and ~2 KB in the exporter's (the queue's
subscription and binding too): the second round grew the process by 1.9 MB.  Now the
growth is noise (4 KB and 81 KB in two runs); the bound allows ~680 bytes a queue.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest

from qmf_async import ObjectGoneError, Session
from qmf_async.exporter import Exporter, LiveStore

from ._util import wait_until
from .qpidd import ROOT, Qpidd
from .queue_churn import hold_queues

pytest.importorskip("prometheus_client")

pytestmark = pytest.mark.qpidd

#: queues per round of churn
CHURN = 600
#: growth allowed over the second round (bytes): 400 KiB, ~680 bytes a queue for the
#: two sessions, well below the 1.9 MB that 600 queues left at 1e2a8ad; what is
#: measured now is noise of up to ~100 KiB (dict tables, stream buffers, at their
#: high-water sizes)
BOUND = 400 * 1024
#: seconds a deleted object's v2 id stays known (short, so the rounds are quick)
FORGET_AFTER = 0.5


def _released(session: Session) -> bool:
    """Whether every deleted object's v2 id was released (the link's private table)."""
    return all(b._v2 is None or not b._v2.deleted for b in session.brokers)


def _growth_report(before: tracemalloc.Snapshot, after: tracemalloc.Snapshot) -> str:
    lines = [str(stat) for stat in after.compare_to(before, "lineno")[:10]]
    return "\n".join(lines)


async def test_sessions_and_exporter_keep_nothing_of_deleted_queues(
        qpidd_stock: Qpidd) -> None:
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start(1)
    try:
        await _churn_twice(qpidd_stock)
    finally:
        if started:
            tracemalloc.stop()


#: the transport's receive buffers (the frame being read, the stream's buffer) hold what
#: qpidd sent last, up to a frame and the stream's limit: in flight at the snapshot, not
#: kept (a CI run saw them 427 KiB apart between two snapshots)
_IN_FLIGHT = (tracemalloc.Filter(False, "*/qmf_async/transport/_amqp10_frames.py"),
              tracemalloc.Filter(False, "*/asyncio/streams.py"))


def _kept(snapshot: tracemalloc.Snapshot) -> int:
    """Bytes traced in ``snapshot`` but for the receive buffers in flight."""
    return sum(s.size for s in snapshot.filter_traces(_IN_FLIGHT).statistics("filename"))


async def _churn_twice(broker: Qpidd) -> None:
    deleted = {"n": 0}
    async with Session(forget_deleted_after=FORGET_AFTER) as plain, \
            Session(manage_connections=True, forget_deleted_after=FORGET_AFTER) as fed:
        await plain.add_broker(broker.url, timeout=10)
        updates = plain.object_updates(_class="queue", maxsize=100_000)

        async def follow() -> None:
            async for obj in updates:
                if obj.is_deleted():
                    deleted["n"] += 1

        follower = asyncio.create_task(follow())
        store = LiveStore()
        async with Exporter(fed, store, tick=0.2, stale_after=10.0) as exporter:
            await fed.add_broker(broker.url, timeout=10)
            exporter.check_brokers()
            await wait_until(lambda: exporter.snapshots >= 1, 30, message="the first snapshot")
            key = (exporter.broker_label(fed.brokers[0]), "queue_deleted")

            def exported() -> int:
                return store.lifecycle.get(key, 0)

            base = (deleted["n"], exported())
            await _round(broker, plain, fed, deleted, exported, base, 1)  # warm-up
            objects = store.objects()
            gc.collect()
            before = tracemalloc.take_snapshot()
            held = _kept(before)
            await _round(broker, plain, fed, deleted, exported, base, 2)
            gc.collect()
            after = tracemalloc.take_snapshot()
            growth = _kept(after) - held
            assert store.objects() <= objects + 5  # the churned queues left the store
            assert growth < BOUND, (
                f"{CHURN} more queues declared and deleted grew the process by {growth} "
                f"bytes (bound {BOUND}); what grew:\n{_growth_report(before, after)}")
        follower.cancel()
        await asyncio.gather(follower, return_exceptions=True)


async def _round(broker: Qpidd, plain: Session, fed: Session, deleted: dict[str, int],
                 exported: Callable[[], int], base: tuple[int, int], n: int) -> None:
    """Churn ``CHURN`` queues; return once both sessions saw them deleted and released
    their ids."""
    t0 = time.monotonic()
    # in a process of its own: the client's allocations are not this process's
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.queue_churn", broker.address, str(CHURN),
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0 and out.split() == [str(CHURN).encode()], err.decode()[-2000:]
    want = n * CHURN

    def seen() -> Any:
        return deleted["n"] - base[0] >= want and exported() - base[1] >= want

    await wait_until(seen, 45, 0.1, message=f"round {n}: the deletions of {want} queues "
                     f"(seen {deleted['n'] - base[0]} and {exported() - base[1]})")
    await wait_until(lambda: _released(plain) and _released(fed), 10, 0.05,
                     message="the deleted queues' ids released")
    assert time.monotonic() - t0 < 60


async def test_a_poller_keeps_nothing_of_queues_gone_between_polls(qpidd_stock: Qpidd) -> None:
    """A console that only polls (``get_objects``, qpidd's fast path; the pattern of
    qpid-queue-stats) never sees a deletion: the queues a whole answer no longer has
    are released too (at 1e2a8ad their ids and names were kept for good)."""
    async with Session(forget_deleted_after=FORGET_AFTER) as session:
        broker = await session.add_broker(qpidd_stock.url, timeout=10)
        route, link = broker._route, broker._v2
        assert route is not None and link is not None
        before = len(await session.get_objects(_class="queue"))
        held = (len(route.v1_ids), len(route.names), len(link.oids))
        conn = await asyncio.to_thread(hold_queues, qpidd_stock.address, 100)
        try:
            polled_once = await session.get_objects(_class="queue")
            assert len(polled_once) >= before + 100
            assert len(route.v1_ids) >= held[0] + 100
        finally:
            await asyncio.to_thread(conn.close)

        async def polled() -> bool:
            return len(await session.get_objects(_class="queue")) <= before

        await wait_until(polled, 20, 0.2, message="the held queues deleted")
        def sizes() -> tuple[int, int, int]:
            return len(route.v1_ids), len(route.names), len(link.oids)

        await wait_until(lambda: all(a <= b for a, b in zip(sizes(), held, strict=True))
                         and not link.deleted, 10, 0.05,
                         message=f"ids, names and v2 ids back to {held}")
        # the link's names of v2 ids (their digests computed once) leave with the ids
        assert sum(len(t) for t in link._named.values()) == len(link.oids)
        # a proxy of a queue gone: its call fails in one line, nothing is sent
        now = {q.name for q in await session.get_objects(_class="queue")}
        gone = next(q for q in polled_once if q.name not in now)
        with pytest.raises(ObjectGoneError, match="not known over QMF v2"):
            await gone.purge(request=0)


async def test_the_ids_of_a_v2_agent_that_left_are_released(qpidd_stock: Qpidd) -> None:
    """Agents come and go too: the v2 ids of the objects of one that stopped beating
    are released (at 1e2a8ad they were kept for good)."""
    from qmf_async.transport import NativeAmqp10Transport

    from .agent_v2_helpers import PKG, counter_agent

    async with Session(forget_deleted_after=FORGET_AFTER) as session:
        broker = await session.add_broker(qpidd_stock.url, timeout=10)
        link = broker._v2
        assert link is not None
        async with counter_agent(qpidd_stock.url, versions=(2,), interval=0.5,
                                 transport=NativeAmqp10Transport) as agent:
            name = agent.v2_name
            await wait_until(lambda: name in [a.name for a in session.get_agents()], 15, 0.1,
                             message="the agent's heartbeat")

            async def counters() -> list[Any]:
                found = await session.get_objects(_class="counter", _package=PKG,
                                                  _timeout=5.0)
                return found if len(found) == 2 else []

            objs = await wait_until(counters, 15, 0.2, message="the agent's counters")
            prefix = objs[0].get_object_id().raw[:8]
            assert sum(raw[:8] == prefix for raw in link.oids) == 2
        await wait_until(lambda: name not in [a.name for a in session.get_agents()], 15, 0.1,
                         message="the agent aged out")
        await wait_until(lambda: not any(raw[:8] == prefix for raw in link.oids), 10, 0.05,
                         message="the agent's object ids released")
        assert prefix not in link._named  # and their names with them

"""The collector names the objects of a QMF v2 agent: an update that carried properties
and statistics together (every v2 data indication, a query answer) also gives a ``c``
row when its properties are new or changed, and ``snapshot()`` writes a ``c`` row for
every object that exists when the collector starts (qpidd sends properties only when
they change)."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyarrow")

from qmf_async import Change, ObjectId, QmfObject, QmfTimeout, RemoteAgent
from qmf_async.agent import Property, Statistic, object_class
from qmf_async.tools.collector import Collector

from ._util import wait_until
from .test_collector import PKG, T0, WIDGET, FakeSession, _as_dict, _read, running

GADGET = object_class(PKG, "gadget",
                      properties=[Property("name", "sstr", index=True)],
                      statistics=[Statistic("count", "uint64")])


def _both(name: str, count: int, ts: int, obj: int = 1,
          agent: RemoteAgent | None = None) -> QmfObject:
    """A proxy of an update that carried properties and statistics (as over v2)."""
    banks = (1, 5) if agent is None else (agent.broker_bank, agent.agent_bank)
    oid = ObjectId.make(broker_bank=banks[0], agent_bank=banks[1], object=obj)
    return QmfObject(None, None, agent, WIDGET, oid, (name,), (count,), (ts, T0, 0),
                     changed=Change.PROPERTIES | Change.STATISTICS)


def _rows(root: Path) -> list[tuple[str, int, dict[str, Any], dict[str, Any]]]:
    rows = sorted(_read(root, "samples"), key=lambda r: (r["sample_ts"], r["kind"]))
    return [(r["kind"], r["sample_ts"] - T0, _as_dict(r["props"]), _as_dict(r["stats_int"]))
            for r in rows]


async def test_updates_with_both_parts_give_props_rows_when_they_change(
        tmp_path: Path) -> None:
    session = FakeSession()
    c = Collector(session, tmp_path)
    async with running(c):
        for n, name in enumerate(["w", "w", "w", "renamed"]):
            session.publish(_both(name, n, T0 + n), "i")
        await wait_until(lambda: c.received == 6)
    assert _rows(tmp_path) == [
        ("c", 0, {"name": "w"}, {}), ("i", 0, {}, {"count": 0}),
        ("i", 1, {}, {"count": 1}),
        ("i", 2, {}, {"count": 2}),
        ("c", 3, {"name": "renamed"}, {}), ("i", 3, {}, {"count": 3}),
    ]
    assert c.stats.written == c.stats.received == 6 and c.stats.dropped == 0


class SnapshotSession(FakeSession):
    """A FakeSession that also answers the queries of ``snapshot``."""

    def __init__(self, objects: dict[str, list[QmfObject]], fail: set[str]) -> None:
        super().__init__()
        self.objects = objects
        self.fail = fail
        self.asked: list[tuple[str | None, str | None]] = []

    async def get_objects(self, _class: str | None = None, _package: str | None = None,
                          **kw: Any) -> list[QmfObject]:
        self.asked.append((_package, _class))
        if _class in self.fail:
            raise QmfTimeout("no complete answer")
        return self.objects.get(str(_class), [])


def _thing(name: str, obj: int) -> QmfObject:
    """A statistics-only update of another class (its query fails in the test)."""
    oid = ObjectId.make(broker_bank=1, agent_bank=5, object=100 + obj)
    return QmfObject(None, None, None, GADGET, oid, (name,), (0,), (T0 + 9, T0, 0),
                     changed=Change.STATISTICS)


async def test_snapshot_names_the_objects_of_the_classes_seen(tmp_path: Path) -> None:
    existing = [_both(f"w{n}", 10 * n, T0 + 5, obj=n) for n in (1, 2)]
    session = SnapshotSession({"widget": existing}, fail={"gadget"})
    c = Collector(session, tmp_path)
    async with running(c):
        snap = asyncio.ensure_future(c.snapshot(timeout=1.0))
        try:
            await asyncio.sleep(0)
            assert session.asked == []  # nothing is asked before an update arrives
            # a statistics-only update of widget 1: the snapshot asks for the widgets
            oid = ObjectId.make(broker_bank=1, agent_bank=5, object=1)
            session.publish(QmfObject(None, None, None, WIDGET, oid, ("w1",), (11,),
                                      (T0 + 7, T0, 0), changed=Change.STATISTICS), "i")
            await wait_until(lambda: c.snapshot_rows == 2)
            # a class whose query fails is left out; the snapshot goes on
            session.publish(_thing("g", 1), "i")
            await wait_until(lambda: len(session.asked) == 2)
            # a class is asked for once; the same properties give no second c row
            session.publish(_both("w1", 12, T0 + 8, obj=1), "i")
            session.publish(_thing("g", 2), "i")
            await wait_until(lambda: c.received == 6)
            assert not snap.done()
        finally:
            snap.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await snap
    assert session.asked == [(PKG, "widget"), (PKG, "gadget")]
    rows = _rows(tmp_path)
    assert sorted((kind, props.get("name")) for kind, _, props, _ in rows) \
        == [("c", "w1"), ("c", "w2"), ("i", None), ("i", None), ("i", None), ("i", None)]


def _queue(name: str, obj: int) -> QmfObject:
    """A statistics update of a queue whose properties are known (merged)."""
    oid = ObjectId.make(broker_bank=1, agent_bank=5, object=200 + obj)
    return QmfObject(None, None, None, QUEUE, oid, (name,), (obj,), (T0 + obj, T0, 0),
                     changed=Change.STATISTICS)


QUEUE = object_class("org.apache.qpid.broker", "queue",
                     properties=[Property("name", "sstr", index=True)],
                     statistics=[Statistic("msgDepth", "uint32")])


@pytest.mark.parametrize("console_queues", [False, True])
async def test_the_consoles_own_queues_are_left_out_unless_asked(
        tmp_path: Path, console_queues: bool) -> None:
    names = ["orders", "qmf-async-console-3f80c2a1b4d5_qmf-topic2-1a2b", "qmf-reply-9c",
             "reply-0af3"]
    session = FakeSession()
    c = Collector(session, tmp_path, console_queues=console_queues)
    async with running(c):
        for n, name in enumerate(names):
            session.publish(_queue(name, n), "i")  # the pump takes them all before it ends
    written = {n for n, name in enumerate(names) if console_queues or name == "orders"}
    assert sorted(r["sample_ts"] - T0 for r in _read(tmp_path, "samples")) == sorted(written)
    assert c.stats.received == len(written)


class _Broker:
    """What the collector reads of an agent's broker."""

    where = "amqp://127.0.0.1:5672/"


async def test_what_is_kept_of_an_agent_that_left_is_released(tmp_path: Path) -> None:
    """The last properties of an agent's objects stay while it is away for a short
    while (a reconnect: the same ids and properties give no new ``c`` row), and are
    released ``forget_after`` seconds after it left (an agent restarted over QMF v1
    gives its objects new ids: the old ones would be kept for ever)."""
    broker = _Broker()
    agent = RemoteAgent(broker, 1, 5, broker_url=broker.where)  # type: ignore[arg-type]
    other = RemoteAgent(broker, 1, 6, broker_url=broker.where)  # type: ignore[arg-type]
    session = FakeSession()
    c = Collector(session, tmp_path, forget_after=0.3)
    async with running(c):
        assert session.agent_sub is not None
        session.change("added", agent)
        for n in (1, 2):
            session.publish(_both(f"w{n}", 0, T0, obj=n, agent=agent), "i")
        await wait_until(lambda: c.received == 4)
        assert c.remembered == 2
        # a reconnect: the agent leaves and comes back with the same objects
        session.change("removed", agent)
        session.change("added", agent)
        for n in (1, 2):
            session.publish(_both(f"w{n}", 1, T0 + 1, obj=n, agent=agent), "i")
        await wait_until(lambda: c.received == 6 and not len(session.agent_sub))
        await asyncio.sleep(0.5)  # longer than forget_after: the returned agent stays
        assert c.remembered == 2
        # the agent restarts (v1: new object ids): the old ids go when it leaves for good
        session.change("removed", agent)
        session.change("added", agent)
        for n in (3, 4):
            session.publish(_both(f"w{n}", 0, T0 + 2, obj=n, agent=agent), "i")
        await wait_until(lambda: c.received == 10 and c.remembered == 4)
        session.change("removed", agent)
        # news of a departure ahead of the agent's last updates: those go with it too
        session.change("removed", other)
        session.publish(_both("x", 0, T0 + 3, obj=7, agent=other), "i")
        await wait_until(lambda: c.received == 12)
        await wait_until(lambda: c.remembered == 0, timeout=5)
    rows = _rows(tmp_path)
    assert sorted(props["name"] for kind, _, props, _ in rows if kind == "c") \
        == ["w1", "w2", "w3", "w4", "x"]

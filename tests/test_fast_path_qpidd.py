"""qpidd's fast path: on a connection that speaks QMF v2, queries to qpidd's own agent
go over v1 and come back with the identities v2 gives the same objects.

The naming rule is checked on its own, then against a genuine stock qpidd (v1
publications off): every class qpidd has, read over v1 and over v2 on the same
session, gives the same objects with the same ids and values; an object from a query,
its updates and its methods agree; a query whose records cannot be named goes over v2.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from qmf_async import ClassKey, QmfObject, Session, SessionOptions
from qmf_async.console._v1route import V1Route
from qmf_async.protocol import qpidd_object_name
from qmf_async.wire import (
    ClassKind,
    ObjectId,
    QmfType,
    SchemaArgument,
    SchemaClass,
    SchemaMethod,
    SchemaProperty,
)

from ._util import wait_until

PKG = "org.apache.qpid.broker"


def _schema(name: str, *props: tuple[str, QmfType, bool]) -> SchemaClass:
    return SchemaClass(ClassKind.OBJECT, ClassKey(PKG, name, bytes(16)),
                       properties=[SchemaProperty(n, t, index=i) for n, t, i in props])


def _ref(n: int) -> ObjectId:
    return ObjectId.make(broker_bank=1, object=n)


# ---------------------------------------------------------------------------- the rule

def test_a_queue_is_named_by_its_name_without_the_vhost() -> None:
    queue = _schema("queue", ("vhostRef", QmfType.REF, True), ("name", QmfType.SSTR, True),
                    ("durable", QmfType.BOOL, False))
    assert qpidd_object_name(queue, [_ref(3), "q1", True], {}.get) == f"{PKG}:queue:q1"


def test_references_are_named_by_the_objects_they_point_to() -> None:
    binding = _schema("binding", ("exchangeRef", QmfType.REF, True),
                      ("queueRef", QmfType.REF, True), ("bindingKey", QmfType.LSTR, True))
    names = {_ref(4).raw: f"{PKG}:exchange:", _ref(9).raw: f"{PKG}:queue:q"}
    assert (qpidd_object_name(binding, [_ref(4), _ref(9), "k.#"], names.get)
            == f"{PKG}:binding:{PKG}:exchange:,{PKG}:queue:q,k.#")
    # a referenced object whose name is not known: no name (never a wrong one)
    assert qpidd_object_name(binding, [_ref(4), _ref(10), "k"], names.get) is None
    assert qpidd_object_name(binding, [_ref(4), None, "k"], names.get) is None


def test_other_values_stream_as_qpidd_streams_them() -> None:
    odd = _schema("odd", ("flag", QmfType.BOOL, True), ("n", QmfType.UINT32, True),
                  ("id", QmfType.UUID, True), ("s", QmfType.SSTR, True))
    got = qpidd_object_name(odd, [False, 17, uuid.UUID(int=1), None], {}.get)
    assert got == f"{PKG}:odd:0,17,00000000-0000-0000-0000-000000000001,"


def test_memory_has_a_bare_name_and_a_class_without_index_has_none() -> None:
    memory = _schema("memory", ("name", QmfType.SSTR, True))
    assert qpidd_object_name(memory, ["amqp-broker"], {}.get) == "amqp-broker"
    plain = _schema("plain", ("x", QmfType.SSTR, False))
    assert qpidd_object_name(plain, ["a"], {}.get) is None


class _Host:
    """What V1Route reads of its broker connection, for the method-target rules."""

    where = "test"
    v2 = None
    has_management = True

    class session:
        options = SessionOptions()

    waits = None

    async def send_v1_query(self, banks: Any, query: Any, sink: Any) -> Any:
        raise AssertionError("no query in these tests")


def test_a_call_goes_over_v1_with_its_references_as_qpidds_v1_ids() -> None:
    route = V1Route(_Host())
    ours, v1, ref_ours, ref_v1 = _ref(1).raw, _ref(2).raw, _ref(3).raw, _ref(4).raw
    route.v1_ids.update({ours: v1, ref_ours: ref_v1})
    method = SchemaMethod("move", [SchemaArgument("dest", QmfType.REF, direction="I"),
                                   SchemaArgument("n", QmfType.UINT32, direction="I")])
    assert route.method_target(ours, method, {"dest": ObjectId(ref_ours), "n": 5}) == (
        v1, {"dest": ObjectId(ref_v1), "n": 5})
    assert route.calls == 1
    # an object or a reference this path did not hand out: the call goes over v2
    assert route.method_target(_ref(9).raw, method, {"dest": ObjectId(ref_ours)}) is None
    assert route.method_target(ours, method, {"dest": _ref(8), "n": 1}) is None
    assert route.calls == 1


# ---------------------------------------------------------------------------- qpidd

def _by_id(objs: list[QmfObject]) -> dict[str, dict[str, Any]]:
    return {str(o.get_object_id()): o.get_properties() for o in objs}


async def _both_ways(session: Session, cls: str) -> tuple[list[QmfObject], list[QmfObject]]:
    """``cls`` read over the fast path, then over v2 (the same session)."""
    route = session.brokers[0]._route
    assert route is not None
    fast = await session.get_objects(_class=cls)
    route.v2_only.add(cls)
    try:
        slow = await session.get_objects(_class=cls)
    finally:
        route.v2_only.discard(cls)
    return fast, slow


@pytest.mark.qpidd
async def test_every_class_reads_the_same_over_v1_and_v2(qpidd_stock: Any) -> None:
    name = f"fast-{uuid.uuid4().hex[:8]}"
    async with Session.connect(qpidd_stock.url, rcv_objects=False, rcv_events=False) as s:
        b = s.brokers[0]
        assert (b.qmf_version, b.has_management) == (2, True)
        (broker,) = await s.get_objects(_class="broker")
        # objects with references of every kind: a durable queue with an alternate
        # exchange, an exchange with one, a binding between them
        await broker.create("exchange", name, {"exchange-type": "topic",
                                               "alternate-exchange": "amq.fanout"}, False)
        await broker.create("queue", name, {"alternate-exchange": "amq.direct"}, False)
        await broker.create("binding", f"{name}/{name}/a.#", {}, False)
        try:
            route = b._route
            assert route is not None
            classes = ("broker", "system", "vhost", "queue", "exchange", "binding",
                       "connection", "session", "incoming", "outgoing", "memory")
            for cls in classes:
                before = route.queries
                fast, slow = await _both_ways(s, cls)
                assert route.queries == before + 1, cls  # answered over v1
                fast_ids, slow_ids = _by_id(fast), _by_id(slow)
                assert fast_ids.keys() == slow_ids.keys() and fast_ids, cls
                if cls != "memory":  # memory's properties are malloc figures
                    assert fast_ids == slow_ids, cls
            assert route.fallbacks == 0
            (queue,) = [q for q in await s.get_objects(_class="queue") if q.name == name]
            (alt,) = await s.get_objects(_class="exchange", name="amq.direct")
            assert queue.altExchange == alt.get_object_id()
            assert b.v2_object_id(queue.get_object_id()).object_name == f"{PKG}:queue:{name}"
        finally:
            await broker.delete("binding", f"{name}/{name}/a.#", {})
            await broker.delete("queue", name, {})
            await broker.delete("exchange", name, {})


@pytest.mark.qpidd
async def test_a_queried_object_its_updates_and_its_methods_agree(qpidd_stock: Any) -> None:
    name = f"fast-{uuid.uuid4().hex[:8]}"
    async with Session.connect(qpidd_stock.url) as s:
        updates = s.object_updates(_class="queue")
        await updates.ready()
        (broker,) = await s.get_objects(_class="broker")
        await broker.create("queue", name, {}, False)
        try:
            (queue,) = await s.get_objects(_class="queue", name=name)
            assert s.brokers[0]._route.queries >= 2  # broker, queue
            # the same id by _objectId, over v1 again
            (same,) = await s.get_objects(_objectId=queue.get_object_id())
            assert same.get_object_id() == queue.get_object_id() and same.name == name
            # qpidd publishes the queue over v2: its update has the same id
            async def update() -> QmfObject | None:
                obj = await updates.get(timeout=10.0)
                return obj if obj.name == name else None
            published = await wait_until(update, timeout=20.0, message="the queue's update")
            assert published.get_object_id() == queue.get_object_id()
            # a method on the queried object reaches the queue, over v1 too
            route = s.brokers[0]._route
            calls = route.calls
            assert (await queue.purge(0)).status == 0
            assert route.calls == calls + 1
            # and on the object its update delivered (the same id, the same path)
            assert (await published.purge(0)).status == 0
            assert route.calls == calls + 2
        finally:
            await broker.delete("queue", name, {})
        updates.close()


@pytest.mark.qpidd
async def test_records_that_cannot_be_named_are_read_over_v2(qpidd_stock: Any) -> None:
    async with Session.connect(qpidd_stock.url, rcv_objects=False, rcv_events=False) as s:
        route = s.brokers[0]._route
        assert route is not None
        v2 = _by_id((await _both_ways(s, "binding"))[1])

        async def no_lookup(unknown: Any, rounds: int) -> None:
            await asyncio.sleep(0)
        # no referenced object can be asked for or is known: the bindings' names
        # cannot be made, so the query goes over v2 and the class stays there
        route.names.clear()
        route._resolve = no_lookup  # type: ignore[method-assign]
        got = await s.get_objects(_class="binding")
        assert _by_id(got) == v2
        assert route.fallbacks == 1 and "binding" in route.v2_only
        queries = route.queries
        assert _by_id(await s.get_objects(_class="binding")) == v2
        assert route.queries == queries  # v2 only from now on, on this connection


@pytest.mark.qpidd
async def test_forcing_a_version_keeps_every_query_on_it(qpidd_stock: Any) -> None:
    async with Session.connect(qpidd_stock.url, qmf_version=2, rcv_objects=False,
                               rcv_events=False) as s:
        assert await s.get_objects(_class="queue")
        (broker,) = await s.get_objects(_class="broker")
        assert (await broker.echo(3, "v2")).out_args["body"] == "v2"
        route = s.brokers[0]._route
        assert route is not None and route.queries == 0 and route.calls == 0


async def test_an_agent_that_does_not_know_a_class_costs_no_wait(qpidd_fresh: Any) -> None:
    """With another agent on qpidd, the first query of one of qpidd's classes asks that
    agent (v2) too; its schema is asked of the agent and of qpidd at once, so the
    agent's silence (it does not know the class) does not hold the query for
    ``schema_timeout`` (it did: 5 s before each first query of a class)."""
    from qmf_async.agent import Agent

    qpidd = qpidd_fresh(False)
    holder = SchemaClass(ClassKind.OBJECT, ClassKey("org.qmfasync.fastpath", "holder",
                                                    bytes(16)),
                         properties=[SchemaProperty("n", QmfType.UINT32, index=True)])
    agent = Agent(qpidd.url, label=f"fast-path-{uuid.uuid4().hex[:8]}", schemas=[holder],
                  interval=0.5, attach=False, broker_bank=7, qmf_versions=(2,))
    agent.create_object("holder", n=1)
    await agent.start()
    try:
        async with Session.connect(qpidd.url, schema_timeout=30.0, rcv_objects=False,
                                   rcv_events=False) as s:
            await wait_until(lambda: any(a.name == agent.v2_name for a in s.get_agents()),
                             15.0, message="the test agent known")
            loop = asyncio.get_running_loop()
            for cls in ("queue", "exchange", "connection"):
                started = loop.time()
                found = await s.get_objects(_class=cls, _package=PKG, _timeout=30.0)
                took = loop.time() - started
                assert found, cls
                assert took < 3.0, f"the first {cls} query took {took:.2f}s"
    finally:
        await agent.stop()

"""The console's object view on the scripted transport (tests/fake_transport.py):
objects first seen through statistics are completed by one ``G`` per agent and
class before they are handed out; updates keep their order; failures are counted;
deletion, eviction and departed agents; ``where=`` on the merged view; what an
update changed; unknown class and package names; errors are QmfErrors."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import pytest

from qmf_async import (
    Change,
    ObjectGoneError,
    QmfError,
    QmfObject,
    QmfTimeout,
    UnknownClassError,
)
from qmf_async.console._session import Session
from tests._util import wait_until
from tests.fake_transport import FakeBus, FakeObject, ScriptedAgent, now_ns
from tests.test_session_unit import EXCHANGE, QUEUE, Recorder, connect, queue_agent, with_heartbeats


@pytest.fixture
async def make_session() -> Any:
    """Sessions on a fake bus (as in test_session_unit), closed after the test."""
    made: list[Session] = []

    def make(bus: FakeBus, **kwargs: Any) -> Session:
        kwargs.setdefault("broker_timeout", 1.0 if bus.management is not None else 0.05)
        kwargs.setdefault("timeout", 5.0)
        session = Session(_transport_factory=bus.factory, **kwargs)
        made.append(session)
        return session

    yield make
    for session in made:
        await asyncio.wait_for(session.close(), 5.0)


def publish_body(agent: ScriptedAgent, objs: list[FakeObject], opcode: str) -> int:
    """One topic body holding a record of every object (as an agent publishes a class)."""
    k = objs[0].schema.class_key
    return agent.bus.publish_topic(
        [o.record(opcode) for o in objs],
        f"console.obj.{agent.broker_bank}.{agent.agent_bank}.{k.package}.{k.name}")


def queues(agent: ScriptedAgent) -> list[FakeObject]:
    return [o for o in agent.objects if o.schema is QUEUE]


async def take(sub: Any, n: int, timeout: float = 3.0) -> list[QmfObject]:
    return [await sub.get(timeout) for _ in range(n)]


def completion_queries(bus: FakeBus) -> list[tuple[str, dict[str, Any]]]:
    return [(p.routing_key, p.messages[0].query) for p in bus.published
            if p.messages[0].OPCODE == "G"]


# ----------------------------------------------------------------------------- completion


async def test_i_first_objects_completed_by_one_query_per_agent_and_class(
        make_session: Any) -> None:
    bus = FakeBus()
    a5, a6 = queue_agent(bus, 5, count=4), queue_agent(bus, 6, count=3)
    rec = Recorder()
    session, _broker = await with_heartbeats(make_session, bus, console=rec)
    updates = session.object_updates()
    assert publish_body(a5, queues(a5), "i") == 1
    assert publish_body(a6, queues(a6), "i") == 1
    got = await take(updates, 7)
    # every object answers its name and its statistics; this first update of each also
    # carries the properties its completion brought (object_props before object_stats)
    assert sorted(o.name for o in got) == sorted([f"a5-q{i}" for i in range(4)]
                                                 + [f"a6-q{i}" for i in range(3)])
    assert all(o.depth == int(o.name[-1]) for o in got)
    assert all(o.get_changes() == Change.PROPERTIES | Change.STATISTICS for o in got)
    assert {o.name for _, o in rec.calls["object_props"]} >= {o.name for o in got}
    # one query per agent and class, however many objects waited on it
    assert sorted(completion_queries(bus)) == [
        ("agent.1.5", {"_class": "queue", "_package": "test.pkg"}),
        ("agent.1.6", {"_class": "queue", "_package": "test.pkg"})]
    assert session.completion_queries == 2 and session.completion_failures == 0
    # the console callbacks got the completed proxies too
    await wait_until(lambda: rec.n("object_stats") == 7)
    assert all(obj.name.startswith("a") for _, obj in rec.calls["object_stats"])
    # once complete, later statistics are delivered at once, merged, without a query
    a5.objects[0].stats["depth"] = 40
    publish_body(a5, [a5.objects[0]], "i")
    (later,) = await take(updates, 1)
    assert (later.name, later.depth) == ("a5-q0", 40)
    assert len(completion_queries(bus)) == 2
    assert len(session._view.waiting) == 0 and len(session._view.completions) == 0


async def test_c_first_objects_get_their_statistics(make_session: Any) -> None:
    bus = FakeBus()
    agent = queue_agent(bus, 5, count=3)
    session, _broker = await with_heartbeats(make_session, bus)
    await session.get_schema(QUEUE.class_key)
    await session.get_schema(EXCHANGE.class_key)
    updates = session.object_updates()
    q0, q1, q2 = queues(agent)
    # a new object's c and i in one body complete each other: no query
    q0.stats["depth"] = 11
    agent.publish(q0, "ci")
    got = await take(updates, 2)
    assert [(o.name, o.depth, o.get_changes()) for o in got] == [
        ("a5-q0", 11, Change.PROPERTIES), ("a5-q0", 11, Change.STATISTICS)]
    assert session.completion_queries == 0
    # a c alone: its statistics come from one query for both objects
    publish_body(agent, [q1, q2], "c")
    got = await take(updates, 2)
    assert [(o.name, o.depth) for o in got] == [("a5-q1", 1), ("a5-q2", 2)]
    assert all(o.get_changes() == Change.PROPERTIES for o in got)
    assert session.completion_queries == 1
    # a class without statistics has nothing to complete
    (ex,) = [o for o in agent.objects if o.schema is EXCHANGE]
    publish_body(agent, [ex], "c")
    (exchange,) = await take(updates, 1)
    assert exchange.name == "a5-ex" and session.completion_queries == 1


async def test_updates_during_a_completion_keep_their_order(make_session: Any) -> None:
    bus = FakeBus()
    agent = queue_agent(bus, 5, count=3, delay={"G": 0.3})
    session, _broker = await with_heartbeats(make_session, bus)
    await session.get_schema(QUEUE.class_key)
    updates = session.object_updates()
    q0, q1, q2 = queues(agent)
    for depth in (1, 2, 3):  # three i of q0 while its completion is out
        q0.stats["depth"] = depth
        publish_body(agent, [q0], "i")
    publish_body(agent, [q1], "i")  # joins: answered by the same query
    assert len(updates) == 0  # nothing handed out before its properties are known
    # properties arriving meanwhile complete q2 at once: its earlier i comes first
    q2.stats["depth"] = 7
    publish_body(agent, [q2], "i")
    q2.props["name"] = "renamed"
    publish_body(agent, [q2], "c")
    q2.stats["depth"] = 8
    publish_body(agent, [q2], "i")
    first = await take(updates, 3, timeout=0.2)  # long before the G answer
    assert [(o.name, o.depth, o.get_changes()) for o in first] == [
        ("renamed", 7, Change.PROPERTIES | Change.STATISTICS),
        ("renamed", 7, Change.PROPERTIES),
        ("renamed", 8, Change.STATISTICS)]
    rest = await take(updates, 4)
    assert [(o.name, o.depth) for o in rest if o.name == "a5-q0"] == \
        [("a5-q0", 1), ("a5-q0", 2), ("a5-q0", 3)]
    assert [o.name for o in rest].count("a5-q1") == 1
    assert len(completion_queries(bus)) == 1 and session.completion_failures == 0
    assert len(updates) == 0


async def test_object_joining_after_the_answer_gets_the_next_query(make_session: Any) -> None:
    bus = FakeBus()
    agent = queue_agent(bus, 5, count=1, delay={"G": 0.2})
    session, _broker = await with_heartbeats(make_session, bus)
    await session.get_schema(QUEUE.class_key)
    updates = session.object_updates()
    publish_body(agent, queues(agent), "i")
    await wait_until(lambda: len(completion_queries(bus)) == 1)
    # an object the agent created after it answered (the fake agent answers when it
    # receives the G): missing from the answer, so it waits for a second round
    late = agent.add_object(QUEUE, {"name": "late", "durable": False}, {"depth": 5})
    publish_body(agent, [late], "i")
    got = await take(updates, 2)
    assert [(o.name, o.depth) for o in got] == [("a5-q0", 0), ("late", 5)]
    assert session.completion_failures == 0
    assert len(completion_queries(bus)) == 2


async def test_failed_completion_is_counted_and_delivers_what_is_known(
        make_session: Any) -> None:
    bus = FakeBus()
    agent = queue_agent(bus, 5, count=2)
    session, _broker = await with_heartbeats(make_session, bus, completion_timeout=0.2)
    await session.get_schema(QUEUE.class_key)
    updates = session.object_updates()
    agent.drop = 1  # the G's answer is lost
    start = time.monotonic()
    publish_body(agent, queues(agent), "i")
    got = await take(updates, 2)
    assert time.monotonic() - start >= 0.2  # held for the completion's bound, not longer
    # delivered with what is known: statistics, no properties
    assert [o.depth for o in got] == [0, 1]
    assert all(o.get_properties() == {} for o in got)
    with pytest.raises(AttributeError, match="properties of this object were not received"):
        _ = got[0].name
    assert session.completion_failures == 2 and session.completion_queries == 1
    # within the bound after a failure, statistics go out at once, without a new query
    publish_body(agent, queues(agent)[:1], "i")
    (again,) = await take(updates, 1, timeout=0.15)
    assert again.get_properties() == {} and session.completion_queries == 1
    # after it, the next i tries again, and succeeds
    await asyncio.sleep(0.25)  # let the retry bound pass (not an assertion on timing)
    publish_body(agent, queues(agent)[:1], "i")
    (done,) = await take(updates, 1)
    assert done.name == "a5-q0" and session.completion_queries == 2
    assert session.completion_failures == 2


async def test_failed_completion_when_the_agent_reports_an_error(make_session: Any) -> None:
    bus = FakeBus()
    agent = queue_agent(bus, 5, count=1)
    session, _broker = await with_heartbeats(make_session, bus)
    await session.get_schema(QUEUE.class_key)
    updates = session.object_updates()
    agent.g_error = (7, "boom")
    publish_body(agent, queues(agent), "i")
    (obj,) = await take(updates, 1)
    assert obj.get_statistics() == {"depth": 0, "enqueues": 0} and obj.get_properties() == {}
    assert session.completion_failures == 1


async def test_mixed_stream_every_update_answers_name_and_statistics(
        make_session: Any) -> None:
    bus = FakeBus()
    agents = [queue_agent(bus, ab, count=6, delay={"G": 0.05}) for ab in (5, 6)]
    session, _broker = await with_heartbeats(make_session, bus)
    updates = session.object_updates(_class="queue")
    rng = random.Random(7)
    expected: dict[str, list[int]] = {}
    # a console that connected late sees statistics first, then anything
    for agent in agents:
        publish_body(agent, queues(agent), "i")
        for o in queues(agent):
            expected.setdefault(o.props["name"], []).append(o.stats["depth"])
    # the rest arrives while the completions are out (a c completes its object early)
    await wait_until(lambda: session.completion_queries == 2)
    for step in range(200):
        agent = rng.choice(agents)
        obj = rng.choice(queues(agent))
        if rng.random() < 0.3:
            publish_body(agent, [obj], "c")
            expected[obj.props["name"]].append(obj.stats["depth"])
        else:
            obj.stats["depth"] = 100 + step
            publish_body(agent, [obj], "i")
            expected[obj.props["name"]].append(100 + step)
        if step % 50 == 0:
            await asyncio.sleep(0)
    total = sum(len(v) for v in expected.values())
    got = await take(updates, total)
    seen: dict[str, list[int]] = {}
    for o in got:
        seen.setdefault(o.name, []).append(o.depth)  # both answer on every update
        assert o.get_statistics() and o.get_properties()
    assert seen == expected  # nothing lost, nothing reordered per object
    assert session.completion_queries == 2 and session.completion_failures == 0


async def test_deleted_objects_leave_the_view(make_session: Any) -> None:
    bus = FakeBus()
    agent = queue_agent(bus, 5, count=2)
    session, _broker = await with_heartbeats(make_session, bus)
    await session.get_schema(QUEUE.class_key)
    updates = session.object_updates()
    q0, q1 = queues(agent)
    publish_body(agent, [q0], "i")
    (first,) = await take(updates, 1)
    # the completion query's answer also brought q1: the view keeps it
    assert first.name == "a5-q0" and len(session._view.latest) == 2
    q0.deleted = now_ns()
    publish_body(agent, [q0], "i")
    (gone,) = await take(updates, 1)
    assert gone.is_deleted() and gone.name == "a5-q0"
    assert gone.get_changes() == Change.STATISTICS | Change.DELETED
    assert len(session._view.latest) == 1  # q0 left it
    # q1's deletion, seen first through statistics: its properties are known already
    q1.deleted = now_ns()
    publish_body(agent, [q1], "i")
    (dead,) = await take(updates, 1)
    assert dead.is_deleted() and dead.name == "a5-q1"
    agent.publish(q1, "ci")
    both = await take(updates, 2)
    assert [(o.name, o.depth, o.is_deleted()) for o in both] == [("a5-q1", 1, True)] * 2
    assert session.completion_queries == 1 and session._view.latest == {}
    assert session.completion_failures == 0


async def test_an_object_first_seen_deleted_is_not_queried(make_session: Any) -> None:
    bus = FakeBus()
    agent = queue_agent(bus, 5, count=1)
    session, _broker = await with_heartbeats(make_session, bus)
    await session.get_schema(QUEUE.class_key)
    updates = session.object_updates()
    (q0,) = queues(agent)
    q0.deleted = now_ns()
    publish_body(agent, [q0], "i")  # the agent no longer has it: nothing to ask
    (dead,) = await take(updates, 1)
    assert dead.is_deleted() and dead.get_properties() == {}
    # its c and i in one body (as agents publish a deletion) complete each other
    agent.publish(q0, "ci")
    both = await take(updates, 2)
    assert [(o.name, o.is_deleted()) for o in both] == [("a5-q0", True)] * 2
    assert session.completion_queries == 0 and session._view.latest == {}


async def test_view_is_bounded_and_departed_agents_leave_it(make_session: Any) -> None:
    bus = FakeBus()
    agent = queue_agent(bus, 5, count=3)
    other = queue_agent(bus, 6, count=1)
    session, broker = await with_heartbeats(make_session, bus, max_objects=2,
                                            agent_interval=0.2, min_agent_interval=0.05)
    await session.get_schema(QUEUE.class_key)
    updates = session.object_updates()
    publish_body(agent, queues(agent), "c")
    await take(updates, 3)
    assert len(session._view.latest) == 2 and session.objects_evicted == 1
    publish_body(other, queues(other), "c")
    await take(updates, 1)
    assert len(session._view.latest) == 2
    # agent 6 keeps heartbeating, agent 5 falls silent and ages out: its objects go
    deadline = time.monotonic() + 5
    while any(a.agent_bank == 5 for a in broker.agents()):
        other.heartbeat()
        assert time.monotonic() < deadline, "agent 5 did not age out"
        await asyncio.sleep(0.05)
    assert [k[1] for k in session._view.latest] == [queues(other)[0].oid.raw]


async def test_where_evaluates_against_the_merged_view(make_session: Any) -> None:
    bus = FakeBus()
    agent = queue_agent(bus, 5, count=4)
    session, _broker = await with_heartbeats(make_session, bus)
    deep = session.object_updates(where="name LIKE 'a5-q%' AND depth >= 2")
    durable = session.object_updates(durable=True) if False else \
        session.object_updates(where="durable = TRUE AND enqueues > 0")
    publish_body(agent, queues(agent), "i")  # statistics only: names come from completion
    assert sorted(o.name for o in await take(deep, 2)) == ["a5-q2", "a5-q3"]
    assert [o.name for o in await take(durable, 1)] == ["a5-q2"]
    # a properties update is matched with the statistics received before it
    publish_body(agent, queues(agent)[3:], "c")
    (q3,) = await take(deep, 1)
    assert q3.get_changes() == Change.PROPERTIES and q3.depth == 3
    assert len(deep) == 0 and len(durable) == 0


async def test_no_listener_keeps_no_view(make_session: Any) -> None:
    bus = FakeBus()
    agent = queue_agent(bus, 5, count=2)
    session, _broker = await with_heartbeats(make_session, bus)
    await session.get_schema(QUEUE.class_key)
    publish_body(agent, queues(agent), "i")
    assert session._view.latest == {} and session.completion_queries == 0
    sub = session.object_updates()
    publish_body(agent, queues(agent), "i")
    assert [o.name for o in await take(sub, 2)] == ["a5-q0", "a5-q1"]
    sub.close()
    publish_body(agent, queues(agent), "c")
    assert session._view.latest == {}


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize("management", [True, False])
async def test_unknown_class_and_package_raise_with_close_names(make_session: Any,
                                                                management: bool) -> None:
    bus = FakeBus()
    if management:
        bus.add_management()
    queue_agent(bus, 5, count=2)
    session, _broker = await (connect if management else with_heartbeats)(make_session, bus)
    if management:
        await session.wait_for_agents(2, timeout=2.0)
    with pytest.raises(UnknownClassError, match=r"'queu'.*close: queue") as info:
        await session.get_objects(_class="queu")
    assert isinstance(info.value, QmfError)
    with pytest.raises(UnknownClassError, match=r"package 'org.nope'"):
        await session.get_objects(_class="queue", _package="org.nope")
    with pytest.raises(UnknownClassError, match=r"package 'test.pkh'.*close: test.pkg"):
        await session.get_objects(_class="queue", _package="test.pkh")
    with pytest.raises(UnknownClassError, match=r"'exchang' in package 'test.pkg'.*exchange"):
        async for _ in session.iter_objects(_class="exchang", _package="test.pkg"):
            pass


async def test_legitimate_first_queries_do_not_raise(make_session: Any) -> None:
    bus = FakeBus()
    agent = queue_agent(bus, 5, count=2)
    agent.objects = [o for o in agent.objects if o.schema is QUEUE]  # no exchange objects
    session, _broker = await with_heartbeats(make_session, bus)
    # the first query of a class not yet known locally: objects arrive, nothing else asked
    assert len(await session.get_objects(_class="queue")) == 2
    assert bus.sent("P") == [] and bus.sent("Q") == []
    # a class the agent has but with no object now: the bus lists it, so [] not an error
    assert await session.get_objects(_class="exchange", _package="test.pkg") == []
    assert len(bus.sent("P")) == 1
    # filtered out is not unknown
    assert await session.get_objects(_class="queue", name="nope") == []
    # once known, no more asking
    assert await session.get_objects(_class="exchange") == []
    assert len(bus.sent("P")) == 1


async def test_unknown_class_not_raised_when_the_bus_cannot_tell(make_session: Any) -> None:
    bus = FakeBus()
    agent = queue_agent(bus, 5, count=1)
    session, _broker = await with_heartbeats(make_session, bus, broker_timeout=0.1)
    agent.drop = lambda msg: msg.OPCODE == "P"  # packages are not answered
    assert await session.get_objects(_class="queu", _timeout=1.0) == []


async def test_subscription_get_and_update_raise_qmf_errors(make_session: Any) -> None:
    bus = FakeBus()
    agent = queue_agent(bus, 5, count=1)
    session, _broker = await with_heartbeats(make_session, bus)
    with pytest.raises(QmfTimeout) as info:
        await session.object_updates().get(0.05)
    assert isinstance(info.value, TimeoutError)  # still a TimeoutError for old callers
    (q,) = await session.get_objects(_class="queue")
    assert q.get_changes() == Change.PROPERTIES | Change.STATISTICS
    agent.objects.clear()
    with pytest.raises(ObjectGoneError) as gone:
        await q.update()
    assert isinstance(gone.value, QmfError) and isinstance(gone.value, LookupError)


def test_session_options_are_checked() -> None:
    from qmf_async import UsageError
    with pytest.raises(UsageError):
        Session(completion_timeout=0)
    with pytest.raises(UsageError):
        Session(max_objects=0)

"""The console Session over QMF v2: the pieces without a broker (bindings, the
conversion of v2 objects into the session's object view) and the whole API against a
genuine qpidd, stock (v1 off: v2 is all it publishes) and with both versions on.

What is checked against qpidd is what a user sees: the same objects, methods, events
and updates as over v1, the v2 agent, and the broker asked to pass only what the
subscriptions follow.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from qmf_async import (
    Change,
    ClassKey,
    MethodError,
    QmfObject,
    Session,
    SessionOptions,
    UsageError,
)
from qmf_async.console._v2 import Interest, V2Link, keyify, v2_bindings
from qmf_async.errors import DecodeError
from qmf_async.wire import (
    ObjectId,
    SchemaRegistry,
    V2Data,
    V2ObjectId,
    V2SchemaId,
)

from ._util import wait_until
from .test_v2records import KEY, SCHEMA

BROKER_PKG = "org.apache.qpid.broker"


# ---------------------------------------------------------------------------- bindings

class _Agent:
    """What v2_bindings reads of an agent."""

    def __init__(self, name: str) -> None:
        self.name = name


def test_interests_become_subject_patterns_and_agent_selectors() -> None:
    names = {("agent-x",): "acme.com:app:one"}

    def name_of(who: Any) -> str | None:
        return names.get((who.name,)) if isinstance(who, _Agent) else None

    got = v2_bindings([Interest("data", BROKER_PKG, "queue"), Interest("event"),
                       Interest("data", package="com.acme"),
                       Interest("data", agent=_Agent("agent-x")),  # type: ignore[arg-type]
                       Interest("event", agent=_Agent("unknown"))],  # type: ignore[arg-type]
                      [], name_of)
    # the one agent's data overlaps both classes' data: over AMQP 1.0 two bindings that
    # match one message deliver it twice, so the three become one
    assert got == [
        ("agent.ind.heartbeat.#", None),
        ("agent.ind.data.#", None),
        ("agent.ind.event.#", None),
    ]
    # without the agent, the class and the package bind apart: nothing matches both
    got = v2_bindings([Interest("data", BROKER_PKG, "queue"), Interest("event", agent=_Agent(
        "agent-x")), Interest("data", package="com.acme")], [], name_of)  # type: ignore[arg-type]
    assert got == [
        ("agent.ind.heartbeat.#", None),
        ("agent.ind.data.org_apache_qpid_broker.queue.#", None),
        ("agent.ind.event.#", "qmf.agent = 'acme.com:app:one'"),
        ("agent.ind.data.com_acme.#", None),
    ]


@pytest.mark.parametrize("interests", [
    [("data", BROKER_PKG, "queue", None), ("data", None, None, "a:b:one")],
    [("data", None, "queue", None), ("data", BROKER_PKG, None, None)],
    [("event", BROKER_PKG, "queueDeclare", "a:b:one"), ("event", None, None, "a:b:two"),
     ("event", BROKER_PKG, None, None)],
    [("data", BROKER_PKG, "queue", "a:b:one"), ("data", BROKER_PKG, "queue", "a:b:two"),
     ("data", "com.acme", None, None)],
])
def test_no_message_matches_two_bindings(interests: list[tuple[Any, ...]]) -> None:
    agents = {name: _Agent(name) for *_, name in interests if name}
    got = v2_bindings([Interest(kind, package, cls, agents[name] if name else None)
                       for kind, package, cls, name in interests],  # type: ignore[arg-type]
                      [], lambda who: who.name if isinstance(who, _Agent) else None)
    subjects = [f"agent.ind.{kind}.{keyify(pkg)}.{cls}.v.p.i"
                for kind in ("data", "event") for pkg in (BROKER_PKG, "com.acme", "x.y")
                for cls in ("queue", "queueDeclare", "exchange")]
    for subject in subjects:
        for agent in ("a:b:one", "a:b:two", "a:b:three"):
            matched = [b for b in got if _matches(b, subject, agent)]
            assert len(matched) <= 1, (subject, agent, matched)
    # and every interest is still served
    for kind, package, cls, name in interests:
        subject = f"agent.ind.{kind}.{keyify(package or 'any.pkg')}.{cls or 'any'}.v.p.i"
        assert any(_matches(b, subject, name or "a:b:three") for b in got), (subject, got)


def _matches(binding: tuple[str, str | None], subject: str, agent: str) -> bool:
    key, selector = binding
    if selector is not None and selector != f"qmf.agent = '{agent}'":
        return False
    words, parts = key.split("."), subject.split(".")
    for i, word in enumerate(words):
        if word == "#":
            return True
        if i >= len(parts) or word not in ("*", parts[i]):
            return False
    return len(words) == len(parts)


def test_a_class_without_a_package_matches_every_package_and_quotes_are_doubled() -> None:
    got = v2_bindings([Interest("event", class_name="queueDeclare"),
                       Interest("data", agent=_Agent("o'brien"))],  # type: ignore[arg-type]
                      [], lambda who: "v:p:o'brien" if isinstance(who, _Agent) else None)
    assert ("agent.ind.event.*.queueDeclare.#", None) in got
    assert ("agent.ind.data.#", "qmf.agent = 'v:p:o''brien'") in got


def test_v1_user_binding_keys_translate_to_v2_bindings() -> None:
    keys = ["console.obj.#", "console.event.*.*.org.apache.qpid.broker.queueDeclare",
            "console.obj.*.*.com.acme.#", "console.obj.1.7.#", "console.obj.1.9.#",
            "schema.#", "console.heartbeat.#"]
    got = v2_bindings([], keys, lambda banks: "a:b:c" if banks == (1, 7) else None)
    # everything of "data" covers the narrower data keys
    assert got == [
        ("agent.ind.heartbeat.#", None),
        ("agent.ind.data.#", None),
        ("agent.ind.event.org_apache_qpid_broker.queueDeclare.#", None),
    ]
    assert keyify("org.apache.qpid.broker") == "org_apache_qpid_broker"


def test_an_unknown_qmf_version_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="qmf_version"):
        Session(qmf_version=3)


# ---------------------------------------------------------------------------- conversion

# the class of tests/test_v2records.py, which checks the conversion itself; here the
# console's part: the ids remembered with their v2 ids, the schema looked up


class _Host:
    """The broker connection a V2Link drives, reduced to what conversion and a query
    read: it publishes into ``sent``, and a schema fetch never ends."""

    where = "test"
    _reply_queue = None
    _closing = False
    closing = False

    def __init__(self) -> None:
        self._agents: dict[tuple[int, int], Any] = {}
        self.session = type("S", (), {"schemas": SchemaRegistry([SCHEMA]),
                                      "options": SessionOptions()})()
        self.sent: list[Any] = []

    def check(self) -> None:
        return None

    async def publish(self, out: Any) -> None:
        self.sent.append(out)

    async def fetch_v1_schema(self, key: Any, timeout: float, agent: Any) -> Any:
        await asyncio.Event().wait()  # never answered


def _link(host: _Host) -> V2Link:
    """A link on ``host`` whose agent list and version choice are stand-ins."""
    from qmf_async.protocol import VersionChoice

    class Agents:
        def v2_arrived(self, agent: Any) -> None: ...

        def v2_left(self, banks: tuple[int, int]) -> None: ...

    return V2Link(host, agents=Agents(), beats=VersionChoice())  # type: ignore[arg-type]


async def test_closing_a_streamed_v2_query_stops_its_answer() -> None:
    """Closing the wait of a streamed v2 query (timed out, cancelled, done) forgets
    it in the core and stops its answer: the parts held for a schema being fetched
    are dropped and the task fetching it ends (on main, ``V2Link.discard`` popped
    the answer after ``_forget`` had, so ``answer.cancel()`` never ran)."""
    from qmf_async.console._objects import RemoteAgent
    from qmf_async.protocol import QueryPart

    host = _Host()
    link = _link(host)
    agent = RemoteAgent(host, 1, 5, "acme.com:app:one", "test",  # type: ignore[arg-type]
                        name="acme.com:app:one")
    got: list[Any] = []
    wait = await link.send_query(agent, {"_class": "widget", "_package": "com.acme"},
                                 got.append)
    (out,) = host.sent
    cid = out.correlation_id
    assert len(link.core) == 1 and cid in link._waits
    unknown = V2Data({"x": 1}, V2ObjectId("a:b:c"),
                     V2SchemaId("a", "b", "_data", uuid.uuid4().bytes))
    link._handle([QueryPart(cid, [unknown], "acme.com:app:one")])
    answer = wait.stream
    assert answer.backlog and answer.task is not None  # held for its schema
    task = answer.task
    wait.close()
    assert not answer.backlog and len(link.core) == 0 and len(link._waits) == 0
    await wait_until(task.done)
    assert wait.future.cancelled() and got == []


def _data(values: dict[str, Any], **kw: Any) -> V2Data:
    return V2Data(values, V2ObjectId("com.acme:widget:w1", "acme.com:app:one", 3),
                  V2SchemaId("com.acme", "widget", "_data", uuid.UUID(bytes=KEY.hash)), **kw)


def test_a_v2_object_becomes_a_record_of_its_v1_schema() -> None:
    link = _link(_Host())
    owner = {"_object_name": "com.acme:owner:o1"}
    rec = link.record(_data({"name": b"w1", "owner": owner, "size": 7, "tags": {"k": 1},
                             "hits": 12, "ratio": 0.5},
                            update_ts=30, create_ts=20, delete_ts=0), (0, 4))
    assert rec is not None and rec.opcode == "g"
    assert rec.timestamps == (30, 20, 0)
    assert rec.get("name") == "w1"  # qpidd's binary texts are text again
    assert rec.get("note") is None  # an absent optional property
    assert rec.get("size") == 7 and rec.get("tags") == {"k": 1}
    assert rec.get("hits") == 12 and rec.get("ratio") == 0.5
    # ids: the agent's banks and a digest of the v2 name, the same name the same id
    oid = rec.object_id
    assert oid.agent_key() == (0, 4)
    assert link.oids[oid.raw] == V2ObjectId("com.acme:widget:w1", "acme.com:app:one", 3)
    ref = rec.get("owner")
    assert isinstance(ref, ObjectId) and ref.agent_key() == (0, 4)
    assert link.oids[ref.raw].object_name == "com.acme:owner:o1"
    again = link.record(_data({"name": b"w1", "hits": 13}), (0, 4))
    assert again is not None and again.object_id == oid


def test_statistics_alone_make_an_i_record_and_properties_alone_a_c() -> None:
    link = _link(_Host())
    stats = link.record(_data({"hits": 5}), (0, 1))
    assert stats is not None and stats.opcode == "i"
    assert stats.get("hits") == 5 and not stats.has_properties
    props = link.record(_data({"name": "w1", "size": 2}), (0, 1))
    assert props is not None and props.opcode == "c"
    assert props.get("size") == 2 and props.get("owner") == ObjectId(bytes(16))
    assert not props.has_statistics


def test_values_that_do_not_fit_the_schema_raise_a_decode_error() -> None:
    link = _link(_Host())
    with pytest.raises(DecodeError, match="does not fit"):
        link.record(_data({"name": "w1", "size": "seven"}), (0, 1))
    with pytest.raises(DecodeError, match="reference"):
        link.record(_data({"name": "w1", "owner": 12}), (0, 1))
    with pytest.raises(DecodeError, match="object id or schema hash"):
        link.record(V2Data({"name": "w1"}), (0, 1))


def test_an_unknown_schema_gives_no_record() -> None:
    link = _link(_Host())
    other = V2Data({"x": 1}, V2ObjectId("a:b:c"), V2SchemaId("a", "b", "_data", bytes(16)))
    assert link.record(other, (0, 1)) is None


# ---------------------------------------------------------------------------- qpidd

def _name(what: str) -> str:
    return f"v2-{what}-{uuid.uuid4().hex[:8]}"


async def _broker(session: Session) -> QmfObject:
    (broker,) = await session.get_objects(_class="broker")
    return broker


@pytest.mark.qpidd
@pytest.mark.parametrize("which", ["stock", "v1"])
async def test_the_session_speaks_v2_to_qpidd_by_default(which: str, request: Any) -> None:
    qpidd = request.getfixturevalue("qpidd_stock" if which == "stock" else "qpidd_v1")
    async with Session.connect(qpidd.address) as session:
        b = session.brokers[0]
        assert (b.protocol, b.qmf_version) == ("1.0", 2)
        (agent,) = [a for a in session.get_agents() if a.name.startswith("apache.org:qpidd:")]
        assert (agent.broker_bank, agent.agent_bank, agent.qmf_version) == (1, 0, 2)
        broker = await _broker(session)
        assert broker.get_agent() == agent
        echoed = await broker.echo(5, "over v2")
        assert list(echoed.out_args.items()) == [("sequence", 5), ("body", "over v2")]
        name = _name("q")
        made = await broker.create("queue", name, {"qpid.max_count": 10}, False)
        assert made.status == 0
        try:
            (queue,) = await session.get_objects(_class="queue", name=name)
            assert (queue.name, queue.msgDepth, queue.durable) == (name, 0, False)
            assert queue.arguments == {"qpid.max_count": 10}
            # by object id, and a method on the queue object itself
            (same,) = await session.get_objects(_objectId=queue.get_object_id())
            assert same.name == name
            purged = await queue.purge(0)
            assert purged.status == 0
            with pytest.raises(MethodError, match="already exists") as err:
                await broker.create("queue", name, {}, True)
            assert err.value.status == 7
        finally:
            await broker.delete("queue", name, {})
        assert await session.get_objects(_class="queue", name=name) == []


@pytest.mark.qpidd
async def test_v1_and_v2_list_the_same_queues_with_the_same_values(qpidd_v1: Any) -> None:
    names = sorted(_name("same") for _ in range(3))
    async with Session.connect(qpidd_v1.url, qmf_version=1) as v1, \
            Session.connect(qpidd_v1.url, qmf_version=2) as v2:
        assert (v1.brokers[0].qmf_version, v2.brokers[0].qmf_version) == (1, 2)
        broker = await _broker(v1)
        for n in names:
            await broker.create("queue", n, {"qpid.max_size": 1000 + len(n)}, False)
        try:
            def view(objs: list[QmfObject]) -> dict[str, tuple[Any, ...]]:
                return {o.name: (o.durable, o.autoDelete, o.exclusive, o.arguments,
                                 o.msgDepth, o.msgTotalEnqueues, o.consumerCount)
                        for o in objs if o.name in names}
            over1 = view(await v1.get_objects(_class="queue"))
            over2 = view(await v2.get_objects(_class="queue"))
            assert sorted(over1) == names and over1 == over2
            s1 = await v1.get_schema(ClassKey.parse(
                str((await v1.get_objects(_class="queue", name=names[0]))[0]
                    .get_class_key())))
            q2 = (await v2.get_objects(_class="queue", name=names[0]))[0]
            assert q2.get_schema() == s1  # v2 objects carry the v1 schema (S fallback)
        finally:
            for n in names:
                await broker.delete("queue", n, {})


@pytest.mark.qpidd
async def test_events_and_object_updates_arrive_over_v2_from_a_stock_qpidd(
        qpidd_stock: Any) -> None:
    name = _name("ev")
    async with Session.connect(qpidd_stock.url) as session:
        b = session.brokers[0]
        declares = session.events(_class="queueDeclare")
        updates = session.object_updates(_class="queue")
        # the broker is asked to pass only what is followed; ready() waits for it
        await declares.ready()
        await updates.ready()
        assert set(b._v2.bindings) >= {("agent.ind.event.*.queueDeclare.#", None),
                                       ("agent.ind.data.*.queue.#", None)}
        assert not any(k.startswith("agent.ind.data.#") for k, _ in b._v2.bindings)
        broker = await _broker(session)
        await broker.create("queue", name, {}, False)
        deleted = False
        try:
            async def declared() -> Any:
                ev = await declares.get(timeout=10.0)
                return ev if ev.arguments.get("qName") == name else None
            ev = await wait_until(declared, timeout=15.0, message="queueDeclare event")
            assert ev.class_key.package == BROKER_PKG and ev.severity_name == "info"
            assert ev.agent is not None and ev.agent.name.startswith("apache.org:qpidd:")
            assert ev.schema is not None  # texts decoded by the v1 schema
            seen: list[Change] = []

            async def updated() -> bool:
                obj = await updates.get(timeout=10.0)
                assert obj.get_class_key().name == "queue"
                if obj.name == name:
                    seen.append(obj.get_changes())
                return bool(seen)
            await wait_until(updated, timeout=15.0, message="an update of the new queue")
            assert Change.PROPERTIES in seen[0] or Change.STATISTICS in seen[0]
            await broker.delete("queue", name, {})
            deleted = True

            async def gone() -> bool:
                obj = await updates.get(timeout=10.0)
                if obj.name == name:
                    seen.append(obj.get_changes())
                return Change.DELETED in seen[-1]
            await wait_until(gone, timeout=15.0, message="the deletion of the queue")
        finally:
            if not deleted:
                await broker.delete("queue", name, {})
        declares.close()
        updates.close()
        await wait_until(lambda: b._v2.bindings == [("agent.ind.heartbeat.#", None)],
                         timeout=5.0, message="bindings removed with the subscriptions")


@pytest.mark.qpidd
async def test_following_one_agent_asks_qpidd_for_a_selector(qpidd_stock: Any) -> None:
    async with Session.connect(qpidd_stock.url) as session:
        b = session.brokers[0]
        (agent,) = session.get_agents()
        updates = session.object_updates(_agent=agent, _class="broker")
        want = ("agent.ind.data.*.broker.#", f"qmf.agent = '{agent.name}'")
        await wait_until(lambda: want in b._v2.bindings, timeout=5.0, message="selector")
        obj = await updates.get(timeout=15.0)  # qpidd filtered at the source: it passes
        assert obj.get_class_key().name == "broker" and obj.get_agent() == agent
        updates.close()


@pytest.mark.qpidd
async def test_qmf_version_1_still_queries_a_stock_qpidd(qpidd_stock: Any) -> None:
    async with Session.connect(qpidd_stock.url, qmf_version=1) as session:
        assert session.brokers[0].qmf_version == 1
        broker = await _broker(session)
        assert broker.get_agent() is not None and broker.get_agent().name == ""
        assert (await broker.echo(1, "v1")).out_args["body"] == "v1"


@pytest.mark.qpidd
async def test_a_restart_of_qpidd_is_survived_over_v2(qpidd_fresh: Any) -> None:
    qpidd = qpidd_fresh(False)
    async with Session.connect(qpidd.url, manage_connections=True, reconnect_min_delay=0.1,
                               reconnect_max_delay=0.5) as session:
        first = (await _broker(session)).get_agent()
        left = session.agent_changes()
        await asyncio.to_thread(qpidd.restart)
        await wait_until(lambda: session.brokers[0].reconnects >= 1, timeout=20.0,
                         message="reconnected")
        broker = await _broker(session)
        assert (await broker.echo(2, "again")).out_args["body"] == "again"
        # the agent left with the connection and came back at the same banks
        assert broker.get_agent() == first
        changes = []
        while len(left):
            changes.append(await left.get(timeout=1.0))
        assert ("removed", first) in [(k, a) for k, a in changes]


# ---------------------------------------------------------------------------- _where

@pytest.mark.parametrize(("text", "where"), [
    ("name = 'a'", ["eq", "name", ["quote", "a"]]),
    ("'q' <> name", ["ne", "name", ["quote", "q"]]),
    ("durable = TRUE", ["eq", "durable", ["quote", True]]),
    # an AND keeps what translates: every match still satisfies it
    ("name = 'a' AND msgDepth > 5", ["eq", "name", ["quote", "a"]]),
    ("name = 'a' OR durable = FALSE",
     ["or", ["eq", "name", ["quote", "a"]], ["eq", "durable", ["quote", False]]]),
    ("name IN ('y', 'x')",
     ["or", ["eq", "name", ["quote", "x"]], ["eq", "name", ["quote", "y"]]]),
    ("x IS NULL", ["not", ["exists", "x"]]),
    ("x IS NOT NULL AND NOT y = 'a'", ["exists", "x"]),
    # what v2 agents evaluate unlike JMS is never sent
    ("msgDepth > 1", None),
    ("msgDepth > 1 OR name = 'z'", None),
    ("name LIKE 'q%'", None),
    ("name NOT IN ('a')", None),
    ("NOT name = 'a'", None),
])
def test_selectors_translate_to_where_predicates_only_where_safe(
        text: str, where: list[Any] | None) -> None:
    from qmf_async.protocol import compile_selector

    selector = compile_selector(text)
    assert selector is not None
    assert selector.qmf_where() == where


def test_a_query_predicate_joins_the_selector_and_the_equality_filters() -> None:
    from qmf_async.console._session import _where_predicate
    from qmf_async.protocol import compile_selector

    assert _where_predicate(None, {}) is None
    assert _where_predicate(None, {"msgDepth": 3}) is None  # numbers: left to the console
    assert _where_predicate(compile_selector("durable = TRUE"), {"name": "q1"}) == [
        "and", ["eq", "name", ["quote", "q1"]], ["eq", "durable", ["quote", True]]]


async def _send_v2(rogue: Any, msg: Any, subject: str) -> None:
    from qmf_async.wire import encode_v2
    headers, body, _cid = encode_v2(msg)
    await rogue.publish(body, exchange="qmf.default.topic", routing_key=subject,
                        headers=headers)


@pytest.mark.qpidd
async def test_malformed_v2_messages_are_counted_and_dropped(qpidd_stock: Any) -> None:
    from qmf_async.transport import NativeAmqp10Transport

    async with Session.connect(qpidd_stock.url) as session:
        updates = session.object_updates()
        b = session.brokers[0]
        await wait_until(lambda: ("agent.ind.data.#", None) in b._v2.bindings, timeout=5.0,
                         message="the data binding")
        rogue = NativeAmqp10Transport(qpidd_stock.url)
        await rogue.connect()
        try:
            headers = {"qmf.opcode": "_data_indication", "qmf.content": "_data",
                       "qmf.agent": "rogue:agent:1", "method": "indication"}
            # a body that is not a list of maps, and an object whose values are no map
            await rogue.publish({"not": "a list"}, exchange="qmf.default.topic",
                                routing_key="agent.ind.data.x.y.rogue", headers=headers)
            await rogue.publish([{"_values": 7}], exchange="qmf.default.topic",
                                routing_key="agent.ind.data.x.y.rogue", headers=headers)
        finally:
            await rogue.close()
        await wait_until(lambda: session.malformed >= 2, timeout=10.0,
                         message="both messages counted as malformed")
        # the session goes on: a query still answers
        (broker,) = await session.get_objects(_class="broker")
        assert (await broker.echo(9, "still here")).out_args["body"] == "still here"
        updates.close()


@pytest.mark.qpidd
async def test_an_agent_whose_schemas_cannot_be_fetched_delays_only_itself(
        qpidd_stock: Any) -> None:
    """Indications wait for schemas per agent: a v2 agent that never answers ``S``
    holds back its own objects, not qpidd's events."""
    import time as _time

    from qmf_async.transport import NativeAmqp10Transport
    from qmf_async.wire import V2AgentHeartbeat, V2DataIndication

    rogue_name = "rogue.org:silent:1"
    async with Session.connect(qpidd_stock.url, schema_timeout=8.0) as session:
        events = session.events(_class="queueDeclare")
        updates = session.object_updates()
        await events.ready()
        await updates.ready()
        rogue = NativeAmqp10Transport(qpidd_stock.url)
        await rogue.connect()
        try:
            await _send_v2(rogue, V2AgentHeartbeat(rogue_name, {
                "_timestamp": _time.time_ns(), "_heartbeat_interval": 10, "_epoch": 1}),
                "agent.ind.heartbeat.rogue_org.silent.1")
            await wait_until(lambda: rogue_name in [a.name for a in session.get_agents()],
                             timeout=10.0, message="the rogue agent")
            await wait_until(lambda: ("agent.ind.data.#", None) in session.brokers[0]
                             ._v2.bindings, timeout=5.0, message="the data binding")
            unknown = V2Data({"x": 1}, V2ObjectId("rogue:thing:1"),
                             V2SchemaId("rogue", "thing", "_data", uuid.uuid4()))
            await _send_v2(rogue, V2DataIndication([unknown], rogue_name),
                       "agent.ind.data.rogue.thing.rogue_org.silent.1")
            # the rogue's schema is being asked for (8 s); qpidd's events still flow
            qpidd = next(a for a in session.get_agents()
                         if a.name.startswith("apache.org:qpidd:"))
            (broker,) = await session.get_objects(_class="broker", _agent=qpidd)
            name = _name("hol")
            started = _time.monotonic()
            await broker.create("queue", name, {}, False)
            try:
                async def declared() -> bool:
                    ev = await events.get(timeout=10.0)
                    return ev.arguments.get("qName") == name
                await wait_until(declared, timeout=10.0, message="qpidd's event")
                assert _time.monotonic() - started < 5.0
                assert session.held_dropped == 0  # the rogue's object still waits
                # the fetch fails in the end: the rogue's object is dropped and counted
                await wait_until(lambda: session.held_dropped >= 1, timeout=20.0,
                                 message="the rogue's object dropped")
            finally:
                await broker.delete("queue", name, {})
        finally:
            await rogue.close()
        events.close()
        updates.close()


async def _queue_data_from_a_rogue(session: Session, rogue_name: str, queue: str
                                   ) -> tuple[Any, Any]:
    """A raw QMF v2 peer on the session's qpidd and a data indication of ``queue`` (of
    qpidd's own queue class) from ``rogue_name``, for the tests of agents not (yet)
    in the directory."""
    from qmf_async.transport import NativeAmqp10Transport
    from qmf_async.wire import V2DataIndication

    key = next(k for k in await session.get_classes("org.apache.qpid.broker")
               if k.name == "queue")
    await session.get_schema(key)  # the objects need no fetch: only their agent is late
    rogue = NativeAmqp10Transport(session.brokers[0].url)
    await rogue.connect()
    data = V2Data({"name": queue, "msgDepth": 3}, V2ObjectId(f"rogue:{queue}"),
                  V2SchemaId(key.package, key.name, "_data", uuid.UUID(bytes=key.hash)))
    return rogue, V2DataIndication([data], rogue_name)


@pytest.mark.qpidd
async def test_objects_that_come_before_their_agent_wait_for_it(qpidd_stock: Any) -> None:
    """An agent's data can be handled before its heartbeat (over AMQP 1.0 each binding
    is its own queue at qpidd, so their order is not kept), or while the agent was
    just aged out: the objects wait (a locate is sent) until the agent is known, then
    are delivered; nothing is dropped."""
    import time as _time

    from qmf_async.wire import V2AgentHeartbeat

    rogue_name = "rogue.org:late:1"
    queue = _name("late")
    async with Session.connect(qpidd_stock.url) as session:
        updates = session.object_updates(_class="queue")
        await updates.ready()
        link = session.brokers[0]._v2
        rogue, indication = await _queue_data_from_a_rogue(session, rogue_name, queue)
        try:
            await _send_v2(rogue, indication,
                           "agent.ind.data.org_apache_qpid_broker.queue.rogue_org.late.1")
            # handled and waiting for its agent (not dropped)
            await wait_until(lambda: (rogue_name, False) in link.held._agent_waits, timeout=10.0,
                             message="the object waits for its agent")
            assert session.held_dropped == 0
            await _send_v2(rogue, V2AgentHeartbeat(rogue_name, {
                "_timestamp": _time.time_ns(), "_heartbeat_interval": 10, "_epoch": 1}),
                "agent.ind.heartbeat.rogue_org.late.1")

            async def delivered() -> QmfObject | None:
                obj = await updates.get(timeout=10.0)
                return obj if obj.name == queue else None
            obj = await wait_until(delivered, timeout=15.0, message="the waiting object")
            assert obj.msgDepth == 3 and obj.get_agent().name == rogue_name
            assert session.held_dropped == 0 and not link.held._agent_waits
            # properties and statistics came together: nothing to complete
            assert session.completion_queries == 0
        finally:
            await rogue.close()
        updates.close()


@pytest.mark.qpidd
async def test_objects_whose_agent_never_comes_are_dropped_and_counted(
        qpidd_stock: Any) -> None:
    """The wait for an unknown agent lasts the session's ``timeout``: then its objects
    are dropped and counted in ``held_dropped``, and later ones wait afresh."""
    rogue_name = "rogue.org:never:1"
    async with Session(timeout=2.0) as session:
        await session.add_broker(qpidd_stock.url)
        updates = session.object_updates(_class="queue")
        await updates.ready()
        link = session.brokers[0]._v2
        rogue, indication = await _queue_data_from_a_rogue(session, rogue_name,
                                                          _name("never"))
        try:
            for _ in range(2):
                dropped = session.held_dropped
                await _send_v2(rogue, indication,
                               "agent.ind.data.org_apache_qpid_broker.queue.rogue_org.never.1")
                await wait_until(lambda: (rogue_name, False) in link.held._agent_waits,
                                 timeout=10.0, message="the object waits for its agent")
                await wait_until(lambda d=dropped: session.held_dropped == d + 1
                                 and not link.held._agent_waits, timeout=10.0,
                                 message="the object dropped and counted")
            assert not link.held.queues
        finally:
            await rogue.close()
        updates.close()


@pytest.mark.qpidd
async def test_proxies_from_before_a_reconnection_still_call_over_v2(qpidd_fresh: Any) -> None:
    qpidd = qpidd_fresh(False)
    async with Session.connect(qpidd.url, manage_connections=True, reconnect_min_delay=0.1,
                               reconnect_max_delay=0.5) as session:
        broker = await _broker(session)
        await asyncio.to_thread(qpidd.restart)
        await wait_until(lambda: session.brokers[0].reconnects >= 1
                         and session.brokers[0].connected, timeout=20.0, message="reconnected")
        await wait_until(lambda: any(a.agent_bank == 0 for a in session.get_agents()),
                         timeout=10.0, message="qpidd's agent again")
        # the proxy fetched before the restart: its v2 id is still known
        assert (await broker.echo(4, "after")).out_args["body"] == "after"


@pytest.mark.qpidd
async def test_bindings_follow_quick_subscription_changes(qpidd_stock: Any) -> None:
    async with Session.connect(qpidd_stock.url) as session:
        v2 = session.brokers[0]._v2
        assert v2 is not None
        queues = session.object_updates(_class="queue")
        subs = [session.events(_class=f"ev{i}") for i in range(5)]
        exchanges = session.object_updates(_class="exchange")
        for sub in subs:
            sub.close()
        queues.close()  # changes made and undone in one go: the last state wins
        want = [("agent.ind.heartbeat.#", None), ("agent.ind.data.*.exchange.#", None)]
        await wait_until(lambda: v2.bindings == want, timeout=10.0,
                         message=f"bindings {want}")
        exchanges.close()
        await wait_until(lambda: v2.bindings == want[:1], timeout=10.0,
                         message="only the heartbeats")


@pytest.mark.qpidd
async def test_a_console_set_after_connecting_receives_everything_over_v2(
        qpidd_stock: Any) -> None:
    from qmf_async import Console

    seen: list[Any] = []

    class Recorder(Console):
        def event(self, broker: Any, event: Any) -> None:
            seen.append(event)

    async with Session.connect(qpidd_stock.url) as session:
        v2 = session.brokers[0]._v2
        assert v2 is not None and v2.bindings == [("agent.ind.heartbeat.#", None)]
        session.console = Recorder()
        await wait_until(lambda: {("agent.ind.data.#", None), ("agent.ind.event.#", None)}
                         <= set(v2.bindings), timeout=10.0, message="the console's bindings")
        (broker,) = await session.get_objects(_class="broker")
        name = _name("console")
        await broker.create("queue", name, {}, False)
        try:
            await wait_until(lambda: any(e.arguments.get("qName") == name for e in seen),
                             timeout=15.0, message="the event through the console")
        finally:
            await broker.delete("queue", name, {})
        session.console = None
        await wait_until(lambda: v2.bindings == [("agent.ind.heartbeat.#", None)],
                         timeout=10.0, message="bindings back to heartbeats")

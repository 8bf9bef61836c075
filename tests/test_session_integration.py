"""The console Session against the real RabbitMQ, with the in-process management-broker
role (qmf_async.agent.broker) and the demo broker agent (examples/demo_agent.py).

``broker`` is one routing key per vhost: a role started by another test module (or
another test run) on the same vhost would answer our ``B`` and ``A`` too.  The module
therefore runs on a vhost of its own when rabbitmqctl can make one (local broker) and
otherwise on the shared vhost, where it filters what it observes by its own agents
(their banks and labels) and skips what needs to be alone on the bus.  Every test
starts its role, agents and sessions itself and stops them before it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import attrs
import pytest

from qmf_async import (
    AgentGoneError,
    ArgumentError,
    Broker,
    ClassKey,
    ConnectionLostError,
    Console,
    Event,
    MethodError,
    NotConnectedError,
    ObjectId,
    QmfObject,
    QueryTimeout,
    RemoteAgent,
    Session,
    TransportError,
    UsageError,
)
from qmf_async.agent import Agent
from qmf_async.agent.broker import ManagementBroker

from ._util import (
    cut_connection,
    drop_vhost,
    import_example,
    make_vhost,
    rabbitmqctl_output,
    vhost_url,
    wait_until,
)

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "org.apache.qpid.broker"
INTERVAL = 0.2  # demo agents and the role publish (and heartbeat) this often
SESSION_INTERVAL = 0.3  # what a session assumes before it measured an agent's interval
DEMO_QUEUES = {"orders", "invoices", "audit", "work-1"}


_import_example = import_example


demo = _import_example("demo_agent")
console_demo = _import_example("console_demo")


def _label(what: str) -> str:
    return f"session-it-{what}-{uuid.uuid4().hex[:8]}"


# --------------------------------------------------------------------------- the bus


_rabbitmqctl = rabbitmqctl_output


@attrs.frozen
class Bus:
    url: str
    #: the vhost is ours alone (no role or agent of other tests on it)
    isolated: bool
    vhost: str


@pytest.fixture(scope="module")
def bus(amqp_url: str) -> Iterator[Bus]:
    """``amqp_url`` on a temporary vhost of this module (deleted afterwards), or
    ``amqp_url`` itself when rabbitmqctl cannot make one for that broker."""
    parts = urlsplit(amqp_url)
    vhost = f"qmf-session-it-{uuid.uuid4().hex[:8]}"
    shared = Bus(amqp_url, False, unquote(parts.path[1:]) if len(parts.path) > 1 else "/")
    if not make_vhost(amqp_url, vhost):
        yield shared
        return
    try:
        yield Bus(vhost_url(amqp_url, vhost), True, vhost)
    finally:
        drop_vhost(amqp_url, vhost)


# --------------------------------------------------------------------------- parts


class Recorder(Console):
    """Records the callbacks a test looks at."""

    def __init__(self) -> None:
        self.connected: list[Broker] = []
        self.disconnected: list[Broker] = []
        self.infos: list[Broker] = []
        self.new_agents: list[RemoteAgent] = []
        self.del_agents: list[RemoteAgent] = []
        self.events: list[Event] = []

    def broker_connected(self, broker: Broker) -> None:
        self.connected.append(broker)

    def broker_disconnected(self, broker: Broker) -> Any:
        self.disconnected.append(broker)

    def broker_info(self, broker: Broker) -> None:
        self.infos.append(broker)

    def new_agent(self, agent: RemoteAgent) -> None:
        self.new_agents.append(agent)

    def del_agent(self, agent: RemoteAgent) -> None:
        self.del_agents.append(agent)

    def event(self, broker: Broker, event: Event) -> Any:
        self.events.append(event)


@contextlib.asynccontextmanager
async def running_role(bus: Bus, **options: Any) -> AsyncIterator[ManagementBroker]:
    options.setdefault("interval", INTERVAL)
    # the role ages agents out only after a long silence: the sessions do the ageing
    # the tests look at, and a loaded machine does not make agents vanish
    options.setdefault("agent_timeout", 3.0)
    role = ManagementBroker(bus.url, broker_id=uuid.uuid4(), label=_label("role"), **options)
    await role.start()
    try:
        yield role
    finally:
        await role.stop(2.0)


@contextlib.asynccontextmanager
async def running_demo(bus: Bus, label: str | None = None, **options: Any
                       ) -> AsyncIterator[tuple[Agent, Any]]:
    """A started demo agent (attaching to a role when one answers, unless attach=False)."""
    options.setdefault("interval", INTERVAL)
    agent, model = demo.build_demo_agent(bus.url, label=label or _label("demo"), queues=1,
                                         seed=3, attach_timeout=1.0, **options)
    await model.start()
    try:
        yield agent, model
    finally:
        await model.stop()


@contextlib.asynccontextmanager
async def open_session(bus: Bus, *brokers: int, **options: Any
                       ) -> AsyncIterator[tuple[Session, list[Broker]]]:
    """A session with ``brokers`` (default one) connections to the bus."""
    options.setdefault("agent_interval", SESSION_INTERVAL)
    # tolerant of a loaded machine (ageing tests ask for the classic 3)
    options.setdefault("missed_heartbeats", 10)
    options.setdefault("broker_timeout", 1.0)
    options.setdefault("timeout", 5.0)
    session = Session(**options)
    try:
        added = [await session.add_broker(bus.url, timeout=5.0) for _ in range(brokers[0]
                                                                                 if brokers else 1)]
        yield session, added
    finally:
        await session.close()


def remote(session: Session, agent: Agent, broker: Broker | None = None) -> RemoteAgent | None:
    """The session's view of ``agent`` (matched by banks), or None."""
    for a in session.get_agents(broker):
        if (a.broker_bank, a.agent_bank) == (agent.broker_bank, agent.agent_bank):
            return a
    return None


async def wait_for(session: Session, agent: Agent, broker: Broker | None = None,
                   timeout: float = 5.0) -> RemoteAgent:
    found = await wait_until(lambda: remote(session, agent, broker), timeout,
                             message=f"{agent.label} known to the session")
    assert isinstance(found, RemoteAgent)
    return found


@attrs.define
class Env:
    """Role + demo agent + one session, all running."""

    session: Session
    broker: Broker
    role: ManagementBroker
    agent: Agent
    model: Any
    remote: RemoteAgent
    recorder: Recorder

    async def the_broker(self) -> QmfObject:
        (b,) = await self.session.get_objects(_class="broker", _agent=self.remote)
        return b

    async def queue(self, name: str) -> QmfObject:
        (q,) = await self.session.get_objects(_class="queue", name=name, _agent=self.remote)
        return q


@contextlib.asynccontextmanager
async def managed_env(bus: Bus, **session_options: Any) -> AsyncIterator[Env]:
    recorder = session_options.pop("console", None) or Recorder()
    async with running_role(bus) as role, running_demo(bus) as (agent, model):
        assert agent.attached, "the demo agent did not attach to the role"
        async with open_session(bus, console=recorder, **session_options) as (session, (b,)):
            found = await wait_for(session, agent)
            yield Env(session, b, role, agent, model, found, recorder)


@pytest.fixture
async def env(bus: Bus) -> AsyncIterator[Env]:
    async with managed_env(bus) as e:
        yield e


# --------------------------------------------------------------------------- discovery


async def test_discovery_through_the_management_broker(bus: Bus) -> None:
    recorder = Recorder()
    label = _label("discovered")
    async with running_role(bus) as role, running_demo(bus, label) as (agent, _):
        assert agent.attached and agent.broker_bank == role.broker_bank
        async with open_session(bus, console=recorder) as (session, (b,)):
            assert b.connected and b.has_management
            assert b.broker_id == role.broker_id
            assert recorder.infos == [b] and recorder.connected == [b]
            found = await session.wait_for_agents(label=label, timeout=5.0)
            assert [(a.broker_bank, a.agent_bank) for a in found] \
                == [(agent.broker_bank, agent.agent_bank)]
            assert found[0].broker is b and found[0].key == agent.agent_key
            # the role's own agent (1.0) is listed too
            assert any((a.broker_bank, a.agent_bank) == (role.broker_bank, 0)
                       for a in session.get_agents(b))
            assert any(a == found[0] for a in recorder.new_agents)


async def test_discovery_by_heartbeats_without_a_management_broker(bus: Bus) -> None:
    async with running_demo(bus, attach=False) as (agent, _):
        assert not agent.attached
        async with open_session(bus, broker_timeout=0.5) as (session, (b,)):
            if b.has_management and not bus.isolated:
                pytest.skip("a management broker of another test answers on the shared vhost")
            assert b.connected and not b.has_management and b.broker_id is None
            await session.wait_for_agents(timeout=5.0)
            found = await wait_for(session, agent)
            assert found.key == agent.agent_key
            # the agent is asked directly: no management broker in between
            (obj,) = await session.get_objects(_class="broker", _agent=found)
            assert obj.name == "amqp-broker"
            assert obj.get_agent() == found and obj.get_broker() is b


# --------------------------------------------------------------------------- objects


async def test_get_objects_of_every_demo_class(env: Env) -> None:
    s, a = env.session, env.remote
    counts = {}
    for cls in ("broker", "vhost", "queue", "exchange", "binding"):
        objs = await s.get_objects(_class=cls, _agent=a)
        assert objs, cls
        for o in objs:
            assert o.get_class_key().package == PACKAGE and o.get_class_key().name == cls
            assert o.get_object_id().agent_key() == (a.broker_bank, a.agent_bank)
            assert o.get_agent() == a and o.get_broker() is env.broker
            assert not o.is_deleted()
        counts[cls] = len(objs)
    assert counts["broker"] == 1 and counts["vhost"] == 1
    queues = await s.get_objects(_class="queue", _package=PACKAGE, _agent=a)
    assert {q.name for q in queues} == DEMO_QUEUES
    exchanges = await s.get_objects(_class="exchange", _agent=a)
    assert {"", "amq.direct", "amq.topic", "amq.fanout"} <= {e.name for e in exchanges}
    # every queue has its binding to the default exchange, plus the demo's four
    assert counts["binding"] == len(DEMO_QUEUES) + 4
    (vhost,) = await s.get_objects(_class="vhost", _agent=a)
    assert vhost.name == "/"
    assert all(q.vhostRef == vhost.get_object_id() for q in queues)


async def test_get_objects_filters(env: Env) -> None:
    s, a = env.session, env.remote
    orders = await env.queue("orders")
    key = orders.get_class_key()
    assert isinstance(key, ClassKey)
    by_key = await s.get_objects(_key=key, _agent=a)
    assert {q.name for q in by_key} == DEMO_QUEUES
    assert {q.name for q in await s.get_objects(_key=str(key), _agent=a)} == DEMO_QUEUES
    oid = orders.get_object_id()
    (same,) = await s.get_objects(_objectId=oid)
    assert same.name == "orders" and same.get_object_id() == oid
    (same,) = await s.get_objects(_objectId=str(oid), _broker=env.broker)
    assert same.name == "orders"
    selected = await s.get_objects(_class="queue", _agent=a,
                                   where="msgDepth >= 0 AND name LIKE 'o%'")
    assert [q.name for q in selected] == ["orders"]
    selected = await s.get_objects(_class="queue", _agent=a, where="name IN ('audit', 'work-1')")
    assert sorted(q.name for q in selected) == ["audit", "work-1"]
    (invoices,) = await s.get_objects(_class="queue", _agent=a, name="invoices")
    assert invoices.name == "invoices" and invoices.durable is True
    assert await s.get_objects(_class="queue", _agent=a, name="no-such-queue") == []
    streamed = [q async for q in s.iter_objects(_class="queue", _agent=a)]
    assert sorted(q.name for q in streamed) == sorted(DEMO_QUEUES)
    assert all(isinstance(q, QmfObject) for q in streamed)


async def test_update_refreshes_statistics_and_deref_follows_references(env: Env) -> None:
    q = await env.queue("orders")
    enqueues = q.msgTotalEnqueues
    updated_at = q.get_timestamps()[0]

    async def grew() -> bool:
        await q.update(_timeout=2.0)
        return bool(q.msgTotalEnqueues > enqueues)

    await wait_until(grew, timeout=10.0, interval=INTERVAL, message="orders enqueues grew")
    assert q.get_timestamps()[0] > updated_at
    assert q.msgDepth == q.msgTotalEnqueues - q.msgTotalDequeues
    vhost = await q.deref("vhostRef")
    assert vhost is not None and vhost.get_class_key().name == "vhost"
    assert vhost.name == "/" and vhost.get_object_id() == q.vhostRef
    broker = await vhost.deref("brokerRef")
    assert broker is not None and broker.name == "amqp-broker"
    assert await q.deref("altExchange") is None  # a null reference


# --------------------------------------------------------------------------- methods


async def test_methods_succeed(env: Env) -> None:
    s, a = env.session, env.remote
    b = await env.the_broker()
    echo = await b.echo(7, "hello QMF")
    assert (echo.status, echo.text) == (0, "OK")
    assert echo.sequence == 7 and echo.body == "hello QMF"
    assert echo.out_args == {"sequence": 7, "body": "hello QMF"}
    assert (await b.invoke("echo", sequence=8, body="x")).sequence == 8
    level = await b.getLogLevel()
    await b.setLogLevel("debug+")
    assert (await b.getLogLevel()).level == "debug+" != level.level

    name = _label("q")
    await b.create("queue", name, {"durable": False}, False)
    (q,) = await s.get_objects(_class="queue", name=name, _agent=a)
    assert q.durable is False and q.msgDepth == 0
    env.model.paused = True  # no simulated traffic from here on
    await b.queueMoveMessages("orders", name, 0, {})
    await q.update()
    moved = q.msgDepth
    orders = await env.queue("orders")
    assert orders.msgDepth == 0
    assert (await q.purge(0)).status == 0
    await q.update()
    assert q.msgDepth == 0 and q.discardsPurge == moved
    await b.delete("queue", name, {})
    assert await s.get_objects(_class="queue", name=name, _agent=a) == []


async def test_method_errors_carry_the_agents_status(env: Env) -> None:
    b = await env.the_broker()
    with pytest.raises(MethodError) as info:
        await b.create("nosuchtype", "x", {}, False)
    assert info.value.status == 7 and "unknown object type" in info.value.text
    with pytest.raises(MethodError) as info:
        await b.setLogLevel("loud")
    assert info.value.status == 7 and "loud" in info.value.text
    with pytest.raises(MethodError) as info:
        await b.queueMoveMessages("no-such-queue", "orders", 1, {})
    assert info.value.status == 4
    with pytest.raises(MethodError) as info:
        await b.shutdown()  # in the schema, without a handler in the demo
    assert info.value.status == 3
    with pytest.raises(MethodError) as info:
        await b.delete("queue", "no-such-queue", {})
    assert info.value.status == 7 and "No such queue" in info.value.text
    # the session is still fine
    assert (await b.echo(1, "still here")).body == "still here"


async def test_bad_arguments_fail_before_sending(env: Env) -> None:
    b = await env.the_broker()
    with pytest.raises(ArgumentError):
        await b.echo("seven", "x")
    with pytest.raises(ArgumentError):
        await b.echo(-1, "x")  # uint32
    with pytest.raises(ArgumentError):
        await b.echo(1)  # missing body
    with pytest.raises(ArgumentError):
        await b.echo(1, "x", colour="red")
    with pytest.raises(ArgumentError):
        await b.create("queue", "x", ["not", "a", "map"], False)
    with pytest.raises(AttributeError):
        await b.noSuchMethod()
    assert (await b.echo(3, "fine")).sequence == 3


# --------------------------------------------------------------------------- events


async def test_events_subscription_receives_a_queue_declare(env: Env) -> None:
    s = env.session
    b = await env.the_broker()
    name = _label("evq")
    async with s.events(_class="queueDeclare", where=f"qName = '{name}'") as sub, \
            s.events(_package=PACKAGE, _class="queueDelete") as deletes:
        await b.create("queue", name, {"durable": True, "x-note": "n"}, False)
        ev = await sub.get(5.0)
        await b.delete("queue", name, {})
        gone = await deletes.get(5.0)
    assert ev.class_key.package == PACKAGE and ev.class_key.name == "queueDeclare"
    assert ev.arguments["qName"] == name and ev.arguments["durable"] is True
    assert ev.arguments["disp"] == "created" and ev.arguments["autoDel"] is False
    assert ev.arguments["args"] == {"durable": True, "x-note": "n"}
    assert ev.agent == env.remote
    assert ev.severity_name == "info" and ev.timestamp > 0
    text = str(ev)
    assert "\n" not in text and f"qName={name}" in text and "queueDeclare" in text
    assert gone.arguments["qName"] == name
    assert any(e.class_key.name == "queueDeclare" and e.arguments["qName"] == name
               for e in env.recorder.events)


# --------------------------------------------------------------------------- agents leaving


async def test_a_stopped_agent_is_aged_out(bus: Bus) -> None:
    async with managed_env(bus, missed_heartbeats=3) as env:
        s = env.session
        changes = s.agent_changes()
        gone = env.remote
        started = time.monotonic()
        await env.model.stop()

        async def removed() -> bool:
            while True:
                kind, agent = await changes.get(10.0)
                if kind == "removed" and agent == gone:
                    return True

        assert await asyncio.wait_for(removed(), 10.0)
        # a few heartbeat intervals (the role or the session's own ageing), not more
        assert time.monotonic() - started < 10 * max(INTERVAL, SESSION_INTERVAL)
        assert gone in env.recorder.del_agents
        assert remote(s, env.agent) is None
        asked = time.monotonic()
        with pytest.raises((AgentGoneError, NotConnectedError)):
            await s.get_objects(_class="queue", _agent=gone, _timeout=5.0)
        assert time.monotonic() - asked < 1.0
        changes.close()


async def test_a_pending_call_fails_when_its_agent_leaves(bus: Bus) -> None:
    async with managed_env(bus, missed_heartbeats=3) as env:
        called = asyncio.Event()

        async def hang(obj: Any, **args: Any) -> None:
            called.set()
            await asyncio.Event().wait()

        env.agent.set_method_handler("broker", "echo", hang)
        b = await env.the_broker()
        call = asyncio.ensure_future(b.echo(1, "never answered", _timeout=30.0))
        await asyncio.wait_for(called.wait(), 5.0)
        started = time.monotonic()
        await env.model.stop()
        with pytest.raises(AgentGoneError):
            await asyncio.wait_for(call, 10.0)
        assert time.monotonic() - started < 10 * max(INTERVAL, SESSION_INTERVAL)


async def test_a_silent_agent_gives_query_timeout_with_the_partial_result(bus: Bus) -> None:
    # no management broker: agents are found (and aged) by heartbeats only; the
    # session waits long before it ages an agent out, the query times out before
    async with running_demo(bus, attach=False) as (live, _), \
            running_demo(bus, attach=False) as (dying, dying_model):
        async with open_session(bus, broker_timeout=0.5, missed_heartbeats=25
                                ) as (session, (b,)):
            if b.has_management and not bus.isolated:
                pytest.skip("a management broker of another test answers on the shared vhost")
            live_r = await wait_for(session, live)
            dying_r = await wait_for(session, dying)
            await dying_model.stop()  # it stops answering, the session does not know yet
            started = time.monotonic()
            with pytest.raises(QueryTimeout) as info:
                await session.get_objects(_class="queue", _timeout=1.0)
            assert 1.0 <= time.monotonic() - started < 3.0
            mine = [q for q in info.value.partial if q.get_agent() == live_r]
            assert {q.name for q in mine} == DEMO_QUEUES
            assert not any(q.get_agent() == dying_r for q in info.value.partial)
            assert any(str(dying_r.agent_bank) in str(e) for e in info.value.errors)
            # the agent that still answers is fine on its own
            assert len(await session.get_objects(_class="queue", _agent=live_r)) \
                == len(DEMO_QUEUES)


# --------------------------------------------------------------------------- connection loss


async def _close_console_connection(bus: Bus, broker: Broker) -> bool:
    """Close the session's connection from the broker side (rabbitmqctl), or under the
    transport when rabbitmqctl cannot pick it out; True when the broker closed it."""
    if bus.isolated:
        listing = await _rabbitmqctl("list_connections", "pid", "vhost", "client_properties")
        if listing is not None:
            pids = [line.split("\t", 2)[0] for line in listing.splitlines()
                    if line.split("\t", 2)[1:2] == [bus.vhost]
                    and '"qmf-async console"' in line]
            if len(pids) == 1 and await _rabbitmqctl(
                    "close_connection", pids[0], "qmf-async test: forced close") is not None:
                return True
    transport = broker.transport
    await cut_connection(transport)
    return False


class Reconnecting(Recorder):
    """On a disconnect, tries a query at once (before any reconnect can finish)."""

    def __init__(self) -> None:
        super().__init__()
        self.session: Session | None = None
        self.while_down: list[tuple[BaseException | None, float]] = []

    async def broker_disconnected(self, broker: Broker) -> None:
        self.disconnected.append(broker)
        assert self.session is not None
        started = time.monotonic()
        try:
            await self.session.get_objects(_class="queue", _timeout=5.0)
        except Exception as exc:
            self.while_down.append((exc, time.monotonic() - started))
        else:
            self.while_down.append((None, time.monotonic() - started))


async def test_connection_loss_fails_pending_calls_and_reconnects(bus: Bus) -> None:
    recorder = Reconnecting()
    async with managed_env(bus, console=recorder, manage_connections=True,
                           reconnect_min_delay=0.1) as env:
        recorder.session = env.session
        called = asyncio.Event()

        async def slow(obj: Any, **args: Any) -> dict[str, Any]:
            called.set()
            await asyncio.sleep(30)
            return args

        env.agent.set_method_handler("broker", "echo", slow)
        b = await env.the_broker()
        call = asyncio.ensure_future(b.echo(1, "slow", _timeout=30.0))
        await asyncio.wait_for(called.wait(), 5.0)
        by_broker = await _close_console_connection(bus, env.broker)
        closed = time.monotonic()
        with pytest.raises(ConnectionLostError) as info:
            await asyncio.wait_for(call, 5.0)
        assert time.monotonic() - closed < 2.0
        assert info.value.__cause__ is not None
        if by_broker:
            assert "CONNECTION_FORCED" in str(info.value)
        await wait_until(lambda: recorder.while_down, message="broker_disconnected ran")
        error, took = recorder.while_down[0]
        assert isinstance(error, NotConnectedError) and took < 0.5
        assert recorder.disconnected == [env.broker]
        # reconnected by itself: broker_connected again, the agents found again
        await wait_until(lambda: len(recorder.connected) == 2, timeout=10.0,
                         message="reconnected")
        assert env.broker.connected and env.broker.reconnects == 1
        assert env.broker.has_management and env.broker.broker_id == env.role.broker_id
        again = await wait_for(env.session, env.agent)
        env.agent.set_method_handler("broker", "echo", env.model.echo)
        queues = await env.session.get_objects(_class="queue", _agent=again)
        assert {q.name for q in queues} == DEMO_QUEUES
        (b2,) = await env.session.get_objects(_class="broker", _agent=again)
        assert (await b2.echo(2, "back")).body == "back"


async def test_without_managed_connections_calls_fail_fast_after_a_loss(bus: Bus) -> None:
    async with managed_env(bus) as env:
        b = await env.the_broker()
        lost = env.broker.transport
        await cut_connection(lost)  # under the session
        await wait_until(lambda: not env.broker.connected, message="loss noticed")
        assert isinstance(env.broker.error, TransportError)
        started = time.monotonic()
        with pytest.raises(NotConnectedError):
            await env.session.get_objects(_class="queue", _timeout=5.0)
        with pytest.raises(NotConnectedError):
            await b.echo(1, "x", _timeout=5.0)
        assert time.monotonic() - started < 0.5
        assert env.session.get_agents(env.broker) == []


# --------------------------------------------------------------------------- several brokers


async def test_two_brokers_in_one_session(bus: Bus) -> None:
    async with running_role(bus) as role, running_demo(bus) as (agent, _):
        async with open_session(bus, 2) as (session, (b1, b2)):
            assert b1 is not b2 and session.brokers == [b1, b2]
            assert b1.broker_id == b2.broker_id == role.broker_id
            r1 = await wait_for(session, agent, b1)
            r2 = await wait_for(session, agent, b2)
            assert r1.broker is b1 and r2.broker is b2
            with pytest.raises(UsageError):
                await session.get_objects(_class="queue", _agent=r1, _broker=b2)
            queues = await session.get_objects(_class="queue")
            by_broker: dict[int, list[ObjectId]] = {id(b1): [], id(b2): []}
            for q in queues:
                if q.get_object_id().agent_key() == (agent.broker_bank, agent.agent_bank):
                    by_broker[id(q.get_broker())].append(q.get_object_id())
            ids1, ids2 = by_broker[id(b1)], by_broker[id(b2)]
            assert len(ids1) == len(set(ids1)) == len(DEMO_QUEUES)
            assert len(ids2) == len(set(ids2)) == len(DEMO_QUEUES)
            # the same agent, reached twice: the same 16 bytes, but each connection's
            # ids are its own (an object id carries its broker connection)
            assert {o.raw for o in ids1} == {o.raw for o in ids2}
            assert not set(ids1) & set(ids2)
            (q1,) = await session.get_objects(_class="queue", name="orders", _agent=r1)
            (q2,) = await session.get_objects(_class="queue", name="orders", _broker=b2,
                                              _agent=r2)
            assert q1.get_broker() is b1 and q2.get_broker() is b2 and q1 != q2
            assert (await q1.purge(1)).status == 0 and (await q2.purge(1)).status == 0
            await session.del_broker(b1)
            assert session.brokers == [b2]
            assert all(q.get_broker() is b2 for q in await session.get_objects(
                _class="queue", _agent=r2))


# --------------------------------------------------------------------------- topic loss


class Slow(Recorder):
    """A plain callback that holds the session's dispatcher on every event of ours."""

    def __init__(self, bank: tuple[int, int]) -> None:
        super().__init__()
        self.bank = bank

    def event(self, broker: Broker, event: Event) -> None:
        if event.agent is not None and (event.agent.broker_bank,
                                        event.agent.agent_bank) == self.bank:
            self.events.append(event)
            time.sleep(0.01)


async def test_a_slow_console_loses_events_and_counts_them(bus: Bus) -> None:
    async with running_demo(bus, attach=False) as (agent, model):
        model.paused = True  # after the burst only heartbeats follow (no c/i bodies)
        slow = Slow((agent.broker_bank, agent.agent_bank))
        async with open_session(bus, broker_timeout=0.3, console=slow, topic_max_length=5,
                                prefetch=1) as (session, (b,)):
            await wait_for(session, agent)
            agent.raise_event("queueDelete", package=PACKAGE, rhost="", user="u", qName="warm")
            await wait_until(lambda: slow.events, message="first event")  # schema known now
            assert b.topic_dropped == 0
            burst = 400
            for i in range(burst):
                agent.raise_event("queueDelete", package=PACKAGE, rhost="", user="u",
                                  qName=f"burst-{i}")
            await wait_until(lambda: b.topic_dropped > 0, timeout=15.0,
                             message="dead-lettered loss counted")
            # the queue drops its oldest messages: the newest event arrives
            last = f"burst-{burst - 1}"
            await wait_until(lambda: any(e.arguments["qName"] == last for e in slow.events),
                             timeout=15.0, message="last event of the burst")
            received = [e for e in slow.events if e.arguments["qName"].startswith("burst-")]
            assert len(received) < burst
            # every lost event is counted (the loss queue is another queue: poll)
            await wait_until(lambda: b.topic_dropped >= burst - len(received),
                             message="every lost event counted")
            # what did arrive kept its order
            numbers = [int(e.arguments["qName"].split("-")[1]) for e in received]
            assert numbers == sorted(numbers)


# --------------------------------------------------------------------------- console demo


async def test_the_console_demo_runs_to_completion(bus: Bus,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    if not bus.isolated:
        pytest.skip("the console demo expects to be alone on its vhost")
    async with running_role(bus) as role, running_demo(bus) as (agent, _):
        capsys.readouterr()
        assert await console_demo.main(bus.url, 2, 10.0, agent.label) == 0
    out = capsys.readouterr().out
    assert f"management broker: yes, id {role.broker_id}" in out
    assert f"'{agent.label}'" in out
    for name in DEMO_QUEUES:
        assert name in out
    assert "sequence=7 body='hello QMF'" in out
    assert "MethodError 7" in out
    events = [line for line in out.splitlines() if f"{PACKAGE}:queue" in line]
    assert len(events) == 2
    assert "queueDeclare" in events[0] and "queueDelete" in events[1]

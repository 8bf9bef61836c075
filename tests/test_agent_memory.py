"""The agent, the management-broker role and the peer runtime on the in-memory bus
(tests/memory_bus.py): no RabbitMQ, every wait polled with a deadline."""

from __future__ import annotations

import ast
import asyncio
import itertools
import logging
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import qmf_async.agent as agent_module
from qmf_async import wire
from qmf_async.agent import Agent, Arg, Property, Statistic, event_class, method, object_class
from qmf_async.agent.broker import AGENT_CLASS, ManagementBroker
from qmf_async.errors import QmfError, QmfTimeout
from qmf_async.protocol import V2_DIRECT_EXCHANGE, Outgoing
from qmf_async.runtime import PeerRuntime, RequestFutures
from qmf_async.transport import (
    MANAGEMENT_EXCHANGE,
    QMF_CONTENT_TYPE,
    Delivery,
    TransportProtocol,
    open_broadcast_endpoint,
    open_reply_endpoint,
)

from ._util import wait_until
from .memory_bus import MemoryBus, MemoryTransport, topic_matches

PKG = "org.example.memory"
WIDGET = object_class(
    PKG, "widget",
    properties=[Property("name", "sstr", index=True)],
    statistics=[Statistic("count", "uint32")],
    methods=[method("add", Arg("a", "uint32", direction="I"), Arg("b", "uint32", direction="I"),
                    Arg("sum", "uint64", direction="O"))],
)
TICK = event_class(PKG, "tick", [Arg("n", "uint32")])
URL = "amqp://guest:guest@memory:5672/test"


class Peer:
    """A bare test peer on the bus: a reply endpoint on ``amq.direct`` under its own
    name, bound on ``qpid.management`` to the given keys; decodes what it receives."""

    def __init__(self, bus: MemoryBus,
                 schemas: Sequence[wire.SchemaClass] = (WIDGET, AGENT_CLASS)) -> None:
        self.transport = bus.factory(URL, name="test-peer")
        self.registry = wire.SchemaRegistry(schemas)
        self.methods: dict[int, Any] = {}
        self.received: list[tuple[str, list[Any]]] = []  # (routing key, messages)
        self.endpoint = ""
        self._seq = itertools.count(1)

    async def open(self, bindings: Sequence[str] = ("console.#",)) -> Peer:
        t = self.transport
        await t.connect()
        t.set_dispatcher(self._on_delivery)
        await t.declare_management_exchange()
        self.endpoint = await open_reply_endpoint(t)
        for key in bindings:
            await t.bind(self.endpoint, MANAGEMENT_EXCHANGE, key)
        return self

    def _on_delivery(self, d: Delivery) -> None:
        self.received.append((d.routing_key, wire.decode(d.body, self.registry,
                                                         methods=self.methods)))

    async def send(self, routing_key: str, msg: Any) -> None:
        await self.transport.publish(wire.encode(msg, self.registry),
                                     exchange=MANAGEMENT_EXCHANGE, routing_key=routing_key,
                                     reply_to=self.endpoint)

    def seq(self) -> int:
        return next(self._seq)

    def answers(self, seq: int) -> list[Any]:
        return [m for key, msgs in self.received if key == self.endpoint
                for m in msgs if m.seq == seq]

    async def answer(self, seq: int, last: str = "z", timeout: float = 3.0) -> list[Any]:
        """Every answer to ``seq`` once one with opcode ``last`` arrived."""
        await wait_until(lambda: any(m.OPCODE == last for m in self.answers(seq)),
                         timeout=timeout, message=f"answer {last!r} to {seq}")
        return self.answers(seq)

    def on_key(self, prefix: str) -> list[Any]:
        return [m for key, msgs in self.received if key.startswith(prefix) for m in msgs]


@pytest.fixture
def bus() -> MemoryBus:
    return MemoryBus(URL)


@pytest.fixture
async def peer(bus: MemoryBus) -> AsyncIterator[Peer]:
    p = await Peer(bus).open()
    yield p
    await p.transport.close()


def _agent(bus: MemoryBus, **options: Any) -> Agent:
    kw: dict[str, Any] = dict(schemas=[WIDGET], attach=False, broker_bank=1, agent_bank=77,
                              interval=0.05, transport_factory=bus.as_factory())
    kw.update(options)
    agent = Agent(URL, **kw)

    @agent.method("widget", "add")
    def add(obj: Any, a: int, b: int) -> dict[str, int]:
        return {"sum": a + b}

    return agent


# --------------------------------------------------------------------------- the bus


def test_topic_matching_follows_amqp_rules() -> None:
    assert topic_matches("console.#", "console.obj.1.2.org.x.queue")
    assert topic_matches("console.#", "console")
    assert topic_matches("agent.*.*", "agent.1.5")
    assert not topic_matches("agent.*.*", "agent.1.5.6")
    assert topic_matches("#.heartbeat.#", "console.heartbeat.1.2")
    assert not topic_matches("schema.#", "schemas.class")
    assert topic_matches("broker", "broker") and not topic_matches("broker", "broker.x")


async def test_bus_caps_a_queue_by_dropping_the_oldest(bus: MemoryBus) -> None:
    t = bus.factory(URL, name="capped")
    await t.connect()
    await t.declare_management_exchange()
    ep = await open_broadcast_endpoint(t, ["k.#"], max_length=3)
    for i in range(5):
        await t.publish(bytes([i]), exchange=MANAGEMENT_EXCHANGE, routing_key=f"k.{i}")
    got: list[bytes] = []
    t.set_dispatcher(lambda d: got.append(d.body))  # deliveries waited for a dispatcher
    await wait_until(lambda: len(got) == 3, message="the three newest")
    assert got == [b"\x02", b"\x03", b"\x04"] and bus.queues[ep].dropped == 2
    await t.close()
    assert ep not in bus.queues


# --------------------------------------------------------------------------- the agent


async def test_agent_without_a_role_keeps_its_banks_and_heartbeats(
        bus: MemoryBus, peer: Peer) -> None:
    async with _agent(bus, attach=True, attach_timeout=0.1) as agent:
        assert not agent.attached and agent.agent_key == "agent.1.77"
        (transport,) = bus.open_transports("qmf-agent")
        assert isinstance(transport, MemoryTransport)
        await wait_until(lambda: len(peer.on_key("console.heartbeat.1.77")) >= 3,
                         message="three heartbeats")
        assert all(isinstance(m, wire.Heartbeat) for m in peer.on_key("console.heartbeat."))
        # the attach went to 'broker' with the agent's reply key; nobody answered
        (attach,) = bus.messages("broker")
        assert attach.reply_to is not None and attach.reply_to in transport.queues
    assert bus.open_transports() == [peer.transport] and bus.dispatch_errors == []


async def test_agent_answers_g_and_publishes_its_objects(bus: MemoryBus, peer: Peer) -> None:
    async with _agent(bus) as agent:
        w = agent.create_object("widget", name="w1")
        w.inc("count", 5)
        await wait_until(lambda: any(isinstance(m, wire.ObjectRecord) and m.OPCODE == "i"
                                     for m in peer.on_key("console.obj.1.77.")),
                         message="c/i published")
        seq = peer.seq()
        await peer.send(agent.agent_key, wire.GetQuery(seq, {"_class": "widget"}))
        (g, z) = await peer.answer(seq)
        assert (g.OPCODE, z.OPCODE, z.code) == ("g", "z", 0)
        assert g.object_id == w.object_id and g.properties == ("w1",) and g.statistics == (5,)


async def test_agent_calls_the_method_handler(bus: MemoryBus, peer: Peer) -> None:
    async with _agent(bus) as agent:
        w = agent.create_object("widget", name="w1")
        assert w.object_id is not None
        seq = peer.seq()
        peer.methods[seq] = (WIDGET, WIDGET.method("add"))
        await peer.send(agent.agent_key, wire.MethodRequest(seq, w.object_id, WIDGET.class_key,
                                                            "add", {"a": 2, "b": 40}))
        (m,) = await peer.answer(seq, last="m")
        assert (m.status, m.arguments) == (0, {"sum": 42})
        assert agent.stats["requests"] == 1 and agent.stats["published"] >= 1


async def test_agent_reconnects_and_publishes_everything_again(
        bus: MemoryBus, peer: Peer, caplog: pytest.LogCaptureFixture) -> None:
    async with _agent(bus, interval=10.0) as agent:
        w = agent.create_object("widget", name="w1")
        agent.publish_now()
        await wait_until(lambda: len(peer.on_key("console.obj.1.77.")) == 2, message="c and i")
        first = agent._transport
        with caplog.at_level(logging.INFO, logger="qmf_async"):
            assert bus.lose("qmf-agent") == 1
            await wait_until(lambda: agent._transport is not None and
                             agent._transport is not first and agent._transport.is_open,
                             message="reconnected")
        # the loss is the transport's warning to give: the agent adds INFO lines only
        assert [r.getMessage() for r in caplog.records if r.name == "qmf_async.agent"] == [
            "agent qmf-async-agent lost its broker connection: "
            "connection 'qmf-agent qmf-async-agent' to the memory bus lost",
            "agent qmf-async-agent reconnected"]
        assert all(r.levelno == logging.INFO for r in caplog.records
                   if r.name == "qmf_async.agent")
        # re-published (c and i) and re-announced without waiting for the interval
        await wait_until(lambda: len(peer.on_key("console.obj.1.77.")) == 4, message="again")
        assert [m.object_id for m in peer.on_key("console.obj.1.77.")] == [w.object_id] * 4
        await wait_until(lambda: len(bus.messages("schema.class")) == 2,
                         message="the class announced again")


async def test_agent_sends_v1_and_v2_through_one_bounded_queue(bus: MemoryBus) -> None:
    """Everything the agent sends, QMF v1 and v2, waits in its runtime's one queue:
    ``max_outgoing`` bounds both versions together (there is no second queue)."""
    async with _agent(bus, schemas=[WIDGET, TICK], interval=3600.0, max_outgoing=4) as agent:
        assert agent.v2_live  # the memory bus let the agent declare the v2 exchanges
        await wait_until(agent._outgoing.empty, message="the start's messages sent")
        before = agent.stats["dropped"]
        for n in range(10):  # without yielding: nothing is sent meanwhile
            agent.raise_event("tick", n=n)  # one v1 ``e`` and one v2 indication each
        assert agent.stats["dropped"] - before == 2 * 10 - 4
        await wait_until(agent._outgoing.empty, message="the four queued sent")
        sent = bus.messages("console.event.") + bus.messages("agent.ind.event.")
        assert len(sent) == 4


async def test_agent_marks_what_it_sends_by_one_content_type_rule(
        bus: MemoryBus, peer: Peer) -> None:
    """A request (the ``A``) is marked ``x-application/qmf``; answers and publications
    are not, v1 and v2 alike: an ``s`` goes out the same whether its ``S`` came over v1
    or to the agent's v2 address (as the classic console asks); a v2 map is the
    transport's ``amqp/map``."""
    async with _agent(bus, attach=True, attach_timeout=0.1) as agent:
        assert agent.v2_live and agent.v2_name is not None
        first, second = peer.seq(), peer.seq()
        await peer.send(agent.agent_key, wire.SchemaRequest(first, WIDGET.class_key))
        await peer.transport.publish(
            wire.encode(wire.SchemaRequest(second, WIDGET.class_key), peer.registry),
            exchange=V2_DIRECT_EXCHANGE, routing_key=agent.v2_name, reply_to=peer.endpoint)
        for seq in (first, second):
            (answer,) = await peer.answer(seq, last="s")
            assert answer.schema == WIDGET
        await wait_until(lambda: bus.messages("agent.ind.heartbeat.")
                         and bus.messages("console.heartbeat."), message="both heartbeats")
    (attach,) = bus.messages("broker")
    assert attach.content_type == QMF_CONTENT_TYPE
    answers = [s for s in bus.messages(peer.endpoint) if s.sender.startswith("qmf-agent")]
    assert [s.content_type for s in answers] == [None, None]
    assert {s.content_type for s in bus.messages("console.") + bus.messages("schema.")} == {None}
    assert {s.content_type for s in bus.messages("agent.ind.")} == {"amqp/map"}


async def test_agent_start_fails_when_the_bus_refuses(bus: MemoryBus) -> None:
    bus.refuse_connects = 1
    agent = _agent(bus)
    with pytest.raises(QmfError, match="refused"):
        await agent.start()
    assert bus.open_transports() == []


# --------------------------------------------------------------------------- the role


@pytest.fixture
async def role(bus: MemoryBus) -> AsyncIterator[ManagementBroker]:
    async with ManagementBroker(URL, interval=0.1, first_agent_bank=10, request_timeout=1.0,
                                transport_factory=bus.as_factory()) as mb:
        yield mb


async def test_role_answers_b_and_announces_itself(
        bus: MemoryBus, role: ManagementBroker, peer: Peer) -> None:
    seq = peer.seq()
    await peer.send("broker", wire.BrokerRequest(seq))
    (b,) = await peer.answer(seq, last="b")
    assert b.broker_id == role.broker_id
    # its own agent (bank 1.0) heartbeats like any agent
    await wait_until(lambda: peer.on_key("console.heartbeat.1.0"), message="role heartbeat")
    assert bus.dispatch_errors == []


async def test_role_assigns_banks_and_learns_the_schema(
        bus: MemoryBus, role: ManagementBroker, peer: Peer) -> None:
    async with _agent(bus, attach=True, attach_timeout=2.0, agent_bank=None,
                      label="first") as a1, \
            _agent(bus, attach=True, attach_timeout=2.0, agent_bank=None,
                   label="second") as a2:
        assert (a1.attached, a2.attached) == (True, True)
        assert sorted([a1.agent_bank, a2.agent_bank]) == [10, 11]
        await wait_until(lambda: all(i.learned for i in role.agents()) and
                         len(role.agents()) == 2, message="both agents learned")
        assert WIDGET.class_key in role.registry
        assert {i.label for i in role.agents()} == {"first", "second"}
        # the role serves the agents' schema on 'broker' and lists them as agent objects
        seq = peer.seq()
        await peer.send("broker", wire.SchemaRequest(seq, WIDGET.class_key))
        (s,) = await peer.answer(seq, last="s")
        assert s.schema.class_key == WIDGET.class_key
        seq = peer.seq()
        await peer.send(role.agent_key, wire.GetQuery(seq, {"_class": "agent"}))
        answer = await peer.answer(seq)
        labels = {r.properties[1] for r in answer if r.OPCODE == "g"}
        assert labels == {"first", "second"}
    assert role.stats["attaches"] == 2 and bus.dispatch_errors == []


async def test_role_fails_its_pending_requests_when_the_connection_drops(
        bus: MemoryBus, role: ManagementBroker) -> None:
    ask = asyncio.create_task(role._ask("agent.1.999", wire.PackageQuery))
    await wait_until(lambda: len(role._correlator) == 1, message="request pending")
    bus.lose("qmf-broker")
    with pytest.raises(Exception, match="no answer") as info:
        await asyncio.wait_for(ask, 2.0)
    assert isinstance(info.value.__cause__, QmfError)
    assert len(role._correlator) == 0
    await wait_until(lambda: role._transport is not None and role._transport.is_open,
                     message="role reconnected")


# --------------------------------------------------------------------------- runtime


async def test_runtime_bounds_its_send_queue_and_counts_the_drops(bus: MemoryBus) -> None:
    setups: list[str] = []

    async def setup(transport: TransportProtocol, endpoint: str) -> None:
        setups.append(endpoint)

    rt = PeerRuntime(URL, dispatch=lambda d: None, setup=setup, max_outgoing=2,
                     transport_factory=bus.as_factory(), name="rt", prefetch=7)
    await rt.connect()
    assert setups == [rt.endpoint]
    (transport,) = bus.open_transports("rt")
    assert transport.prefetch == 7 and transport.name == "rt"
    sent = [rt.enqueue(Outgoing(MANAGEMENT_EXCHANGE, "k", bytes([i]))) for i in range(4)]
    assert sent == [True, True, False, False] and rt.stats["dropped"] == 2
    rt.run()
    assert await rt.flush(2.0)
    assert rt.stats["published"] == 2 and [s.body for s in bus.messages("k")] == [b"\0", b"\1"]
    await rt.stop()
    assert not rt.is_open and bus.open_transports() == []


async def test_runtime_reconnects_with_backoff_after_failed_attempts(
        bus: MemoryBus, caplog: pytest.LogCaptureFixture) -> None:
    reconnected = asyncio.Event()

    async def setup(transport: TransportProtocol, endpoint: str) -> None:
        return None

    rt = PeerRuntime(URL, dispatch=lambda d: None, setup=setup, name="rt",
                     transport_factory=bus.as_factory(), min_delay=0.01, max_delay=0.05,
                     on_reconnected=reconnected.set, what="test peer")
    await rt.connect()
    rt.run()
    bus.refuse_connects = 3
    with caplog.at_level(logging.INFO, logger="qmf_async.runtime"):
        bus.lose("rt")
        await asyncio.wait_for(reconnected.wait(), 5.0)
    assert rt.is_open and bus.connects == 5  # first, three refused, the fourth
    failures = [r for r in caplog.records if "reconnect failed" in r.getMessage()]
    assert len(failures) == 3
    await rt.stop()


async def test_correlator_collects_until_complete_and_times_out() -> None:
    c: RequestFutures[Any] = RequestFutures(first=0xFFFFFFFF)
    seq = c.next_seq()
    assert seq == 0xFFFFFFFF and c.next_seq() == 0  # wraps within 32 bits
    c.expect(seq, lambda m: m == "z")
    assert c.feed(seq, "a") and c.feed(seq, "z") and not c.feed(12345, "x")
    assert await c.wait(seq, 1.0) == ["a", "z"] and len(c) == 0
    seq = c.next_seq()
    c.expect(seq)
    with pytest.raises(QmfTimeout):
        await c.wait(seq, 0.01)
    assert len(c) == 0
    seq = c.next_seq()
    c.expect(seq)
    waiting = asyncio.create_task(c.wait(seq, 5.0))
    await asyncio.sleep(0)
    c.fail_all(QmfError("gone"))
    with pytest.raises(QmfError, match="gone"):
        await waiting
    assert len(c) == 0



# --------------------------------------------------------------------------- layout


def _imported_modules(path: Path) -> set[str]:
    """Relative imports of a module (``._agent`` -> ``_agent``), TYPE_CHECKING ones too."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            found.update([node.module] if node.module else [a.name for a in node.names])
    return found


def test_agent_and_its_objects_do_not_import_each_other() -> None:
    agent_pkg = Path(agent_module.__file__).parent
    assert "_agent" not in _imported_modules(agent_pkg / "_objects.py")
    assert "_objects" in _imported_modules(agent_pkg / "_agent.py")
    # the role's command is apart from the role: the role never imports it
    assert "_role_cli" not in _imported_modules(agent_pkg / "_role.py")

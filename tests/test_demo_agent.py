"""The demo broker agent (examples/demo_agent.py) against the real RabbitMQ, spoken to
as a QMF console with the transport and the wire codec."""

from __future__ import annotations

import asyncio
import itertools
import os
import pathlib
import signal
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest

from qmf_async import SchemaClass, wire
from qmf_async.agent import load_schema_xml
from qmf_async.transport._aiormq import Delivery, Transport

from ._util import import_example, wait_until

pytestmark = pytest.mark.integration

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = "org.apache.qpid.broker"
INTERVAL = 0.2
EXTRA_QUEUES = 2


def _import_demo() -> Any:
    return import_example("demo_agent")


demo = _import_demo()


class Console:
    """A minimal v1 console: a reply endpoint on amq.direct and a topic endpoint."""

    def __init__(self, url: str, agent_key: str, bank: tuple[int, int]) -> None:
        self.url = url
        self.agent_key = agent_key
        self.bank = f".{bank[0]}.{bank[1]}."
        # the agent's classes have deterministic hashes: the console knows them up front
        self.registry = wire.SchemaRegistry(load_schema_xml(demo.SCHEMA_PATH))
        self.transport = Transport(url, name="test-demo-console")
        self.seq = itertools.count(1000)
        self.replies: dict[int, list[wire.Message]] = {}
        self.methods: dict[int, tuple[SchemaClass, Any]] = {}
        self.records: list[wire.ObjectRecord] = []
        self.events: list[wire.EventIndication] = []
        self.reply_key = ""

    async def open(self) -> None:
        t = self.transport
        await t.connect(10.0)
        t.set_dispatcher(self._dispatch)
        await t.declare_management_exchange()
        self.reply_key = await t.open_endpoint(None)
        await t.bind(self.reply_key, "amq.direct", self.reply_key)
        await t.open_endpoint(None, bindings=[("qpid.management", "console.#"),
                                              ("qpid.management", "schema.#")])

    async def close(self) -> None:
        await self.transport.close()

    def _dispatch(self, d: Delivery) -> None:
        if d.endpoint == self.reply_key:
            replies = wire.decode(d.body, self.registry, methods=self.methods)
            self.registry.learn(replies)
            for msg in replies:
                self.replies.setdefault(msg.seq, []).append(msg)
        elif self.bank in d.routing_key and not d.routing_key.startswith("console.heartbeat"):
            # only our agent's publications: other tests' agents share the bus
            for msg in wire.decode(d.body, self.registry):
                if isinstance(msg, wire.ObjectRecord):
                    self.records.append(msg)
                elif isinstance(msg, wire.EventIndication):
                    self.events.append(msg)

    async def request(self, msg: wire.Message) -> None:
        await self.transport.publish(wire.encode(msg, self.registry), exchange="qpid.management",
                                     routing_key=self.agent_key, reply_to=self.reply_key)

    async def get(self, **query: Any) -> list[wire.ObjectRecord]:
        seq = next(self.seq)
        await self.request(wire.GetQuery(seq, query))
        await wait_until(lambda: any(m.OPCODE == "z" for m in self.replies.get(seq, ())),
                         message=f"z for G {query}")
        replies = self.replies.pop(seq)
        assert replies[-1] == wire.CommandComplete(seq), replies[-1]
        return [m for m in replies if isinstance(m, wire.ObjectRecord)]

    async def objects(self, cls: str) -> dict[str, wire.ObjectRecord]:
        """Live objects of ``cls`` by their first index property."""
        out = {}
        for record in await self.get(_class=cls, _package=PACKAGE):
            props = record.properties_dict()
            key = props.get("name", props.get("bindingKey"))
            out[str(key) if cls != "binding" else str(record.object_id)] = record
        return out

    async def call(self, record: wire.ObjectRecord, method: str, /, **args: Any
                   ) -> wire.MethodResponse:
        seq = next(self.seq)
        schema = record.schema
        self.methods[seq] = (schema, schema.method(method))
        await self.request(wire.MethodRequest(seq, record.object_id, schema.class_key, method,
                                              args))
        await wait_until(lambda: seq in self.replies, message=f"reply to {method}")
        (reply,) = self.replies.pop(seq)
        assert isinstance(reply, wire.MethodResponse)
        return reply

    async def event(self, name: str, **match: Any) -> wire.EventIndication:
        def found() -> wire.EventIndication | None:
            for e in self.events:
                if e.class_key.name == name and all(e.arguments.get(k) == v
                                                    for k, v in match.items()):
                    return e
            return None
        return await wait_until(found, message=f"event {name} {match}")


@pytest.fixture
async def running(amqp_url: str) -> AsyncIterator[tuple[Any, Console]]:
    agent, broker = demo.build_demo_agent(amqp_url, interval=INTERVAL, queues=EXTRA_QUEUES,
                                          label="test-demo", attach=False, seed=7)
    await broker.start()
    console = Console(amqp_url, agent.agent_key, (agent.broker_bank, agent.agent_bank))
    try:
        await console.open()
        yield broker, console
    finally:
        await console.close()
        await broker.stop()


async def the_broker(console: Console) -> wire.ObjectRecord:
    (record,) = (await console.objects("broker")).values()
    return record


async def test_get_by_class_returns_the_model(running: tuple[Any, Console]) -> None:
    _, console = running
    (b,) = (await console.objects("broker")).values()
    assert b.properties_dict()["name"] == "amqp-broker"
    assert b.properties_dict()["port"] == 5672
    assert b.properties_dict()["version"] == "qmf-async-demo"
    vhosts = await console.objects("vhost")
    assert list(vhosts) == ["/"]
    assert vhosts["/"].properties_dict()["brokerRef"] == b.object_id
    exchanges = await console.objects("exchange")
    assert {n: r.properties_dict()["type"] for n, r in exchanges.items()} == {
        "": "direct", "amq.direct": "direct", "amq.topic": "topic", "amq.fanout": "fanout"}
    queues = await console.objects("queue")
    assert set(queues) == {"orders", "invoices", "audit", "work-1", "work-2"}
    assert all(q.properties_dict()["vhostRef"] == vhosts["/"].object_id
               for q in queues.values())
    bindings = await console.objects("binding")
    by_oid = {r.object_id: n for n, r in {**exchanges, **queues}.items()}
    triples = {(by_oid[r.properties_dict()["exchangeRef"]], by_oid[r.properties_dict()["queueRef"]],
                r.properties_dict()["bindingKey"]) for r in bindings.values()}
    assert triples == {("", q, q) for q in queues} | set(demo.DEMO_BINDINGS)
    # the agent serves the schema the console knows (same hash)
    seq = next(console.seq)
    key = queues["orders"].class_key
    await console.request(wire.SchemaRequest(seq, key))
    await wait_until(lambda: seq in console.replies)
    (reply,) = console.replies.pop(seq)
    assert isinstance(reply, wire.SchemaResponse) and reply.schema == console.registry.get(key)


async def test_echo_returns_its_arguments(running: tuple[Any, Console]) -> None:
    _, console = running
    reply = await console.call(await the_broker(console), "echo", sequence=7, body="hi there")
    assert (reply.status, reply.text) == (0, "OK")
    assert reply.arguments == {"sequence": 7, "body": "hi there"}


async def test_create_and_delete_a_queue(running: tuple[Any, Console]) -> None:
    _, console = running
    b = await the_broker(console)
    reply = await console.call(b, "create", type="queue", name="t-created",
                               properties={"auto_delete": False, "durable": True}, strict=False)
    assert (reply.status, reply.text) == (0, "OK")
    declared = await console.event("queueDeclare", qName="t-created")
    assert declared.severity == 6
    assert declared.arguments["durable"] is True and declared.arguments["disp"] == "created"
    assert declared.arguments["args"] == {"auto_delete": False, "durable": True}
    queues = await console.objects("queue")
    created = queues["t-created"]
    assert created.properties_dict()["arguments"] == {"auto_delete": False}
    again = await console.call(b, "create", type="queue", name="t-created", properties={},
                               strict=False)
    assert (again.status, again.text) == (7, "object already exists: t-created")

    reply = await console.call(b, "delete", type="queue", name="t-created", options={})
    assert (reply.status, reply.text) == (0, "OK")
    await console.event("queueDelete", qName="t-created")
    gone = await wait_until(lambda: [r for r in console.records if r.opcode == "c"
                                     and r.object_id == created.object_id and r.deleted],
                            message="the deleted queue published with its delete time")
    assert gone[0].deleted >= gone[0].created > 0
    assert "t-created" not in await console.objects("queue")
    missing = await console.call(b, "delete", type="queue", name="t-created", options={})
    assert (missing.status, missing.text) == (
        7, "not-found: Delete failed. No such queue: t-created")


async def test_create_and_delete_a_binding(running: tuple[Any, Console]) -> None:
    _, console = running
    b = await the_broker(console)
    reply = await console.call(b, "create", type="binding", name="amq.direct/orders/k1",
                               properties={}, strict=False)
    assert reply.status == 0, reply.text
    await console.event("bind", exName="amq.direct", qName="orders", key="k1")
    keys = {r.properties_dict()["bindingKey"] for r in (await console.objects("binding")).values()}
    assert "k1" in keys
    reply = await console.call(b, "delete", type="binding", name="amq.direct/orders/k1",
                               options={})
    assert reply.status == 0, reply.text
    await console.event("unbind", exName="amq.direct", qName="orders", key="k1")
    bad = await console.call(b, "create", type="binding", name="amq.direct/nope/k",
                             properties={}, strict=False)
    assert (bad.status, bad.text) == (7, "not-found: Bind failed. No such queue: nope")


async def test_failures_use_qpidd_status_codes(running: tuple[Any, Console]) -> None:
    _, console = running
    b = await the_broker(console)
    bad_type = await console.call(b, "create", type="nosuchtype", name="x", properties={},
                                  strict=False)
    assert (bad_type.status, bad_type.text) == (7, "unknown object type: nosuchtype")
    bad_level = await console.call(b, "setLogLevel", level="garbage!!:::")
    assert (bad_level.status, bad_level.text) == (7, "Invalid log level name: garbage!!")
    ok = await console.call(b, "setLogLevel", level="info+, debug+:management")
    assert ok.status == 0, ok.text
    level = await console.call(b, "getLogLevel")
    assert level.arguments == {"level": "info+,debug+:management"}
    unimplemented = await console.call(b, "shutdown")
    assert unimplemented.status == 3


async def test_purge_move_and_query(running: tuple[Any, Console]) -> None:
    broker, console = running
    b = await the_broker(console)

    async def depth(name: str) -> int:
        return int((await console.objects("queue"))[name].statistics_dict()["msgDepth"])

    await wait_until(lambda: len(broker.queues["orders"].messages) >= 3, timeout=10,
                     message="traffic filled orders")
    broker.paused = True  # freeze the simulated traffic
    await asyncio.sleep(0)
    before = (await console.objects("queue"))["orders"].statistics_dict()
    assert before["msgDepth"] == before["msgTotalEnqueues"] - before["msgTotalDequeues"] >= 3

    queue = (await console.objects("queue"))["orders"]
    reply = await console.call(queue, "purge", request=1, filter={})
    assert reply.status == 0, reply.text
    assert await depth("orders") == before["msgDepth"] - 1

    audit_before = await depth("audit")
    reply = await console.call(b, "queueMoveMessages", srcQueue="orders", destQueue="audit",
                               qty=1, filter={})
    assert reply.status == 0, reply.text
    assert await depth("orders") == before["msgDepth"] - 2
    assert await depth("audit") == audit_before + 1
    missing = await console.call(b, "queueMoveMessages", srcQueue="nope", destQueue="audit",
                                 qty=0, filter={})
    assert missing.status == 4

    query = await console.call(b, "query", type="queue", name="orders")
    assert query.status == 0, query.text
    results = query.arguments["results"]
    assert results["name"] == "orders" and results["msgDepth"] == before["msgDepth"] - 2

    reply = await console.call(queue, "purge", request=0, filter={})
    assert reply.status == 0, reply.text
    after = (await console.objects("queue"))["orders"].statistics_dict()
    assert after["msgDepth"] == 0 and after["byteDepth"] == 0
    assert after["discardsPurge"] == before["discardsPurge"] + before["msgDepth"] - 1
    assert after["msgTotalDequeues"] == after["msgTotalEnqueues"]


async def test_statistics_change_between_publications(running: tuple[Any, Console]) -> None:
    _, console = running
    orders = (await console.objects("queue"))["orders"].object_id

    def orders_stats() -> list[dict[str, Any]]:
        return [r.statistics_dict() for r in console.records
                if r.opcode == "i" and r.object_id == orders]

    await wait_until(lambda: len({s["msgTotalEnqueues"] for s in orders_stats()}) >= 2,
                     timeout=10,
                     message="two periodic i publications of orders with different statistics")
    series = orders_stats()
    for earlier, later in itertools.pairwise(series):
        for counter in ("msgTotalEnqueues", "msgTotalDequeues", "byteTotalEnqueues",
                        "byteTotalDequeues"):
            assert later[counter] >= earlier[counter]
    for s in series:
        assert s["msgDepth"] == s["msgTotalEnqueues"] - s["msgTotalDequeues"] >= 0
        assert s["byteDepth"] == s["byteTotalEnqueues"] - s["byteTotalDequeues"] >= 0


async def test_the_script_runs_until_sigterm(amqp_url: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(ROOT / "examples" / "demo_agent.py"), "--url", amqp_url,
        "--interval", "0.2", "--queues", "1", "--label", "test-demo-script", "--no-attach",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env)
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 15)).decode()
        assert line.startswith("demo agent 'test-demo-script' ready: banks 1."), line
        assert "4 exchanges, 4 queues" in line, line
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.wait(), 10)
        assert proc.returncode == 0, (await proc.stderr.read()).decode() if proc.stderr else ""
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()

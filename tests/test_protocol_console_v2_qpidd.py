"""The v2 console core driven against a stock qpidd (QMF v2 only) over AMQP 1.0: what
it builds is what qpidd accepts (the ``broker`` alias and the agent's own name as
subject), and what qpidd answers becomes the events the unit tests expect."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from qmf_async.protocol import (
    AgentArrived,
    ConsoleProtocolV2,
    Event,
    Outgoing,
    QueryDone,
    Reply,
    RequestExpired,
    texts_from_schema,
)
from qmf_async.transport import Delivery, NativeAmqp10Transport, Transport, open_reply_endpoint
from qmf_async.wire import (
    QmfType,
    SchemaArgument,
    SchemaMethod,
    V2Exception,
    V2MethodResponse,
    V2ObjectId,
    V2SchemaId,
)

from ._util import wait_until

BROKER_OID = V2ObjectId("org.apache.qpid.broker:broker:amqp-broker")


class Driver:
    """The smallest driver: publish what the core builds, feed it what arrives."""

    def __init__(self, transport: Transport, core: ConsoleProtocolV2) -> None:
        self.t = transport
        self.core = core
        self.events: list[Event] = []
        self.reply = ""

    def on_delivery(self, d: Delivery) -> None:
        self.events.extend(self.core.receive(d.headers, d.value, subject=d.routing_key,
                                             correlation_id=d.correlation_id,
                                             now=time.monotonic()))

    async def send(self, out: Outgoing) -> str:
        await self.t.publish(out.body, exchange=out.exchange, routing_key=out.key,
                             reply_to=self.reply, correlation_id=out.correlation_id,
                             headers=out.headers)
        assert out.correlation_id is not None
        return out.correlation_id

    async def answer(self, cid: str, timeout: float = 10.0) -> Any:
        def find() -> Any:
            for ev in self.events:
                if getattr(ev, "request", None) == cid:
                    return ev
            return None
        return await wait_until(find, timeout=timeout, message=f"the answer to {cid}")


@pytest.mark.qpidd
async def test_the_core_against_a_stock_qpidd(qpidd_stock: Any) -> None:
    t: Transport = NativeAmqp10Transport(qpidd_stock.url)
    await t.connect()
    core = ConsoleProtocolV2()
    drv = Driver(t, core)
    prefix = f"v2core-{uuid.uuid4().hex[:8]}"
    queues = [f"{prefix}-{i:03d}" for i in range(130)]
    try:
        t.set_dispatcher(drv.on_delivery)
        drv.reply = await open_reply_endpoint(t)
        # locate: qpidd's agent answers under its own name
        loc = await drv.send(core.send_locate(time.monotonic(),
                                              deadline=time.monotonic() + 1.0))
        arrived = await wait_until(
            lambda: [e for e in drv.events if isinstance(e, AgentArrived)],
            timeout=10.0, message="qpidd's locate answer")
        name = arrived[0].agent
        assert name.startswith("apache.org:qpidd:") and arrived[0].product == "qpidd"
        expired: list[RequestExpired] = await wait_until(
            lambda: core.expired(time.monotonic()), timeout=5.0, message="the locate end")
        assert expired == [RequestExpired(loc, "locate", [name])]

        # methods, addressed by the agent's own name
        for q in queues:
            cid = await drv.send(core.send_method(
                name, BROKER_OID, "create",
                {"type": "queue", "name": q, "properties": {}, "strict": True}))
            ev = await drv.answer(cid)
            assert isinstance(ev, Reply) and isinstance(ev.message, V2MethodResponse), ev
        bad = await drv.send(core.send_method(None, BROKER_OID, "create",
                                              {"type": "no-such-type", "name": "x",
                                               "properties": {}, "strict": True}))
        failed = await drv.answer(bad)
        assert isinstance(failed, Reply) and isinstance(failed.message, V2Exception)
        assert failed.message.error_code == 7
        echo = SchemaMethod("echo", [SchemaArgument("sequence", QmfType.UINT32, direction="IO"),
                                     SchemaArgument("body", QmfType.LSTR, direction="IO")])
        cid = await drv.send(core.send_method(None, BROKER_OID, "echo",
                                              {"sequence": 3, "body": "hi"}))
        ev = await drv.answer(cid)
        assert isinstance(ev, Reply) and isinstance(ev.message, V2MethodResponse)
        assert texts_from_schema(ev.message.arguments, echo) == {"sequence": 3, "body": "hi"}

        # a query answered in several parts, to the alias and to the full name
        for agent, agent_in_answer in ((None, "broker"), (name, name)):
            cid = await drv.send(core.send_query(agent, schema_id=V2SchemaId("", "queue")))
            ev = await drv.answer(cid)
            assert isinstance(ev, QueryDone) and ev.agent == agent_in_answer
            seen = [bytes(i.values["name"]).decode() for i in ev.items]
            assert len(seen) > 100 and len(seen) == len(set(seen))
            assert set(queues) <= set(seen)
        assert len(core) == 0 and core.dropped == 0 and core.malformed == 0
    finally:
        for q in queues:
            out = core.send_method(None, BROKER_OID, "delete", {"type": "queue", "name": q})
            try:
                await drv.send(out)
            except Exception:
                break
        if drv.reply:
            await wait_until(lambda: len(core) == 0, timeout=10.0,
                             message="the cleanup answers")
        await t.close()

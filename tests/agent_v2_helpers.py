"""What the QMF v2 agent tests share: a counter agent and a driver of the v2
console core (:class:`~qmf_async.protocol.ConsoleProtocolV2`) over any transport."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from qmf_async.agent import (
    Agent,
    Arg,
    ManagedObject,
    Property,
    Statistic,
    event_class,
    method,
    object_class,
)
from qmf_async.protocol import (
    AgentArrived,
    ConsoleProtocolV2,
    Event,
    EventReceived,
    ObjectUpdate,
    Outgoing,
    QueryDone,
    Reply,
    texts_from_schema,
)
from qmf_async.transport import Delivery, Transport, open_reply_endpoint
from qmf_async.wire import V2Exception, V2MethodResponse, V2SchemaId

from ._util import wait_until

PKG = "org.qmfasync.v2test"
COUNTER = object_class(
    PKG, "counter",
    properties=[Property("name", "sstr", index=True)],
    statistics=[Statistic("count", "uint64")],
    methods=[method("add", Arg("amount", "uint32", direction="I"),
                    Arg("total", "uint64", direction="O")),
             method("reset", Arg("previous", "uint64", direction="O")),
             method("absorb", Arg("other", "objId", direction="I"),
                    Arg("total", "uint64", direction="O"))],
)
RESET = event_class(PKG, "counterReset", [Arg("name", "sstr"), Arg("previous", "uint64")])


@contextlib.asynccontextmanager
async def counter_agent(url: str, *, versions: tuple[int, ...] = (2,), interval: float = 1.0,
                        transport: Any = None) -> AsyncIterator[Agent]:
    """An agent serving two counters (``add`` and ``reset``; ``reset`` raises
    ``counterReset``)."""
    label = f"v2test-{uuid.uuid4().hex[:8]}"
    agent = Agent(url, label=label, schemas=[COUNTER, RESET], interval=interval,
                  transport_factory=transport, qmf_versions=versions)
    agent.create_object("counter", name="ticks", count=0)
    agent.create_object("counter", name="tocks", count=100)

    @agent.method("counter", "add")
    async def add(obj: ManagedObject, amount: int) -> dict[str, int]:
        obj.inc("count", amount)
        return {"total": obj["count"]}

    @agent.method("counter", "reset")
    def reset(obj: ManagedObject) -> dict[str, int]:
        previous = obj["count"]
        obj.set(count=0)
        agent.raise_event("counterReset", name=obj["name"], previous=previous)
        return {"previous": previous}

    @agent.method("counter", "absorb")
    def absorb(obj: ManagedObject, other: Any) -> dict[str, int]:
        source = agent.find_object(other)  # an ObjectId: the agent resolved the reference
        assert source is not None, other
        obj.inc("count", source["count"])
        return {"total": obj["count"]}

    async with agent:
        yield agent


def count_of(agent: Agent, name: str) -> int:
    return int(next(o for o in agent.objects("counter") if o["name"] == name)["count"])


class Driver:
    """Publish what the v2 console core builds, feed it what arrives."""

    def __init__(self, transport: Transport) -> None:
        self.t = transport
        self.core = ConsoleProtocolV2()
        self.events: list[Event] = []
        self.reply = ""

    async def open(self, *bindings: tuple[str, str]) -> None:
        self.t.set_dispatcher(self.on_delivery)
        self.reply = await open_reply_endpoint(self.t)
        for exchange, key in bindings:
            await self.t.bind(self.reply, exchange, key)

    def on_delivery(self, d: Delivery) -> None:
        self.events.extend(self.core.receive(d.headers, d.value, body=d.body,
                                             content_type=d.content_type,
                                             subject=d.routing_key,
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
            return next((e for e in self.events if getattr(e, "request", None) == cid), None)
        return await wait_until(find, timeout=timeout, message=f"the answer to {cid}")


async def console_sees_the_agent(driver: Driver, agent: Agent) -> None:
    """The v2 console core's view of ``agent``: located, queried, called, events."""
    name = agent.v2_name
    assert name is not None
    await driver.send(driver.core.send_locate(time.monotonic()))
    await wait_until(lambda: any(isinstance(e, AgentArrived) and e.agent == name
                                 for e in driver.events),
                     timeout=10.0, message="the agent's locate answer or heartbeat")
    info = driver.core.agents[name]
    assert (info.vendor, info.product, info.epoch) == ("qmf-async", agent.label, 1)
    # objects of the class, then one by its object id
    cid = await driver.send(driver.core.send_query(name, schema_id=V2SchemaId(PKG, "counter")))
    ev = await driver.answer(cid)
    assert isinstance(ev, QueryDone) and ev.agent == name
    ev_items = ev.items
    values = {texts_from_schema(d.values, COUNTER)["name"]: d.values["count"] for d in ev.items}
    assert values == {"ticks": 0, "tocks": 100}
    ticks = next(d for d in ev.items if texts_from_schema(d.values, COUNTER)["name"] == "ticks")
    assert ticks.object_id is not None
    assert ticks.object_id.object_name == f"{PKG}:counter:ticks"
    cid = await driver.send(driver.core.send_query(name, object_id=ticks.object_id))
    ev = await driver.answer(cid)
    assert isinstance(ev, QueryDone) and [d.object_id for d in ev.items] == [
        ticks.object_id]
    # methods: an answer, then an exception for an unknown method
    cid = await driver.send(driver.core.send_method(name, ticks.object_id, "add",
                                                    {"amount": 5}))
    ev = await driver.answer(cid)
    assert isinstance(ev, Reply) and isinstance(ev.message, V2MethodResponse) \
        and ev.message.arguments == {"total": 5}
    assert count_of(agent, "ticks") == 5
    cid = await driver.send(driver.core.send_method(name, ticks.object_id, "nope", {}))
    ev = await driver.answer(cid)
    assert isinstance(ev, Reply) and isinstance(ev.message, V2Exception)
    assert ev.message.error_code == 2 and "nope" in ev.message.error_text
    # an event raised by the handler of reset
    cid = await driver.send(driver.core.send_method(name, ticks.object_id, "reset", {}))
    ev = await driver.answer(cid)
    assert isinstance(ev, Reply) and isinstance(ev.message, V2MethodResponse) \
        and ev.message.arguments == {"previous": 5}
    event = await wait_until(
        lambda: next((e for e in driver.events
                      if isinstance(e, EventReceived) and e.agent == name), None),
        timeout=10.0, message="the counterReset event")
    assert event.message.schema_id.class_name == "counterReset"
    assert event.message.schema_id.package == PKG and event.message.severity == 6
    assert texts_from_schema(event.message.values, RESET) == {"name": "ticks", "previous": 5}
    # the changed counter comes in a data indication
    await wait_until(lambda: any(isinstance(e, ObjectUpdate) and any(
        texts_from_schema(d.values, COUNTER).get("name") == "ticks" and d.values["count"] == 0
        for d in e.items) for e in driver.events), timeout=10.0, message="a data indication")
    # a reference argument: the v2 object id of another counter
    tocks = next(d for d in ev_items if texts_from_schema(d.values, COUNTER)["name"] == "tocks")
    assert tocks.object_id is not None
    cid = await driver.send(driver.core.send_method(name, ticks.object_id, "absorb",
                                                    {"other": tocks.object_id.to_map()}))
    ev = await driver.answer(cid)
    assert isinstance(ev, Reply) and isinstance(ev.message, V2MethodResponse) \
        and ev.message.arguments == {"total": 100}
    assert count_of(agent, "ticks") == 100

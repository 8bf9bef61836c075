"""The project's agent speaking QMF v2 to a genuine qpidd over AMQP 1.0.

On a stock qpidd (QMF v2 only) and with v1 on too: the project's v2 console core
finds the agent, lists its objects and calls its methods; the classic
``qpid-printevents`` (QMF v2 over AMQP 0-10) prints an event the agent raises; the
classic ``qmf.console`` lists the agent's objects with their values and calls a
method (it asks the schema with a v1 ``S`` to the agent's v2 address).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from qmf_async.agent import Agent, Arg, ManagedObject, Property, Statistic, event_class, method
from qmf_async.agent import object_class
from qmf_async.protocol import (
    AgentArrivedV2,
    ConsoleProtocolV2,
    DataIndicated,
    EventIndicated,
    EventV2,
    MethodAnswered,
    MethodFailed,
    OutgoingV2,
    QueryAnswered,
    texts_from_schema,
)
from qmf_async.transport import Delivery, Transport, open_reply_endpoint
from qmf_async.wire import V2SchemaId

from ._util import wait_until
from .qpidd import ROOT, Qpidd

proton = pytest.importorskip("proton")
from qmf_async.transport._proton import ProtonTransport  # noqa: E402

pytestmark = pytest.mark.qpidd

PKG = "org.qmfasync.v2test"
COUNTER = object_class(
    PKG, "counter",
    properties=[Property("name", "sstr", index=True)],
    statistics=[Statistic("count", "uint64")],
    methods=[method("add", Arg("amount", "uint32", direction="I"),
                    Arg("total", "uint64", direction="O")),
             method("reset", Arg("previous", "uint64", direction="O"))],
)
RESET = event_class(PKG, "counterReset", [Arg("name", "sstr"), Arg("previous", "uint64")])
TOOLS = ROOT.parent / "shared" / "classic-tools"


@contextlib.asynccontextmanager
async def counter_agent(url: str, *, versions: tuple[int, ...] = (2,), interval: float = 1.0,
                        transport: Any = ProtonTransport) -> AsyncIterator[Agent]:
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

    async with agent:
        yield agent


def _count(agent: Agent, name: str) -> int:
    return int(next(o for o in agent.objects("counter") if o["name"] == name)["count"])


class Driver:
    """Publish what the v2 console core builds, feed it what arrives."""

    def __init__(self, transport: Transport) -> None:
        self.t = transport
        self.core = ConsoleProtocolV2()
        self.events: list[EventV2] = []
        self.reply = ""

    async def open(self, *bindings: tuple[str, str]) -> None:
        self.t.set_dispatcher(self.on_delivery)
        self.reply = await open_reply_endpoint(self.t)
        for exchange, key in bindings:
            await self.t.bind(self.reply, exchange, key)

    def on_delivery(self, d: Delivery) -> None:
        self.events.extend(self.core.receive(d.headers, d.value, subject=d.routing_key,
                                             correlation_id=d.correlation_id,
                                             now=time.monotonic()))

    async def send(self, out: OutgoingV2) -> str:
        await self.t.publish(out.body, exchange=out.exchange, routing_key=out.subject,
                             reply_to=self.reply, correlation_id=out.correlation_id,
                             headers=out.headers)
        return out.correlation_id

    async def answer(self, cid: str, timeout: float = 10.0) -> Any:
        def find() -> Any:
            return next((e for e in self.events if getattr(e, "cid", None) == cid), None)
        return await wait_until(find, timeout=timeout, message=f"the answer to {cid}")


async def _console_sees_the_agent(driver: Driver, agent: Agent) -> None:
    """The v2 console core's view of ``agent``: located, queried, called, events."""
    name = agent.v2_name
    assert name is not None
    await driver.send(driver.core.send_locate(time.monotonic()))
    await wait_until(lambda: any(isinstance(e, AgentArrivedV2) and e.name == name
                                 for e in driver.events),
                     timeout=10.0, message="the agent's locate answer or heartbeat")
    info = driver.core.agents[name]
    assert (info.vendor, info.product, info.epoch) == ("qmf-async", agent.label, 1)
    # objects of the class, then one by its object id
    cid = await driver.send(driver.core.send_query(name, schema_id=V2SchemaId(PKG, "counter")))
    ev = await driver.answer(cid)
    assert isinstance(ev, QueryAnswered) and ev.agent == name
    values = {texts_from_schema(d.values, COUNTER)["name"]: d.values["count"] for d in ev.items}
    assert values == {"ticks": 0, "tocks": 100}
    ticks = next(d for d in ev.items if texts_from_schema(d.values, COUNTER)["name"] == "ticks")
    assert ticks.object_id is not None
    assert ticks.object_id.object_name == f"{PKG}:counter:ticks"
    cid = await driver.send(driver.core.send_query(name, object_id=ticks.object_id))
    ev = await driver.answer(cid)
    assert isinstance(ev, QueryAnswered) and [d.object_id for d in ev.items] == [
        ticks.object_id]
    # methods: an answer, then an exception for an unknown method
    cid = await driver.send(driver.core.send_method(name, ticks.object_id, "add",
                                                    {"amount": 5}))
    ev = await driver.answer(cid)
    assert isinstance(ev, MethodAnswered) and ev.arguments == {"total": 5}
    assert _count(agent, "ticks") == 5
    cid = await driver.send(driver.core.send_method(name, ticks.object_id, "nope", {}))
    ev = await driver.answer(cid)
    assert isinstance(ev, MethodFailed) and ev.code == 2 and "nope" in ev.text
    # an event raised by the handler of reset
    cid = await driver.send(driver.core.send_method(name, ticks.object_id, "reset", {}))
    ev = await driver.answer(cid)
    assert isinstance(ev, MethodAnswered) and ev.arguments == {"previous": 5}
    event = await wait_until(
        lambda: next((e for e in driver.events
                      if isinstance(e, EventIndicated) and e.agent == name), None),
        timeout=10.0, message="the counterReset event")
    assert event.event.schema_id.class_name == "counterReset"
    assert event.event.schema_id.package == PKG and event.event.severity == 6
    assert texts_from_schema(event.event.values, RESET) == {"name": "ticks", "previous": 5}
    # the changed counter comes in a data indication
    await wait_until(lambda: any(isinstance(e, DataIndicated) and any(
        texts_from_schema(d.values, COUNTER).get("name") == "ticks" and d.values["count"] == 0
        for d in e.items) for e in driver.events), timeout=10.0, message="a data indication")


@pytest.mark.parametrize("v1", [False, True], ids=["stock-v2-only", "qmf1-on"])
async def test_the_v2_console_core_finds_queries_and_calls_the_agent(
        v1: bool, request: pytest.FixtureRequest) -> None:
    broker: Qpidd = request.getfixturevalue("qpidd_v1" if v1 else "qpidd_stock")
    versions = (1, 2) if v1 else (2,)
    async with counter_agent(broker.url, versions=versions) as agent:
        assert agent.v2_live
        t = ProtonTransport(broker.url)
        await t.connect()
        try:
            driver = Driver(t)
            await driver.open(("qmf.default.topic", "agent.ind.#"))
            await _console_sees_the_agent(driver, agent)
            assert driver.core.malformed == 0
        finally:
            await t.close()


# --------------------------------------------------------------------------- classic tools

#: a classic ``qmf.console`` session (Python 2.7) that finds the agent by its v2 name,
#: lists its counters with their values and calls ``add`` on ``ticks``; one line per
#: result, parsed by the test
CLASSIC_CONSOLE = textwrap.dedent("""\
    import sys, time
    from qmf.console import Session
    url, name, package = sys.argv[1:4]
    session = Session()
    broker = session.addBroker(url)
    try:
        agent = None
        deadline = time.time() + 20
        while agent is None and time.time() < deadline:
            for a in session.getAgents():
                if a.getAgentBank() == name:
                    agent = a
            time.sleep(0.1)
        if agent is None:
            print("NOAGENT %s" % [a.getAgentBank() for a in session.getAgents()])
            sys.exit(1)
        print("AGENT %s v2=%s" % (agent.getAgentBank(), agent.isV2))
        objs = session.getObjects(_class="counter", _package=package, _agent=agent,
                                  _timeout=20)
        for o in sorted(objs, key=lambda o: o.name):
            print("OBJECT %s %s count=%d" % (o.getClassKey().getClassName(), o.name, o.count))
        ticks = [o for o in objs if o.name == "ticks"][0]
        result = ticks.add(7)
        print("CALL %d %s total=%r" % (result.status, result.text, result.outArgs.get("total")))
        result = ticks._invoke("add", (), {"amount": 2**40})
        print("BADCALL %d %s" % (result.status, result.text))
    finally:
        session.delBroker(broker)
    """)


def _python27() -> str:
    from .conftest import _python27 as find
    found = find()
    assert found is not None  # the classic_tools fixture skipped otherwise
    return found


@pytest.mark.parametrize("v1", [False, True], ids=["stock-v2-only", "qmf1-on"])
async def test_the_classic_qmf_console_lists_the_agents_objects_and_calls_a_method(
        v1: bool, request: pytest.FixtureRequest, classic_tools: Any, tmp_path: Path) -> None:
    broker: Qpidd = request.getfixturevalue("qpidd_v1" if v1 else "qpidd_stock")
    script = tmp_path / "classic_console.py"
    script.write_text(CLASSIC_CONSOLE)
    async with counter_agent(broker.url, versions=(1, 2) if v1 else (2,)) as agent:
        assert agent.v2_name is not None
        proc = await asyncio.create_subprocess_exec(
            _python27(), str(script), f"127.0.0.1:{broker.port}", agent.v2_name, PKG,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            env=dict(os.environ, PYTHONPATH=str(TOOLS / "lib"), PYTHONUNBUFFERED="1"))
        try:
            raw, _ = await asyncio.wait_for(proc.communicate(), 60.0)
        except TimeoutError:
            proc.kill()
            raw, _ = await proc.communicate()
            pytest.fail(f"the classic console did not finish:\n{raw.decode(errors='replace')}")
        out = raw.decode(errors="replace")
        assert proc.returncode == 0, out
        assert f"AGENT {agent.v2_name} v2=True" in out, out
        assert re.findall(r"^OBJECT .*$", out, re.M) == [
            "OBJECT counter ticks count=0", "OBJECT counter tocks count=100"], out
        assert re.search(r"^CALL 0 OK total=7L?$", out, re.M), out
        # a value out of the argument's range: the agent's own check, as an _exception
        assert re.search(r"^BADCALL 4 InvalidParameter: .*amount", out, re.M), out
        assert _count(agent, "ticks") == 7


async def test_qpid_printevents_prints_an_event_the_agent_raises(
        qpidd_stock: Qpidd, classic_tools: Any) -> None:
    async with counter_agent(qpidd_stock.url) as agent:
        proc = await asyncio.create_subprocess_exec(
            "bash", str(TOOLS / "run"), "qpid-printevents", f"127.0.0.1:{qpidd_stock.port}",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            env=dict(os.environ, PYTHONUNBUFFERED="1"))
        text = ""

        async def read() -> None:
            nonlocal text
            assert proc.stdout is not None
            while chunk := await proc.stdout.read(4096):
                text += chunk.decode(errors="replace")

        reader = asyncio.create_task(read())
        pattern = re.compile(rf"^.* {re.escape(PKG)}:counterReset (.*)$", re.M)
        try:
            await wait_until(lambda: "brokerConnected" in text, timeout=20.0,
                             message="qpid-printevents connected")
            # its subscription is made just after it says so: raise until one arrives
            deadline = time.monotonic() + 20.0
            n = 0
            while (found := pattern.search(text)) is None:
                assert time.monotonic() < deadline and not reader.done(), text
                n += 1
                agent.raise_event("counterReset", name=f"ticks{n}", previous=n)
                await asyncio.sleep(0.2)
            shown = dict(kv.split("=", 1) for kv in found.group(1).split())
            number = int(shown["previous"].rstrip("L"))
            assert shown == {"name": f"ticks{number}", "previous": shown["previous"]}
            assert 1 <= number <= n
        finally:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 10.0)
            except TimeoutError:
                proc.kill()
                await proc.wait()
            await reader

"""The project's agent speaking QMF v2 to a genuine qpidd over AMQP 1.0.

On a stock qpidd (QMF v2 only) and with v1 on too: the project's v2 console core
finds the agent, lists its objects and calls its methods; the classic
``qpid-printevents`` (QMF v2 over AMQP 0-10) prints an event the agent raises; the
classic ``qmf.console`` lists the agent's objects with their values and calls a
method (it asks the schema with a v1 ``S`` to the agent's v2 address).
"""

from __future__ import annotations

import asyncio
import os
import re
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from qmf_async.protocol import QueryDone, texts_from_schema
from qmf_async.transport import NativeAmqp10Transport
from qmf_async.wire import V2SchemaId

from ._util import wait_until
from .agent_v2_helpers import (
    COUNTER,
    PKG,
    Driver,
    console_sees_the_agent,
    count_of,
    counter_agent,
)
from .conftest import _python27
from .qpidd import ROOT, Qpidd

pytestmark = pytest.mark.qpidd

TOOLS = ROOT.parent / "shared" / "classic-tools"


@pytest.mark.parametrize("v1", [False, True], ids=["stock-v2-only", "qmf1-on"])
async def test_the_v2_console_core_finds_queries_and_calls_the_agent(
        v1: bool, request: pytest.FixtureRequest) -> None:
    broker: Qpidd = request.getfixturevalue("qpidd_v1" if v1 else "qpidd_stock")
    versions = (1, 2) if v1 else (2,)
    async with counter_agent(broker.url, versions=versions,
                             transport=NativeAmqp10Transport) as agent:
        assert agent.v2_live
        t = NativeAmqp10Transport(broker.url)
        await t.connect()
        try:
            driver = Driver(t)
            await driver.open(("qmf.default.topic", "agent.ind.#"))
            await console_sees_the_agent(driver, agent)
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


def _python2() -> str:
    found = _python27()
    assert found is not None  # the classic_tools fixture skipped the test otherwise
    return found


@pytest.mark.parametrize("v1", [False, True], ids=["stock-v2-only", "qmf1-on"])
async def test_the_classic_qmf_console_lists_the_agents_objects_and_calls_a_method(
        v1: bool, request: pytest.FixtureRequest, classic_tools: Any, tmp_path: Path) -> None:
    broker: Qpidd = request.getfixturevalue("qpidd_v1" if v1 else "qpidd_stock")
    script = tmp_path / "classic_console.py"
    script.write_text(CLASSIC_CONSOLE)
    async with counter_agent(broker.url, versions=(1, 2) if v1 else (2,),
                             transport=NativeAmqp10Transport) as agent:
        assert agent.v2_name is not None
        proc = await asyncio.create_subprocess_exec(
            _python2(), str(script), f"127.0.0.1:{broker.port}", agent.v2_name, PKG,
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
        assert count_of(agent, "ticks") == 7


async def test_qpid_printevents_prints_an_event_the_agent_raises(
        qpidd_stock: Qpidd, classic_tools: Any) -> None:
    async with counter_agent(qpidd_stock.url, transport=NativeAmqp10Transport) as agent:
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


async def test_a_large_answer_comes_in_parts_through_qpidd(qpidd_stock: Qpidd) -> None:
    """250 objects: three ``_query_response`` parts (100, 100, 50), the first two
    ``partial``; the v2 console core puts them together."""
    async with counter_agent(qpidd_stock.url, transport=NativeAmqp10Transport) as agent:
        for i in range(248):
            agent.create_object("counter", name=f"extra{i:03d}", count=i)
        name = agent.v2_name
        assert name is not None
        t = NativeAmqp10Transport(qpidd_stock.url)
        await t.connect()
        parts: list[bool] = []
        try:
            driver = Driver(t)
            await driver.open()
            plain = driver.on_delivery

            def watch(d: Any) -> None:
                if d.headers.get("qmf.opcode") == "_query_response":
                    parts.append("partial" in d.headers)
                plain(d)

            t.set_dispatcher(watch)
            cid = await driver.send(driver.core.send_query(name, schema_id=V2SchemaId(
                PKG, "counter")))
            ev = await driver.answer(cid)
            assert isinstance(ev, QueryDone)
            names = {texts_from_schema(d.values, COUNTER)["name"] for d in ev.items}
            assert len(ev.items) == 250 and len(names) == 250
            assert {"ticks", "tocks", "extra000", "extra247"} <= names
            assert parts == [True, True, False]
        finally:
            await t.close()


async def test_the_agent_speaks_v2_again_after_qpidd_restarts(
        qpidd_fresh: Callable[[bool], Qpidd]) -> None:
    broker = qpidd_fresh(False)
    async with counter_agent(broker.url, transport=NativeAmqp10Transport) as agent:
        name = agent.v2_name
        assert name is not None
        await asyncio.to_thread(broker.restart)
        # the agent reconnects and binds its v2 addresses again
        t = NativeAmqp10Transport(broker.url)
        await t.connect()  # restart() returns once qpidd listens again
        try:
            driver = Driver(t)
            await driver.open(("qmf.default.topic", "agent.ind.heartbeat.#"))
            await wait_until(lambda: name in driver.core.agents, timeout=30.0,
                             message="the agent's heartbeat after the restart")
            await wait_until(lambda: agent.v2_live, timeout=10.0)
            cid = await driver.send(driver.core.send_query(name, schema_id=V2SchemaId(
                PKG, "counter")))
            ev = await driver.answer(cid)
            assert isinstance(ev, QueryDone) and len(ev.items) == 2
        finally:
            await t.close()

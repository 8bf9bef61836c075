"""The project's agent attached to a genuine qpidd over AMQP 1.0 (QMF v1).

qpidd assigns the agent its banks (``A``/``a``), learns its classes (the agent's
``p``/``q`` carry its reply key; qpidd asks ``S`` and keeps the ``s``) and serves them
to consoles; the classic ``qpid-tool`` (an independent QMF v1 console over AMQP 0-10)
lists the agent's objects and calls a method on one, and the project's own console
over AMQP 1.0 sees the objects, calls the method and receives an event.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable

import pytest

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
from qmf_async.console import QmfObject, Session
from qmf_async.transport import NativeAmqp10Transport

from ._util import wait_until
from .qpidd import ROOT, Qpidd

PKG = "org.qmfasync.qpiddtest"
COUNTER = object_class(
    PKG, "counter",
    properties=[Property("name", "sstr", index=True)],
    statistics=[Statistic("count", "uint64")],
    methods=[method("add", Arg("amount", "uint32", direction="I"),
                    Arg("total", "uint64", direction="O")),
             method("reset", Arg("previous", "uint64", direction="O"))],
)
RESET = event_class(PKG, "counterReset", [Arg("name", "sstr"), Arg("previous", "uint64")])


pytestmark = pytest.mark.qpidd

#: the classic tools' launcher (the ``classic_tools`` fixture checks it can run)
TOOLS = ROOT.parent / "shared" / "classic-tools" / "run"


@pytest.fixture
def qpidd_url(qpidd_v1: Qpidd, classic_tools: object) -> str:
    """The shared QMF v1 qpidd (skips, or fails under CI, without qpidd or the tools)."""
    return qpidd_v1.url


@contextlib.asynccontextmanager
async def counter_agent(url: str, interval: float = 0.5,
                        qmf_versions: tuple[int, ...] = (1, 2)) -> AsyncIterator[Agent]:
    """An agent serving two counters over AMQP 1.0, attached to qpidd."""
    label = f"qpiddtest-{uuid.uuid4().hex[:8]}"
    agent = Agent(url, label=label, schemas=[COUNTER, RESET], interval=interval,
                  transport_factory=NativeAmqp10Transport, qmf_versions=qmf_versions)
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


def _by_name(agent: Agent, name: str) -> ManagedObject:
    return next(o for o in agent.objects("counter") if o["name"] == name)


# --------------------------------------------------------------------------- qpid-tool


class QpidTool:
    """The classic ``qpid-tool``, driven through its prompt (stdin/stdout).

    Each command's output ends at the next prompt (``qpid: ``); a method's answer is
    printed by qpid-tool when it arrives, after the prompt."""

    PROMPT = "qpid: "

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.text = ""
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while chunk := await self.proc.stdout.read(65536):
            self.text += chunk.decode(errors="replace")

    async def _wait(self, pattern: str, since: int, timeout: float, what: str) -> re.Match[str]:
        """The first match of ``pattern`` in the output after offset ``since``.

        Raises:
            AssertionError: none within ``timeout`` seconds (or qpid-tool ended).
        """
        regex = re.compile(pattern, re.M)
        deadline = time.monotonic() + timeout
        while (found := regex.search(self.text, since)) is None:
            if time.monotonic() > deadline or self._reader.done():
                raise AssertionError(f"qpid-tool: {what}: no {pattern!r} within {timeout}s:"
                                     f"\n{self.text[-3000:]}")
            await asyncio.sleep(0.05)
        return found

    async def command(self, command: str, timeout: float = 10.0) -> str:
        """Send ``command`` once qpid-tool prompts; its output (up to the next prompt).

        Raises:
            AssertionError: no prompt within ``timeout`` seconds.
        """
        assert self.proc.stdin is not None
        await self._wait(re.escape(self.PROMPT) + r"\Z", 0, timeout, "prompt")
        start = len(self.text)
        self.proc.stdin.write(command.encode() + b"\n")
        await self.proc.stdin.drain()
        end = await self._wait(re.escape(self.PROMPT), start, timeout, command)
        return self.text[start:end.start()]

    async def poll(self, command: str, pattern: str, timeout: float) -> str:
        """Repeat ``command`` until its output matches ``pattern``; that output.

        Raises:
            AssertionError: no match within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            out = await self.command(command)
            if re.search(pattern, out, re.M):
                return out
            if time.monotonic() > deadline:
                raise AssertionError(f"qpid-tool: {command!r} never printed {pattern!r}:\n"
                                     f"{self.text[-3000:]}")
            await asyncio.sleep(0.2)

    async def answer(self, command: str, pattern: str, timeout: float = 10.0) -> str:
        """Send ``command`` and wait for ``pattern`` (printed whenever it arrives).

        Raises:
            AssertionError: no match within ``timeout`` seconds.
        """
        start = len(self.text)
        await self.command(command)
        return (await self._wait(pattern, start, timeout, command)).group(0)

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            assert self.proc.stdin is not None
            self.proc.stdin.write(b"quit\n")
            await self.proc.stdin.drain()
            self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 10)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
        await self._reader


@contextlib.asynccontextmanager
async def qpid_tool(url: str) -> AsyncIterator[QpidTool]:
    port = url.rsplit(":", 1)[1].strip("/")
    proc = await asyncio.create_subprocess_exec(
        "bash", str(TOOLS), "qpid-tool", f"127.0.0.1:{port}", stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        env=dict(os.environ, PYTHONUNBUFFERED="1"))
    tool = QpidTool(proc)
    try:
        yield tool
    finally:
        await tool.close()


# --------------------------------------------------------------------------- tests


async def test_qpidd_attaches_the_agent_and_serves_its_classes(qpidd_url: str) -> None:
    async with counter_agent(qpidd_url) as agent, qpid_tool(qpidd_url) as tool, \
            Session.connect(qpidd_url, _transport_factory=NativeAmqp10Transport) as session:
        assert agent.attached and agent.broker_bank == 1 and agent.agent_bank >= 1
        # qpidd lists the agent as one of its objects, under the banks it assigned
        (record,) = [a for a in await session.get_objects(_class="agent", _timeout=5.0)
                     if a.label == agent.label]
        assert (record.brokerBank, record.agentBank) == (1, agent.agent_bank)
        # qpid-tool asks qpidd (``S`` to ``broker``) for schemas: qpidd has them from
        # the agent, which it asked after the agent's ``q``
        out = await tool.poll(f"schema {PKG}:counter", r"^\s+Method: reset", 10.0)
        assert re.search(r"^\s+Method: add\s*$", out, re.M), out
        assert re.search(r"^\s+amount\s+uint32\s+I\s", out, re.M), out
        out = await tool.poll(f"schema {PKG}:counterReset", r"^\s+previous\s+uint64", 10.0)
        assert f"Event Class: {PKG}:counterReset" in out, out


async def test_qpid_tool_lists_the_agents_objects_and_calls_a_method(qpidd_url: str) -> None:
    # an agent interval longer than qpidd's publication interval (1 s here), as in
    # deployments where agents publish every 10 s or so: see below
    async with counter_agent(qpidd_url, interval=2.5) as agent, \
            qpid_tool(qpidd_url) as tool:
        # qpid-tool learns of a v1 agent from qpidd's ``agent`` object (published at
        # qpidd's interval) and drops records of agents it does not know yet; the agent
        # publishes everything again one interval after qpid-tool's ``x``, by then known
        await tool.poll("agents", rf"^\s+1\.{agent.agent_bank}\s+{agent.label}\s", 20.0)
        row = r"^\s+(\d+)\s.*\s{}\s*$"
        out = await tool.poll(f"list {PKG}:counter", row.format("ticks"), 10.0)
        assert re.search(row.format("tocks"), out, re.M), out
        found = re.search(row.format("ticks"), out, re.M)
        assert found is not None
        ticks_id = found.group(1)
        shown = await tool.command(f"show {ticks_id}")
        assert re.search(r"^\s+name\s+ticks\s*$", shown, re.M), shown
        assert re.search(r"^\s+count\s+0\s*$", shown, re.M), shown
        answer = await tool.answer(f"call {ticks_id} add 7", r"OK \(0\) - \{.*\}")
        assert re.fullmatch(r"OK \(0\) - \{'total': 7L?\}", answer), answer
        assert _by_name(agent, "ticks")["count"] == 7
        assert _by_name(agent, "tocks")["count"] == 100


@pytest.mark.parametrize(("version", "agent_versions"),
                         [(None, (1, 2)), (1, (1, 2)), (None, (1,))],
                         ids=["auto-v2", "v1", "v1-only-agent-under-v2"])
async def test_console_over_amqp10_gets_objects_calls_and_receives_events(
        qpidd_url: str, version: int | None, agent_versions: tuple[int, ...]) -> None:
    async with counter_agent(qpidd_url, qmf_versions=agent_versions) as agent, \
            Session.connect(qpidd_url, _transport_factory=NativeAmqp10Transport,
                            qmf_version=version) as session:
        events = session.events(_class="counterReset")
        await events.ready()
        if version is None and 2 in agent_versions:  # found by its heartbeat, over v2
            await wait_until(lambda: agent.v2_name in [a.name for a in session.get_agents()],
                             timeout=15.0, message="the agent's v2 heartbeat")

        async def ours() -> list[QmfObject]:
            return await session.get_objects(_class="counter", _package=PKG, _timeout=5.0)

        objs = await wait_until(ours, timeout=15.0, interval=0.2)
        assert sorted(o.name for o in objs) == ["ticks", "tocks"]
        ticks = next(o for o in objs if o.name == "ticks")
        if version == 1 or agent_versions == (1,):
            # over v1 (forced, or the only version the agent speaks)
            assert ticks.get_object_id().agent_bank == agent.agent_bank
            assert ticks.get_agent() is not None and ticks.get_agent().name == ""
        else:  # the agent speaks both versions: seen once, over v2
            assert ticks.get_agent() is not None and ticks.get_agent().name == agent.v2_name
            assert [a.label for a in session.get_agents()].count(agent.v2_name) == 1
            assert agent.label not in [a.label for a in session.get_agents()]
        result = await ticks.invoke("add", 5, _timeout=10.0)
        assert (result.status, result.total) == (0, 5)
        result = await ticks.invoke("reset", _timeout=10.0)
        assert (result.status, result.previous) == (0, 5)
        event = await asyncio.wait_for(anext(aiter(events)), 10.0)
        assert event.class_key.name == "counterReset"
        assert event.arguments == {"name": "ticks", "previous": 5}
        assert _by_name(agent, "ticks")["count"] == 0


async def test_the_agent_attaches_again_after_qpidd_restarts(
        qpidd_fresh: Callable[[bool], Qpidd], classic_tools: object) -> None:
    broker = qpidd_fresh(True)
    async with counter_agent(broker.url) as agent:
        bank = agent.agent_bank
        await asyncio.to_thread(broker.restart)
        # the agent reconnects, asks for its old banks (free on the new qpidd) and
        # registers its classes again: qpid-tool sees both from the restarted qpidd
        async with qpid_tool(broker.url) as tool:
            await tool.poll("agents", rf"^\s+1\.{bank}\s+{agent.label}\s", 30.0)
            out = await tool.poll(f"schema {PKG}:counter", r"^\s+Method: add", 10.0)
            assert "Object Class" in out
        assert agent.attached and agent.agent_bank == bank


@pytest.mark.qpidd
async def test_a_v2_request_with_a_dynamic_reply_queue_is_answered_there(
        qpidd_stock: Qpidd) -> None:
    """An AMQP 1.0 client's reply address is often its dynamic queue (a node address
    with no ``/``): the agent answers that node, not a key of ``amq.direct``."""
    from qmf_async.wire import (
        V2QueryRequest,
        V2QueryResponse,
        V2SchemaId,
        decode_amqp10_message,
        decode_v2,
        encode_amqp10_message,
        encode_v2,
    )

    from .qmf2_raw import RawV2Client

    agent = Agent(qpidd_stock.url, label=f"dyn-{uuid.uuid4().hex[:8]}",
                  schemas=[COUNTER, RESET], interval=1.0, attach=False, broker_bank=7,
                  qmf_versions=(2,))
    agent.create_object("counter", name="ticks", count=3)
    await agent.start()
    try:
        def ask() -> tuple[str, list[object]]:
            client = RawV2Client("127.0.0.1", qpidd_stock.port)
            try:
                props, body, cid = encode_v2(V2QueryRequest(
                    "OBJECT", schema_id=V2SchemaId(PKG, "counter"), correlation_id="q1"))
                client.send_encoded(encode_amqp10_message(
                    body, subject=agent.v2_name, reply_to=client.reply_to,
                    correlation_id=cid, application_properties=props, body_kind="value"))
                client.wait_for(lambda: bool(client.replies), "the agent's answer")
                answers = []
                for raw in client.replies:
                    m = decode_amqp10_message(raw)
                    answers.append(decode_v2(m.application_properties, m.body,
                                             correlation_id=m.correlation_id))
                return client.reply_to, answers
            finally:
                client.close()
        reply_to, answers = await asyncio.to_thread(ask)
    finally:
        await agent.stop()
    assert "/" not in reply_to  # qpidd named a dynamic queue
    (answer,) = answers
    assert isinstance(answer, V2QueryResponse) and answer.correlation_id == "q1"
    assert [d.values["name"] for d in answer.items] == ["ticks"]

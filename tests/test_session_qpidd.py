"""The console Session against a genuine qpidd (QMF v1 on, AMQP 1.0), with the classic
tools as the independent oracle on the same broker.

The same console code as on RabbitMQ: only the transport differs, picked from the URL
alone (qpidd answers the AMQP 0-9-1 header with its own, the session goes on over 1.0).
The broker's own agent is the QMF agent here: its real classes (broker, queue, exchange,
binding, ...), methods (echo, create, delete, purge, getLogLevel) and events.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from qmf_async import (
    ClassKey,
    ConnectionLostError,
    Event,
    MethodError,
    ProtocolMismatchError,
    QmfObject,
    Session,
    TransportError,
)

from ._util import wait_until
from .qpidd import send_messages

pytestmark = [pytest.mark.qpidd]

BROKER_PKG = "org.apache.qpid.broker"


def _name(what: str) -> str:
    return f"qmfa-{what}-{uuid.uuid4().hex[:8]}"


#: the brokers and QMF versions the session suite runs on: a stock qpidd (v2 only)
#: spoken to automatically (v2), a qpidd with v1 and v2 on spoken to automatically, and
#: the same forced to v1
FLAVOURS = [("stock", None), ("v1and2", None), ("v1and2", 1)]


@pytest.fixture(params=FLAVOURS, ids=["stock-auto", "both-auto", "both-v1"])
def flavour(request: Any) -> tuple[Any, int | None]:
    """(qpidd, qmf_version) of one run of the session suite."""
    which, version = request.param
    broker = request.getfixturevalue("qpidd_stock" if which == "stock" else "qpidd_v1")
    return broker, version


@pytest.fixture
def qpidd(flavour: tuple[Any, int | None]) -> Any:
    return flavour[0]


@pytest.fixture
async def session(flavour: tuple[Any, int | None]) -> AsyncIterator[Session]:
    broker, version = flavour
    async with Session.connect(broker.url, timeout=10.0, qmf_version=version) as s:
        assert s.brokers[0].qmf_version == (version or 2)
        yield s


async def _broker_object(session: Session) -> QmfObject:
    (broker,) = await session.get_objects(_class="broker", _package=BROKER_PKG)
    return broker


# ---------------------------------------------------------------------------- connecting

async def test_the_url_alone_reaches_qpidd_over_amqp_1_0(qpidd: Any) -> None:
    async with Session.connect(qpidd.url) as session:
        broker = session.brokers[0]
        assert broker.protocol == "1.0"
        obj = await _broker_object(session)
        assert obj.port == qpidd.port
        assert obj.name == "amqp-broker"


async def test_forcing_the_wrong_protocol_is_a_clear_error(qpidd: Any, amqp_url: str) -> None:
    with pytest.raises(ProtocolMismatchError, match="does not speak AMQP 0-9-1"):
        async with Session.connect(qpidd.url, protocol="0-9-1"):
            pass
    with pytest.raises(ProtocolMismatchError, match=r"does not speak AMQP 1\.0"):
        async with Session.connect(amqp_url, protocol="1.0"):
            pass
    async with Session.connect(amqp_url, protocol="auto") as session:
        assert session.brokers[0].protocol == "0-9-1"


# ---------------------------------------------------------------------------- objects

async def test_get_objects_agrees_with_classic_qpid_config(qpidd: Any, session: Session,
                                                           classic_tools: Any) -> None:
    names = [_name("q") for _ in range(3)]
    for name in names:
        rc, _, err = classic_tools("qpid-config", "-b", qpidd.address, "add", "queue", name)
        assert rc == 0, err
    queues = await session.get_objects(_class="queue", _package=BROKER_PKG)
    ours = {q.name for q in queues}
    assert set(names) <= ours
    rc, out, err = classic_tools("qpid-config", "-b", qpidd.address, "queues")
    assert rc == 0, err
    theirs = {line.split()[0] for line in out.splitlines()[2:] if line.strip()}
    assert set(names) <= theirs
    # the queues both see (temporary queues of other connections come and go)
    for name in names:
        (q,) = await session.get_objects(_class="queue", name=name)
        assert q.msgDepth == 0 and q.durable is False


async def test_statistics_follow_real_traffic(qpidd: Any, session: Session) -> None:
    name = _name("traffic")
    broker = await _broker_object(session)
    result = await broker.create("queue", name, {}, False)
    assert result.status == 0
    await asyncio.to_thread(send_messages, qpidd.address, name, 25)
    (q,) = await session.get_objects(_class="queue", name=name)
    assert q.msgDepth == 25 and q.msgTotalEnqueues == 25
    purged = await q.purge(10)
    assert purged.status == 0
    await q.update()
    assert q.msgDepth == 15 and q.msgTotalDequeues == 10


# ---------------------------------------------------------------------------- methods

async def test_methods_and_their_errors(session: Session, qpidd: Any,
                                        classic_tools: Any) -> None:
    broker = await _broker_object(session)
    echo = await broker.echo(7, "over 1.0")
    assert echo.out_args == {"sequence": 7, "body": "over 1.0"}
    level = await broker.getLogLevel()
    assert level.status == 0 and isinstance(level.out_args["level"], str)
    name = _name("made")
    assert (await broker.create("queue", name, {"qpid.max_count": 10}, False)).status == 0
    rc, out, _ = classic_tools("qpid-config", "-b", qpidd.address, "queues")
    assert rc == 0 and name in out
    with pytest.raises(MethodError) as bad:
        await broker.create("no-such-type", _name("x"), {}, False)
    assert bad.value.status != 0 and bad.value.text
    assert (await broker.delete("queue", name, {})).status == 0
    rc, out, _ = classic_tools("qpid-config", "-b", qpidd.address, "queues")
    assert rc == 0 and name not in out


# ---------------------------------------------------------------------------- events, updates

async def test_events_and_object_updates(session: Session) -> None:
    name = _name("ev")
    events = session.events()
    updates = session.object_updates(_class="queue")
    seen: list[Event] = []
    updated: list[QmfObject] = []

    async def read_events() -> None:
        async for ev in events:
            seen.append(ev)

    async def read_updates() -> None:
        async for obj in updates:
            updated.append(obj)

    tasks = [asyncio.create_task(read_events()), asyncio.create_task(read_updates())]
    try:
        # over v2 the bindings follow the subscriptions; qpidd publishes a new, idle
        # queue once, so they must be in place before it is made
        await events.ready()
        await updates.ready()
        broker = await _broker_object(session)
        assert (await broker.create("queue", name, {}, False)).status == 0
        declare = await wait_until(
            lambda: next((e for e in seen if e.class_key.name == "queueDeclare"
                          and e.arguments.get("qName") == name), None),
            timeout=10.0, message="queueDeclare event")
        assert declare.class_key.package == BROKER_PKG
        # qpidd publishes the new queue within a publication interval
        await wait_until(lambda: any(o.name == name for o in updated), timeout=10.0,
                         message="object update of the new queue")
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


# ---------------------------------------------------------------------------- schema, agents

async def test_schema_cache_and_the_broker_agent(session: Session) -> None:
    packages = await session.get_packages()
    assert BROKER_PKG in packages
    classes = await session.get_classes(BROKER_PKG)
    names = {k.name for k in classes}
    assert {"broker", "queue", "exchange", "binding"} <= names
    queue_key = next(k for k in classes if k.name == "queue")
    assert isinstance(queue_key, ClassKey)
    schema = await session.get_schema(queue_key)
    assert "purge" in {m.name for m in schema.methods}
    assert "msgDepth" in {s.name for s in schema.statistics}
    agents = session.get_agents()
    assert any(a.broker_bank == 1 and a.agent_bank == 0 for a in agents)


# ---------------------------------------------------------------------------- restart

@pytest.mark.parametrize("qmf1", [True, False], ids=["both", "stock"])
async def test_a_qpidd_restart_mid_call_fails_the_call_at_once_and_the_session_recovers(
        qpidd_fresh: Any, qmf1: bool) -> None:
    qpidd = qpidd_fresh(qmf1=qmf1)
    async with Session.connect(qpidd.url, manage_connections=True, timeout=10.0,
                               reconnect_min_delay=0.1, reconnect_max_delay=0.5) as session:
        broker = await _broker_object(session)
        assert (await broker.echo(1, "before")).status == 0
        os.kill(qpidd.pid, signal.SIGSTOP)  # the call below stays pending
        # SIGSTOP takes effect asynchronously: a qpidd thread still running could
        # answer the call sent right after it
        await wait_until(lambda: qpidd.is_stopped(), timeout=5.0, message="qpidd stopped")
        try:
            call = asyncio.create_task(broker.echo(2, "pending", _timeout=30.0))
            await asyncio.sleep(0)  # let it be sent
            await wait_until(lambda: not call.done() and _pending(session.brokers[0]) > 0,
                             timeout=5.0, message="call pending")
        finally:
            os.kill(qpidd.pid, signal.SIGKILL)
            os.kill(qpidd.pid, signal.SIGCONT)
        started = time.monotonic()
        with pytest.raises(TransportError) as lost:
            await asyncio.wait_for(call, 5.0)
        assert time.monotonic() - started < 1.0
        assert isinstance(lost.value, (ConnectionLostError, TransportError))
        qpidd.restart()
        await wait_until(lambda: session.brokers[0].connected, timeout=15.0,
                         message="session reconnected")
        # get_objects right away: it waits for the reconnection's handshake (B, agents)
        broker = await _broker_object(session)
        assert (await broker.echo(3, "after")).out_args["body"] == "after"


def _pending(broker: Any) -> int:
    """Requests outstanding on a broker connection, whichever QMF version it speaks."""
    return len(broker._core) + (len(broker._v2.core) if broker._v2 is not None else 0)


# ---------------------------------------------------------------------------- the docs

def test_the_tutorials_qpidd_section_runs_and_prints_what_it_shows(qpidd_v1: Any,
                                                                   tmp_path: Any) -> None:
    import re
    import subprocess
    import sys
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "docs" / "tutorial.md").read_text()
    section = page.split("## Connecting to qpidd", 1)[1].split("\n## ", 1)[0]
    code, shown = re.findall(r"^```(?:python|text)\n(.*?)^```", section, re.S | re.M)[:2]
    script = tmp_path / "qpidd_tutorial.py"
    script.write_text(code)
    env = {**os.environ, "QMF_URL": qpidd_v1.url}
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    expected = shown.replace("port 5673", f"port {qpidd_v1.port}")
    assert proc.stdout.splitlines() == expected.splitlines()


def test_the_readme_example_runs_against_qpidd(qpidd_v1: Any, tmp_path: Any) -> None:
    import re
    import subprocess
    import sys
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    code = re.findall(r"^```python\n(.*?)^```", readme, re.S | re.M)[0]
    assert '"amqp://guest:guest@localhost:5672/"' in code
    name = _name("readme")
    asyncio.run(_create_queue(qpidd_v1.url, name))
    send_messages(qpidd_v1.address, name, 3)
    script = tmp_path / "readme.py"
    script.write_text(code.replace('"amqp://guest:guest@localhost:5672/"', repr(qpidd_v1.url)))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert f"{name} 3 3" in lines
    assert lines[-1] == "0 hello"


async def _create_queue(url: str, name: str) -> None:
    async with Session.connect(url) as session:
        broker = await _broker_object(session)
        assert (await broker.create("queue", name, {}, False)).status == 0


# ---------------------------------------------------------------------------- stock qpidd

async def test_a_stock_qpidd_answers_v1_requests(qpidd_stock: Any) -> None:
    """qpidd as shipped (``--mgmt-qmf1 no``) sends no v1 indications but answers v1
    requests: objects, methods and schemas work; events need QMF v2."""
    async with Session.connect(qpidd_stock.url) as session:
        assert session.brokers[0].protocol == "1.0"
        broker = await _broker_object(session)
        assert broker.port == qpidd_stock.port
        assert (await broker.echo(5, "stock")).out_args["body"] == "stock"
        name = _name("stock")
        assert (await broker.create("queue", name, {}, False)).status == 0
        (q,) = await session.get_objects(_class="queue", name=name)
        assert q.msgDepth == 0
        schema = await session.get_schema(q.get_class_key())
        assert "msgDepth" in {s.name for s in schema.statistics}



# ---------------------------------------------------------------------------- the tools

def test_qmf_stat_takes_the_classic_broker_form(qpidd_v1: Any, classic_tools: Any) -> None:
    import subprocess
    import sys

    name = _name("stat")
    rc, _, err = classic_tools("qpid-config", "-b", qpidd_v1.address, "add", "queue", name)
    assert rc == 0, err
    proc = subprocess.run([sys.executable, "-m", "qmf_async.tools.cli", "stat", "-b",
                           qpidd_v1.address, "-q"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert any(line.split()[:1] == [name] for line in proc.stdout.splitlines()), proc.stdout
    rc, out, _ = classic_tools("qpid-stat", "-b", qpidd_v1.address, "-q")
    assert rc == 0 and name in out


async def test_the_session_and_the_agent_take_qpid_style_addresses(qpidd_v1: Any) -> None:
    async with Session.connect(qpidd_v1.address) as session:  # host:port, no scheme
        assert session.brokers[0].protocol == "1.0"
        assert (await _broker_object(session)).port == qpidd_v1.port
    async with Session.connect(f"guest/guest@{qpidd_v1.address}") as session:
        assert (await _broker_object(session)).port == qpidd_v1.port

"""The example scripts (examples/*.py) and the runnable code of the docs, run as
subprocesses against the management-broker role and the demo agent, both started
in this process on a private vhost."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import attrs
import pytest
import pytest_asyncio

from qmf_async import Session
from qmf_async.agent.broker import ManagementBroker

from ._util import import_example, private_vhost

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
DOCS = ROOT / "docs"
INTERVAL = 0.5  # the role and the demo agent publish this often
RUN_TIMEOUT = 60.0


def _import_demo() -> Any:
    return import_example("demo_agent")


demo = _import_demo()


@pytest.fixture(scope="module")
def bus_url(amqp_url: str) -> Iterator[str]:
    """``amqp_url`` on a temporary vhost of this module (deleted afterwards), or
    ``amqp_url`` itself when rabbitmqctl cannot make one for that broker."""
    with private_vhost(amqp_url, "qmf-examples-test") as url:
        yield url


@attrs.frozen
class Bus:
    url: str
    role: ManagementBroker
    model: Any  # examples/demo_agent.py's DemoBroker


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def bus(bus_url: str) -> AsyncIterator[Bus]:
    """The role and the demo agent, running for the whole module."""
    role = ManagementBroker(bus_url, interval=INTERVAL, broker_id=uuid.uuid4())
    await role.start()
    try:
        agent, model = demo.build_demo_agent(bus_url, interval=INTERVAL, seed=5,
                                             label=f"examples-demo-{uuid.uuid4().hex[:6]}")
        await model.start()
        try:
            assert agent.attached, "the demo agent did not attach to the role"
            yield Bus(bus_url, role, model)
        finally:
            await model.stop()
    finally:
        await role.stop(2.0)


@attrs.frozen
class Run:
    returncode: int
    stdout: str
    stderr: str


def _env(url: str) -> dict[str, str]:
    env = dict(os.environ, QMF_URL=url, PYTHONUNBUFFERED="1")
    env.pop("PYTHONWARNINGS", None)
    return env


async def run(bus: Bus, script: str | Path, *args: str, timeout: float = RUN_TIMEOUT) -> Run:
    """Run a script with this interpreter and ``QMF_URL`` set to the bus, without
    blocking the loop that serves the role and the demo agent."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(script), *args, cwd=ROOT, env=_env(bus.url),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        out, err = await proc.communicate()
        pytest.fail(f"{script} {' '.join(args)} did not finish within {timeout} s:\n"
                    f"{out.decode()}\n{err.decode()}")
    return Run(proc.returncode if proc.returncode is not None else -1, out.decode(),
               err.decode())


def example(name: str) -> Path:
    return EXAMPLES / f"{name}.py"


@contextlib.asynccontextmanager
async def started(bus: Bus, script: Path, *args: str, ready: str,
                  timeout: float = 20.0) -> AsyncIterator[tuple[asyncio.subprocess.Process,
                                                                list[str]]]:
    """Start a long-running script and wait for the stdout line containing ``ready``;
    yields the process and the stdout lines read so far (later lines are appended by
    :func:`finish`).  Kills it on the way out if still running."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(script), *args, cwd=ROOT, env=_env(bus.url),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    lines: list[str] = []
    try:
        async with asyncio.timeout(timeout):
            while True:
                assert proc.stdout is not None
                raw = await proc.stdout.readline()
                if not raw:
                    err = await proc.stderr.read() if proc.stderr else b""
                    pytest.fail(f"{script.name} exited before {ready!r}:\n"
                                f"{''.join(lines)}\n{err.decode()}")
                lines.append(raw.decode())
                if ready in lines[-1]:
                    break
        yield proc, lines
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def finish(proc: asyncio.subprocess.Process, lines: list[str],
                 timeout: float = 20.0) -> Run:
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    lines.append(out.decode())
    return Run(proc.returncode if proc.returncode is not None else -1, "".join(lines),
               err.decode())


@contextlib.asynccontextmanager
async def session(bus: Bus) -> AsyncIterator[Session]:
    async with Session.connect(bus.url, timeout=10.0, broker_timeout=2.0) as s:
        yield s


# --------------------------------------------------------------------------- examples


async def test_list_queues(bus: Bus) -> None:
    r = await run(bus, example("list_queues"), "--url", bus.url)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["queue", "depth", "enqueues", "dequeues", "consumers"]
    names = [line.split()[0] for line in lines[1:-1]]
    assert names == sorted(bus.model.queues) == ["audit", "invoices", "orders"]
    assert lines[-1] == "3 queue(s)"
    for line in lines[1:-1]:
        assert all(field.isdigit() for field in line.split()[1:]), line

    r = await run(bus, example("list_queues"), "--url", bus.url, "--where", "name LIKE 'o%'")
    assert r.returncode == 0, r.stderr
    assert [line.split()[0] for line in r.stdout.splitlines()[1:-1]] == ["orders"]


async def test_list_queues_reports_errors(bus: Bus) -> None:
    bad_vhost = urlunsplit(urlsplit(bus.url)._replace(path="/no-such-vhost-" + uuid.uuid4().hex))
    r = await run(bus, example("list_queues"), "--url", bad_vhost, "--timeout", "5")
    assert r.returncode == 1
    assert "list_queues: " in r.stderr and "Error" in r.stderr
    r = await run(bus, example("list_queues"), "--url", bus.url, "--where", "name LIKE")
    assert r.returncode == 1
    assert "SelectorError" in r.stderr


async def test_watch_events(bus: Bus) -> None:
    name = f"watched-{uuid.uuid4().hex[:6]}"
    async with started(bus, example("watch_events"), "--url", bus.url, "--count", "2",
                       "--timeout", "30", "--where", f"qName = '{name}'",
                       ready="watching events") as (proc, lines):
        async with session(bus) as s:
            (broker,) = await s.get_objects(_class="broker")
            await broker.create("queue", name, {}, False)
            await broker.delete("queue", name, {})
        r = await finish(proc, lines)
    assert r.returncode == 0, r.stderr
    events = [line for line in r.stdout.splitlines() if "org.apache.qpid.broker:" in line]
    assert len(events) == 2, r.stdout
    assert "queueDeclare" in events[0] and f"qName={name}" in events[0]
    assert "queueDelete" in events[1] and f"qName={name}" in events[1]
    assert r.stdout.rstrip().endswith("2 event(s)")


async def test_watch_events_stops_at_the_timeout(bus: Bus) -> None:
    r = await run(bus, example("watch_events"), "--url", bus.url, "--count", "1", "--timeout", "1",
                  "--class", "noSuchEvent")
    assert r.returncode == 1
    assert r.stdout.rstrip().endswith("0 event(s)")
    assert "only 0 of 1 events within 1.0 s" in r.stderr


async def test_call_method(bus: Bus) -> None:
    r = await run(bus, example("call_method"), "--url", bus.url, "--class", "broker", "echo", "7",
                  "body=hi there")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "broker amqp-broker: echo -> 0 OK sequence=7 body='hi there'"

    bus.model.paused = True  # no traffic refills the queue before we look
    try:
        r = await run(bus, example("call_method"), "--url", bus.url, "--class", "queue",
                      "--name", "orders", "purge", "0")
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == "queue orders: purge -> 0 OK"
        assert len(bus.model.queues["orders"].messages) == 0
    finally:
        bus.model.paused = False

    r = await run(bus, example("call_method"), "--url", bus.url, "--class", "broker", "create",
                  "nosuchtype", "x", "{}", "false")
    assert r.returncode == 1
    assert r.stdout.strip() == ("broker amqp-broker: create failed: 7 unknown object type: "
                                "nosuchtype")

    r = await run(bus, example("call_method"), "--url", bus.url, "--class", "queue", "--name",
                  "no-such-queue", "purge", "0")
    assert r.returncode == 1
    assert "no queue object matched" in r.stderr


async def test_collect_stats(bus: Bus) -> None:
    r = await run(bus, example("collect_stats"), "--url", bus.url, "--samples", "3",
                  "--interval", str(2 * INTERVAL))
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert [line for line in out if line.startswith("sample ")] == [
        f"sample {n}/3: 3 queue object(s)" for n in (1, 2, 3)]
    rows = [line.split() for line in out if not line.startswith("sample ")]
    assert len(rows) == 9
    assert {row[0] for row in rows} == {"audit", "invoices", "orders"}
    assert all(row[1].startswith("msgTotalEnqueues=") for row in rows)
    first, later = rows[:3], rows[3:]
    assert all(row[2] == "rate=-" for row in first)
    assert all(re.fullmatch(r"rate=\d+\.\d/s", row[2]) for row in later), later


async def test_run_agent(bus: Bus) -> None:
    label = f"counter-{uuid.uuid4().hex[:6]}"
    async with started(bus, example("run_agent"), "--url", bus.url, "--interval", "0.3",
                       "--label", label, "--duration", "60", ready="ready") as (proc, lines):
        assert "(attached)" in lines[-1], lines
        async with session(bus) as s:
            (agent,) = await s.wait_for_agents(label=label, timeout=10.0)
            counters = await s.get_objects(_class="counter", _package="com.example.counters",
                                           _agent=agent)
            by_name = {c.name: c for c in counters}
            assert set(by_name) == {"ticks", "tocks"}
            tocks = by_name["tocks"]
            assert tocks.step == 10

            before = tocks.count
            result = await tocks.add(5)
            assert result.status == 0 and result.total >= before + 5

            async with s.events(_class="counterReset") as events:
                reset = await tocks.reset()
                assert reset.previous >= result.total
                event = await events.get(10.0)
            assert event.arguments["name"] == "tocks"
            assert event.arguments["previous"] == reset.previous
            assert event.agent == agent

            await tocks.update()
            assert tocks.count < reset.previous  # counting starts over from 0
        proc.send_signal(signal.SIGINT)
        r = await finish(proc, lines)
    assert r.returncode == 0, r.stderr
    assert r.stdout.rstrip().endswith("agent stopped")


async def test_run_agent_stops_after_its_duration(bus: Bus) -> None:
    r = await run(bus, example("run_agent"), "--url", bus.url, "--duration", "0.5",
                  "--label", f"short-{uuid.uuid4().hex[:6]}", timeout=20.0)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].startswith("agent 'short-")
    assert r.stdout.rstrip().endswith("agent stopped")


# The docs' code blocks run in tests/test_docs.py (every page, both buses).


async def run_into_a_closed_pipe(bus: Bus, script: Path, *args: str) -> Run:
    """Run a script whose stdout's reader has gone (``... | head``): the first write
    fails with EPIPE."""
    read, write = os.pipe()
    os.close(read)
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(script), *args, cwd=ROOT, env=_env(bus.url), stdout=write,
            stderr=asyncio.subprocess.PIPE)
    finally:
        os.close(write)
    _, err = await asyncio.wait_for(proc.communicate(), RUN_TIMEOUT)
    return Run(proc.returncode if proc.returncode is not None else -1, "", err.decode())


@pytest.mark.parametrize(("name", "args"), [
    ("list_queues", ()),
    ("watch_events", ("--timeout", "0.5")),
    ("call_method", ("--class", "broker", "echo", "1", "body=x")),
])
async def test_examples_piped_into_head_end_quietly(bus: Bus, name: str,
                                                    args: tuple[str, ...]) -> None:
    r = await run_into_a_closed_pipe(bus, example(name), "--url", bus.url, *args)
    assert (r.returncode, r.stderr) == (141, ""), r.stderr

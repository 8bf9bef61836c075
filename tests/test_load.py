"""Load against real brokers: many calls in flight, many agents behind one broker role,
an event storm, a soak run; each checks what it must (nothing lost, nothing swapped,
every event delivered or counted, nothing leaked, memory and task counts flat).

The scenarios are the functions of ``benchmarks/load.py`` (which prints the same
figures from the command line); the agents of the many-agents and storm tests run in
child processes of that script, so the console's memory is its own.  On RabbitMQ each
test runs on a private vhost (its queue count and its dead letters are the test's own).
The default run has a short form of each; the full sizes are marked slow.  The soak
runs ``QMF_SOAK_SECONDS`` seconds (default 20).

The figures printed (``-s``) are the ones in docs/reliability.md, section Load.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

from benchmarks.load import concurrent_calls, event_storm, many_agents, soak
from qmf_async import Broker, Console, QmfObject, RemoteAgent, Session

from ._util import private_vhost, rabbitmqctl_output, wait_until

ROOT = Path(__file__).resolve().parent.parent

SOAK_SECONDS = float(os.environ.get("QMF_SOAK_SECONDS", "20"))


def _report(figures: dict[str, Any]) -> None:
    print(f"\n[load] {json.dumps(figures)}", file=sys.stderr)


@pytest.fixture(scope="module")
def bus(amqp_url: str) -> Iterator[str]:
    """The RabbitMQ URL on a private vhost of this module."""
    with private_vhost(amqp_url, "qmf-load") as url:
        if url == amqp_url:
            pytest.skip("needs rabbitmqctl and a local RabbitMQ to make a private vhost")
        yield url


def _vhost_queues(url: str) -> Any:
    vhost = unquote(urlsplit(url).path[1:])

    async def count(_session: Session) -> int:
        out = await rabbitmqctl_output("list_queues", "-p", vhost, "name")
        assert out is not None, "rabbitmqctl list_queues failed"
        return len([line for line in out.splitlines() if line.strip()])
    return count


async def _qpidd_queues(session: Session) -> int:
    return len(await session.get_objects(_class="queue", _package="org.apache.qpid.broker",
                                         _timeout=10.0))


def _check_calls(f: dict[str, Any]) -> None:
    assert f["lost"] == 0, f["errors"]
    assert f["misrouted"] == 0
    assert not any(f["pending_after"]), f["pending_after"]
    assert f["tasks_after"] <= f["tasks_before"]
    assert f["fds_after"] <= f["fds_before"]
    assert f["queues_after"] == f["queues_before"]


# --------------------------------------------------------------------------- calls

@pytest.mark.integration
@pytest.mark.parametrize("count", [2_000, pytest.param(10_000, marks=pytest.mark.slow)])
async def test_concurrent_calls_rabbitmq(bus: str, count: int) -> None:
    """``count`` echo calls in flight at once (QMF v1, an agent of the test): each
    answer is its own, none lost, nothing left behind."""
    f = await concurrent_calls(bus, count, queues=_vhost_queues(bus))
    _report(f)
    _check_calls(f)


@pytest.mark.qpidd
@pytest.mark.parametrize("count", [2_000, pytest.param(10_000, marks=pytest.mark.slow)])
async def test_concurrent_calls_qpidd(qpidd_stock: Any, count: int) -> None:
    """``count`` calls of qpidd's own ``broker.echo`` in flight at once (QMF v2)."""
    f = await concurrent_calls(qpidd_stock.url, count, qpidd=True, queues=_qpidd_queues)
    _report(f)
    _check_calls(f)


# --------------------------------------------------------------------------- many agents

@pytest.mark.integration
@pytest.mark.parametrize("agents", [10, pytest.param(100, marks=pytest.mark.slow)])
async def test_many_agents_behind_one_broker_role(bus: str, agents: int) -> None:
    """``agents`` agents of 1,000 objects each (4 processes) attached to one
    management-broker role: all found, one query answers every object of every agent
    (each agent's own 0..999), every agent heartbeats again after it."""
    f = await many_agents(bus, agents, 1000, processes=min(4, agents))
    _report(f)
    assert f["objects_per_agent"] == {"1000": agents}
    assert f["objects"] == agents * 1000
    assert f["wrong"] == []
    assert f["agents_after"] == agents
    # the proxies are lazy: about 0.4 kB each in the console (0.3 measured)
    assert f["rss_mb_peak"] - f["rss_mb_before"] < 1.0 * agents + 20


# --------------------------------------------------------------------------- event storm

def _check_storm(f: dict[str, Any]) -> None:
    # every event the agents published is read, still buffered, or counted dropped
    assert f["accounted"] == f["published"], f
    assert f["held_dropped"] == 0 and f["malformed"] == 0
    assert f["disorder"] == 0  # per agent, what is read keeps the agent's order
    assert f["agent_dropped"] == 0  # the agents waited for their send queue
    assert f["published"] == f["raised"]


@pytest.mark.integration
async def test_an_event_storm_against_a_slow_console_counts_every_drop(bus: str) -> None:
    """A short storm against a console slower than the agents (it sleeps 1 s after
    every 1,000 events it reads: at most 1,000 a second), a topic queue capped at 2,000
    and a subscription of 500: what the reader cannot take is lost at the broker's
    capped queue (when the session's transport drains it slower than the agents fill
    it), in the subscription (while the reader sleeps), or both, depending on the
    machine's pace; every event lost is counted (dead letters, ``dropped``)."""
    f = await event_storm(bus, agents=2, processes=1, seconds=3.0, maxsize=500,
                          topic_max_length=2_000, slow=1.0)
    _report(f)
    _check_storm(f)
    # the console was the slower side, so events were lost (and _check_storm showed
    # every one counted), whichever buffer lost them
    assert f["published"] > f["read"] + f["buffered"]
    assert f["topic_dropped"] + f["subscription_dropped"] > 0
    # memory stays flat: the buffers are bounded (topic queue at the broker,
    # prefetch and subscription here)
    assert f["rss_growth_after_warmup_mb"] < 15


@pytest.mark.integration
@pytest.mark.slow
async def test_an_event_storm_at_full_speed(bus: str) -> None:
    """Four agents in two processes raising events as fast as the bus takes them for
    10 s against one console reading as fast as it can (the session's defaults)."""
    f = await event_storm(bus, agents=4, processes=2, seconds=10.0)
    _report(f)
    _check_storm(f)
    assert f["published"] > 10_000
    assert f["rss_growth_after_warmup_mb"] < 30


@pytest.mark.qpidd
async def test_an_event_storm_on_qpidd_against_a_slow_console_counts_every_drop(
        qpidd_stock: Any) -> None:
    """The same on qpidd (AMQP 1.0, QMF v2 agents): the link credit bounds what qpidd
    sends ahead, so the losses are the subscription's own, every one counted."""
    f = await event_storm(qpidd_stock.url, agents=2, processes=1, seconds=3.0, maxsize=500,
                          slow=1.0, qpidd=True)
    _report(f)
    _check_storm(f)
    assert f["published"] > f["read"] + f["buffered"]  # the console was the slower side
    assert f["topic_dropped"] == 0 and f["subscription_dropped"] > 0
    assert f["rss_growth_after_warmup_mb"] < 15


@pytest.mark.qpidd
@pytest.mark.slow
async def test_an_event_storm_on_qpidd_at_full_speed(qpidd_stock: Any) -> None:
    """Four QMF v2 agents in two processes for 10 s against one console on qpidd."""
    f = await event_storm(qpidd_stock.url, agents=4, processes=2, seconds=10.0, qpidd=True)
    _report(f)
    _check_storm(f)
    assert f["published"] > 10_000
    assert f["rss_growth_after_warmup_mb"] < 30


# --------------------------------------------------------------------------- soak

def _check_soak(f: dict[str, Any]) -> None:
    assert f["errors"] == {}, f["errors"]
    done = f["done"]
    assert min(done.get(k, 0) for k in ("calls", "queries", "raised", "events read",
                                        "updates read")) > 0, done
    assert not any(f["pending_after"])
    # no task left behind: at rest after the soak, no more tasks than at rest before
    assert f["tasks_idle_after"] <= f["tasks_idle_before"]
    assert f["fds_after"] <= f["fds_before"]
    # in flight at any time: 5 workers, 20 calls (a task each at the console and at the
    # agent), a query, the agent's publisher: the count stays under that bound
    assert f["tasks_max_after_warmup"] <= f["tasks_idle_before"] + 5 + 2 * 20 + 10
    # RSS after a gc.collect: growth after warm-up within 4 MB + 1 MB a minute (the
    # allocators settle for a minute or so on qpidd: 0.7 MB in 2 minutes, then flat)
    assert f["rss_growth_mb"] < 4 + f["seconds"] / 60
    # the Python heap's blocks: no trend.  They climb with what is in flight and fall back
    # every few seconds (about 40,000 from peak to trough on qpidd), so two single
    # samples differ by the phase they land on: the floor of each half after warm-up is
    # compared instead, which holds at any phase
    assert f["blocks_floor_last"] - f["blocks_floor_first"] < 10_000, f["blocks"]


@pytest.mark.integration
@pytest.mark.slow
async def test_soak_rabbitmq(bus: str) -> None:
    """Calls, queries, events and object updates continuously for QMF_SOAK_SECONDS."""
    f = await soak(bus, SOAK_SECONDS)
    _report(f)
    _check_soak(f)


@pytest.mark.qpidd
@pytest.mark.slow
async def test_soak_qpidd(qpidd_stock: Any) -> None:
    """The same on qpidd (AMQP 1.0, QMF v2)."""
    f = await soak(qpidd_stock.url, SOAK_SECONDS, qpidd=True)
    _report(f)
    _check_soak(f)


# --------------------------------------------------------------------------- a busy console

class SlowConsole(Console):
    """Spends ``per_object`` seconds (blocking) on each object publication it gets,
    and notes every agent that leaves."""

    def __init__(self, per_object: float) -> None:
        self.per_object = per_object
        self.objects = 0
        self.left: list[tuple[float, RemoteAgent]] = []

    def object_props(self, broker: Broker, obj: QmfObject) -> None:
        self.objects += 1
        time.sleep(self.per_object)  # a console busy with what it receives

    def del_agent(self, agent: RemoteAgent) -> None:
        self.left.append((time.monotonic(), agent))


@pytest.mark.integration
async def test_a_busy_console_does_not_age_out_live_agents(bus: str) -> None:
    """A console that needs longer than ``missed_heartbeats`` x the heartbeat interval
    to handle what it received keeps the agents whose heartbeats wait behind it; an
    agent that stops is still aged out soon after.

    The agent (a child process, heartbeat 0.5 s; 3 missed = 1.5 s) publishes 300
    objects at once; the console spends 20 ms on each (6 s in all), with the agent's
    heartbeats queued behind them.
    """
    count, interval = 300, 0.5
    slow = SlowConsole(0.02)
    async with Session(console=slow, agent_interval=interval, missed_heartbeats=3,
                       broker_timeout=0.5) as session:
        await session.add_broker(bus, timeout=10.0)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.fault_agent", bus, str(count), str(interval),
            f"load-busy-{uuid.uuid4().hex[:8]}", stdout=asyncio.subprocess.PIPE,
            cwd=str(ROOT))
        try:
            assert proc.stdout is not None
            ready = (await asyncio.wait_for(proc.stdout.readline(), 30.0)).decode().split()
            assert ready[:1] == ["ready"], ready
            banks = (int(ready[1]), int(ready[2]))

            def known() -> RemoteAgent | None:
                return next((a for a in session.get_agents()
                             if (a.broker_bank, a.agent_bank) == banks), None)
            await wait_until(lambda: slow.objects >= count, 60.0, interval=0.1,
                             message=f"{count} objects handled")
            busy = slow.objects * slow.per_object
            assert busy > 3 * 3 * interval  # longer than the aging limit, three times over
            assert slow.left == [], f"a live agent was aged out: {slow.left}"
            assert known() is not None
            # the agent stops: it is aged out within its limit and a probe's round trip
            slow.per_object = 0.0
            proc.kill()
            await proc.wait()
            killed = time.monotonic()
            await wait_until(lambda: slow.left, 10.0, interval=0.05, message="aged out")
            aged = slow.left[0][0] - killed
            assert known() is None
            assert aged < 3 * interval + 1.0
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    _report({"scenario": "busy console", "objects": count, "busy_s": round(busy, 1),
             "limit_s": 3 * interval, "aged_out_after_kill_s": round(aged, 2)})


@pytest.mark.integration
async def test_a_lost_drain_probe_still_ages_a_silent_agent_out(
        bus: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A drain probe that never comes back (here: never sent) while nothing else
    arrives does not keep a dead agent: it is aged out once the probe is given up."""
    from qmf_async.console import _agentlist, _broker

    monkeypatch.setattr(_broker, "_PROBE_RETRY", 1.0)
    def lost_probe(self: _agentlist.AgentList, topic: str, now: float) -> None:
        pass  # noted as sent (by the broker's DrainClock), never published

    monkeypatch.setattr(_agentlist.AgentList, "_send_probe", lost_probe)
    interval = 0.5
    slow = SlowConsole(0.0)
    async with Session(console=slow, agent_interval=interval, missed_heartbeats=3,
                       broker_timeout=0.5) as session:
        broker = await session.add_broker(bus, timeout=10.0)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.fault_agent", bus, "1", str(interval),
            f"load-lost-{uuid.uuid4().hex[:8]}", stdout=asyncio.subprocess.PIPE,
            cwd=str(ROOT))
        try:
            assert proc.stdout is not None
            ready = (await asyncio.wait_for(proc.stdout.readline(), 30.0)).decode().split()
            banks = (int(ready[1]), int(ready[2]))
            await wait_until(lambda: any((a.broker_bank, a.agent_bank) == banks
                                         for a in session.get_agents()), 10.0,
                             message="the agent known")
            proc.kill()
            await proc.wait()
            killed = time.monotonic()
            await wait_until(lambda: slow.left, 10.0, interval=0.05, message="aged out")
            aged = slow.left[0][0] - killed
            assert broker._drain.sent is not None  # a probe was "sent", never came back
            # its limit, the probe given up (1 s), the ager's tick
            assert 3 * interval - 0.2 < aged < 3 * interval + 1.0 + 1.0
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    _report({"scenario": "lost probe", "limit_s": 3 * interval, "probe_retry_s": 1.0,
             "aged_out_after_kill_s": round(aged, 2)})


def test_overdue_agrees_with_age() -> None:
    """``ConsoleProtocol.overdue(now)`` is True exactly when ``age(now)`` would make an
    agent leave; the management broker's own agent never is."""
    from qmf_async.protocol import ConsoleProtocol
    from qmf_async.wire import SchemaRegistry

    core = ConsoleProtocol(SchemaRegistry(), agent_interval=1.0, missed_heartbeats=3)
    core.has_management = True
    core.see_agent(1, 0, 0.0, label="broker")
    core.see_agent(7, 5, 0.0, label="a")
    core.see_agent(7, 6, 2.0, label="b")
    assert not core.overdue(2.9)
    assert core.age(2.9) == []
    assert core.overdue(3.1)  # a: 3.1 s silent, more than 3 x 1 s
    assert [ev.agent[1] for ev in core.age(3.1)] == [5]
    assert not core.overdue(4.9)  # b: seen at 2.0; the broker's own agent never ages
    assert core.overdue(5.1)

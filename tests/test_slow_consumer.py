"""A console that reads nothing at all while an agent raises events as fast as the bus
takes them: its process is stopped (SIGSTOP), so not even its socket is read.  What each
side holds, what is dropped, and who counts it, on RabbitMQ (AMQP 0-9-1, QMF v1) and on
qpidd (AMQP 1.0, QMF v2).

- RabbitMQ: the console's topic queue is capped (``topic_max_length``) and drops its
  oldest messages into the loss queue, which the console counts (``topic_dropped``) once
  it runs again: the broker holds at most the cap (plus the prefetch in flight).
- qpidd: each subscription link has its own queue under qpidd's default queue limit
  (``--default-queue-limit``, 100 MiB unless set; 256 KiB here); what does not fit is
  discarded by qpidd and counted in that queue's ``discardsOverflow`` statistic.
- The console's own memory: the subscription keeps its ``maxsize`` newest items and
  counts the rest in ``dropped``; link credit (1.0) or the prefetch (0-9-1) bounds what
  the connection buffers.

Every event raised is accounted for: held by the subscription, counted as dropped by
it, or counted as lost by the broker.  The figures go to stdout (``-s``) for
docs/reliability.md.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from qmf_async import Session
from qmf_async.agent import Agent

from ._util import private_vhost, rabbitmqctl_output, wait_until
from .conftest import _start_qpidd
from .test_faults import HOLDER, TICK, _label

ROOT = Path(__file__).resolve().parent.parent
BURST = 5_000
MAXSIZE = 100
TOPIC_MAX = 1_000  # the console's topic queue cap on RabbitMQ
PREFETCH = Session().prefetch  # unacknowledged deliveries RabbitMQ may have sent
QPIDD_LIMIT = 256 * 1024  # qpidd's default queue limit in this test, in bytes


class ConsoleProcess:
    """``tests/stalled_console.py`` in a process of its own, driven over its stdin."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    async def ask(self, command: str, timeout: float = 20.0) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(command.encode() + b"\n")
        await self.proc.stdin.drain()
        line = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
        assert line, f"the console process ended (rc {self.proc.returncode})"
        return line.decode().strip()

    async def report(self) -> dict[str, Any]:
        return dict(json.loads(await self.ask("report")))

    async def quit(self, timeout: float = 20.0) -> int:
        """Ask the console to close its session and exit; its exit code."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"quit\n")
        await self.proc.stdin.drain()
        return await asyncio.wait_for(self.proc.wait(), timeout)

    def stop(self) -> None:
        os.kill(self.proc.pid, signal.SIGSTOP)

    def cont(self) -> None:
        os.kill(self.proc.pid, signal.SIGCONT)


@asynccontextmanager
async def console_process(url: str) -> AsyncIterator[ConsoleProcess]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.stalled_console", url, str(MAXSIZE), str(TOPIC_MAX),
        cwd=ROOT, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    console = ConsoleProcess(proc)
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 30.0)
        assert line.strip() == b"ready", f"the console process said {line!r}"
        yield console
    finally:
        if proc.returncode is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
            await proc.wait()


async def _burst(agent: Agent, queue: asyncio.Queue[Any], count: int) -> None:
    """Raise ticks 1..count as fast as the agent's sender takes them (its queue is kept
    below half full, so the agent drops nothing), then wait until all are sent."""
    for n in range(1, count + 1):
        agent.raise_event("tick", n=n)
        if queue.qsize() >= queue.maxsize // 2:
            await wait_until(lambda: queue.qsize() < queue.maxsize // 4, 30.0,
                             message="the agent's sender drains")
    await asyncio.wait_for(queue.join(), 30.0)


def _mib(kib: int) -> str:
    return f"{kib / 1024:.1f} MiB"


@pytest.fixture
def vhost_url(amqp_url: str) -> Any:
    with private_vhost(amqp_url, "qmf-slow") as url:
        if url == amqp_url:
            pytest.skip("needs rabbitmqctl and a local RabbitMQ to make a private vhost")
        yield url


async def test_rabbitmq_a_stopped_console_costs_the_broker_at_most_its_cap(
        vhost_url: str) -> None:
    agent = Agent(vhost_url, label=_label("ticker"), schemas=[HOLDER, TICK], interval=1.0,
                  attach=False, broker_bank=7, qmf_versions=(1,))
    agent.create_object("holder", n=0)
    await agent.start()
    try:
        async with console_process(vhost_url) as console:
            agent.raise_event("tick", n=0)  # the console fetches its schema now
            await wait_until(lambda: _held(console), 15.0, message="the first tick")
            before = await console.report()
            topic_queue = json.loads(await console.ask("queues"))["topic_queue"]
            console.stop()
            try:
                await _burst(agent, agent._runtime.outgoing, BURST)
                # the broker side: the capped topic queue, the rest dead-lettered
                rows = await _rabbit_queues(vhost_url)
                ready, unacked, memory = rows[topic_queue]
            finally:
                console.cont()
            assert ready <= TOPIC_MAX, f"{ready} ready in a queue capped at {TOPIC_MAX}"
            assert agent.stats["dropped"] == 0

            async def accounted() -> dict[str, Any] | None:
                r = await console.report()
                total = r["held"] + r["dropped"] + r["topic_dropped"]
                return r if total == BURST + 1 else None
            after = await wait_until(accounted, 30.0, interval=0.2,
                                     message="every tick held, dropped or lost, counted")
            assert after["held"] == MAXSIZE and after["newest"] == BURST  # newest kept
            # what the broker could hold of the burst: the cap, and the prefetch in
            # flight (the first tick was read and acknowledged before the stop)
            assert after["topic_dropped"] >= BURST - TOPIC_MAX - PREFETCH
            grew = after["rss_kb"] - before["rss_kb"]
            assert grew < 32 * 1024, f"the console grew {_mib(grew)}"
            answer = await console.ask("query")
            assert answer.startswith("answered 1 "), answer
            assert await console.quit() == 0
    finally:
        await agent.stop()
    print(f"\nRabbitMQ stopped console: {BURST} events; broker held {ready} ready + "
          f"{unacked} unacked ({memory / 1024:.0f} KiB), cap {TOPIC_MAX}; console: "
          f"{after['held']} held, {after['dropped']} dropped by the subscription, "
          f"{after['topic_dropped']} lost at the broker and counted; RSS "
          f"{_mib(before['rss_kb'])} -> {_mib(after['rss_kb'])} (peak "
          f"{_mib(after['peak_kb'])}); query {answer.split()[-1]} s after")


@pytest.mark.qpidd
async def test_qpidd_a_stopped_console_costs_the_broker_at_most_its_queue_limit(
        tmp_path: Path) -> None:
    qpidd = _start_qpidd(False, tmp_path / "qpidd",
                         extra=["--default-queue-limit", str(QPIDD_LIMIT)])
    agent = Agent(qpidd.url, label=_label("ticker"), schemas=[HOLDER, TICK], interval=1.0,
                  attach=False, broker_bank=7, qmf_versions=(2,))
    agent.create_object("holder", n=0)
    try:
        await agent.start()
        async with console_process(qpidd.url) as console, \
                Session(timeout=10.0) as observer:
            await observer.add_broker(qpidd.url, timeout=10.0)
            agent.raise_event("tick", n=0)
            await wait_until(lambda: _held(console), 15.0, message="the first tick")
            before = await console.report()
            links = json.loads(await console.ask("queues"))["links"]
            tick_link = next(name for key, name in links.items() if "tick" in key)
            console.stop()
            try:
                await _burst(agent, agent._runtime.outgoing, BURST)

                async def routed() -> Any:
                    (q,) = [q for q in await observer.get_objects(
                        _class="queue", _package="org.apache.qpid.broker")
                        if q.name.endswith("_" + tick_link)]
                    return q if q.msgTotalEnqueues + q.discardsOverflow == BURST + 1 else None
                queue = await wait_until(routed, 30.0, interval=0.2,
                                         message="every tick routed by qpidd")
            finally:
                console.cont()
            assert queue.byteDepth <= QPIDD_LIMIT
            assert queue.discardsOverflow > 0
            assert agent.stats["dropped"] == 0

            async def accounted() -> dict[str, Any] | None:
                r = await console.report()
                return r if r["held"] + r["dropped"] == queue.msgTotalEnqueues else None
            after = await wait_until(accounted, 30.0, interval=0.2,
                                     message="the subscription queue drained")
            # qpidd discards what arrives at a full queue: the console saw 0..k in order
            assert after["newest"] == after["held"] + after["dropped"] - 1
            assert after["held"] + after["dropped"] + queue.discardsOverflow == BURST + 1
            grew = after["rss_kb"] - before["rss_kb"]
            assert grew < 32 * 1024, f"the console grew {_mib(grew)}"
            answer = await console.ask("query")
            assert answer.startswith("answered 1 "), answer
            assert await console.quit() == 0
    finally:
        await agent.stop()
        qpidd.stop()
    print(f"\nqpidd stopped console: {BURST} events; the subscription queue held "
          f"{queue.msgDepth} ({queue.byteDepth / 1024:.0f} KiB, limit "
          f"{QPIDD_LIMIT // 1024} KiB), qpidd discarded {queue.discardsOverflow} "
          f"(discardsOverflow); console: {after['held']} held, {after['dropped']} "
          f"dropped by the subscription; RSS {_mib(before['rss_kb'])} -> "
          f"{_mib(after['rss_kb'])} (peak {_mib(after['peak_kb'])}); query "
          f"{answer.split()[-1]} s after")


async def _held(console: ConsoleProcess) -> bool:
    return bool((await console.report())["held"])


async def _rabbit_queues(url: str) -> dict[str, tuple[int, int, int]]:
    """name -> (ready, unacked, memory bytes) of every queue of the vhost of ``url``."""
    from urllib.parse import unquote, urlsplit

    vhost = unquote(urlsplit(url).path[1:]) or "/"
    out = await rabbitmqctl_output("list_queues", "-p", vhost, "--no-table-headers", "-q",
                                   "name", "messages_ready", "messages_unacknowledged",
                                   "memory")
    assert out is not None, "rabbitmqctl list_queues failed"
    rows: dict[str, tuple[int, int, int]] = {}
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) == 4:
            rows[parts[0]] = (int(parts[1]), int(parts[2]), int(parts[3]))
    return rows

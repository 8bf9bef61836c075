"""Load: many calls in flight, many agents, an event storm and a soak run, each measured
against a real broker, with what it checked.

    python benchmarks/load.py calls  [--url URL] [--count 10000] [--qpidd URL]
    python benchmarks/load.py agents [--url URL] [--agents 100] [--objects 1000]
                                     [--rcv-objects] [--trace]
    python benchmarks/load.py storm  [--url URL] [--agents 4] [--seconds 10] [--qpidd URL]
    python benchmarks/load.py raw-storm [--url URL] [--processes 2] [--seconds 10]
    python benchmarks/load.py soak   [--url URL] [--seconds 60] [--qpidd URL] [--trace]

Every scenario prints its figures as one JSON line.  The same functions run in
``tests/test_load.py``, which asserts on the figures (nothing lost, nothing swapped,
nothing leaked, memory and task counts flat).  The agents of ``agents`` and ``storm``
run in child processes of this script (``--role``), so the console's memory is its own.

- ``calls``: ``count`` concurrent ``echo(sequence, body)`` calls with distinct arguments
  (``asyncio.gather``) to an agent of the run (RabbitMQ, QMF v1) or to qpidd's own
  broker object (``--qpidd``, QMF v2); each answer is checked against its own call.
- ``agents``: a management-broker role and ``agents`` agents of ``objects`` objects each
  (a few child processes); one ``get_objects`` of them all, counted per agent.
- ``storm``: agents in child processes raise events as fast as the bus takes them
  against one console that reads them as fast as it can; every event published is
  either read, still buffered, or counted as dropped (the subscription's ``dropped``,
  the broker's dead-lettered overflow ``Broker.topic_dropped``).
  On a vhost shared with other agents their dropped messages are counted too: give
  the storm a vhost of its own (``--url amqp://.../VHOST``) for an exact account.
- ``raw-storm``: the storm's baseline: raw aiormq publishers into one queue and one
  raw consumer, no QMF: what the bus itself carries on this machine.
- ``soak``: a console and an agent doing calls, queries and events continuously;
  the console process's RSS and asyncio task count sampled every second.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import gc
import json
import os
import resource
import signal
import statistics
import sys
import threading
import time
import tracemalloc
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT))

from benchmarks._common import _broker_pids, _proc_cpu  # noqa: E402
from qmf_async import Broker, Console, QmfObject, QmfTimeout, RemoteAgent, Session  # noqa: E402
from qmf_async.agent import (  # noqa: E402
    Agent,
    Arg,
    Property,
    Statistic,
    event_class,
    method,
    object_class,
)
from qmf_async.agent.broker import ManagementBroker  # noqa: E402

DEFAULT_URL = os.environ.get("QMF_TEST_URL", "amqp://guest:guest@localhost:5672/")
SCRIPT = Path(__file__).resolve()
PACKAGE = "org.qmfasync.load"
ITEM = object_class(
    PACKAGE, "item",
    properties=[Property("source", "uint32", index=True), Property("n", "uint32", index=True)],
    statistics=[Statistic("v", "uint64")],
    methods=[method("echo", Arg("sequence", "uint32", direction="IO"),
                    Arg("body", "lstr", direction="IO"))])
TICK = event_class(PACKAGE, "tick", [Arg("source", "uint32"), Arg("n", "uint32")])
PAGE = os.sysconf("SC_PAGE_SIZE")
MB = 1 << 20


# --------------------------------------------------------------------------- measuring

def rss() -> int:
    """The resident set size of this process, in bytes (``/proc/self/statm``)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def cpu_seconds(pid: int | None = None) -> float:
    """CPU seconds process ``pid`` (this one by default) used so far."""
    return _proc_cpu(os.getpid() if pid is None else pid)


def broker_pid() -> int | None:
    """The process id of the local RabbitMQ node, if any (not a rabbitmqctl run)."""
    pids = _broker_pids()
    return pids[0] if pids else None


def fd_count() -> int:
    """Open file descriptors of this process."""
    return len(os.listdir("/proc/self/fd"))


def task_count() -> int:
    """asyncio tasks of the running loop."""
    return len(asyncio.all_tasks())


async def resting_task_count(seconds: float = 0.5, every: float = 0.05) -> int:
    """The task count at rest: the fewest tasks seen over ``seconds`` (a heartbeat's
    publish, a probe or a schema fetch may be running at any one moment)."""
    least = task_count()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        await asyncio.sleep(every)
        least = min(least, task_count())
    return least


def pending(broker: Broker) -> tuple[int, ...]:
    """Outstanding requests of ``broker``: the v1 core's sequence table and the waits,
    and over QMF v2 the v2 core's table, futures and streams; all 0 when idle."""
    v2 = broker._v2
    if v2 is None:
        return len(broker._core), len(broker._waits)
    return (len(broker._core), len(broker._waits), len(v2.core), len(v2._waits))


class RssSampler:
    """Samples this process's RSS from a thread every ``every`` seconds (a thread, so
    that a busy event loop does not hide the peak)."""

    def __init__(self, every: float = 0.02) -> None:
        self.every = every
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.monotonic(), rss()))
            self._stop.wait(self.every)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5.0)
        self.samples.append((time.monotonic(), rss()))

    @property
    def peak(self) -> int:
        return max(v for _, v in self.samples)


async def wait_until(predicate: Callable[[], Any | Awaitable[Any]], timeout: float,
                     message: str, interval: float = 0.02) -> Any:
    """Poll ``predicate`` until truthy; its value.

    Raises:
        AssertionError: still falsy after ``timeout`` seconds (``message`` says what).
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {timeout} s: {message} (last: {value!r})")
        await asyncio.sleep(interval)


def _label(what: str) -> str:
    return f"load-{what}-{uuid.uuid4().hex[:8]}"


async def _echo(obj: Any, **args: Any) -> dict[str, Any]:
    return args


def _item_agent(url: str, label: str, objects: int, *, source: int = 0, interval: float = 2.0,
                attach: bool = False, qmf_versions: Sequence[int] = (1,),
                max_outgoing: int = 10_000) -> Agent:
    agent = Agent(url, label=label, schemas=[ITEM, TICK], interval=interval, attach=attach,
                  broker_bank=7, qmf_versions=qmf_versions, max_outgoing=max_outgoing,
                  max_get_per_body=100, attach_timeout=10.0)
    for n in range(objects):
        agent.create_object("item", source=source, n=n, v=n)
    agent.set_method_handler("item", "echo", _echo)
    return agent


def _find(session: Session, agent: Agent) -> RemoteAgent | None:
    """The session's view of ``agent`` (by its v2 name, else its banks: an agent found
    by its v1 heartbeats has no label)."""
    for a in session.get_agents():
        if a.name and a.name == agent.v2_name:
            return a
        if not a.name and (a.broker_bank, a.agent_bank) == (agent.broker_bank,
                                                            agent.agent_bank):
            return a
    return None


# --------------------------------------------------------------------------- child processes

class Child:
    """A child process of this script (``--role ...``), reading its stdout lines."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    async def start(cls, *args: str) -> Child:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(SCRIPT), "--role", *args, stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, env=env)
        return cls(proc)

    async def line(self, timeout: float) -> str:
        """The next line of its stdout.

        Raises:
            AssertionError: it ended, or said nothing within ``timeout`` seconds.
        """
        assert self.proc.stdout is not None
        try:
            raw = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
        except TimeoutError:
            raise AssertionError(f"child said nothing within {timeout} s") from None
        if not raw:
            raise AssertionError(f"child ended (exit {await self.proc.wait()})")
        return raw.decode().strip()

    def say(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text.encode() + b"\n")

    async def stop(self, timeout: float = 10.0) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), timeout)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()


@contextlib.asynccontextmanager
async def children(specs: Sequence[Sequence[str]], ready_timeout: float
                   ) -> AsyncIterator[list[Child]]:
    """Start one child per spec and wait for each to print ``ready``; stopped after."""
    started: list[Child] = []
    try:
        for spec in specs:
            started.append(await Child.start(*spec))
        for child in started:
            line = await child.line(ready_timeout)
            assert line.startswith("ready"), f"child said {line!r}"
        yield started
    finally:
        await asyncio.gather(*(c.stop() for c in started))


async def _until_terminated() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


async def role_role(url: str, interval: float) -> None:
    """A management-broker role until SIGTERM."""
    role = ManagementBroker(url, broker_id=uuid.uuid4(), label=_label("role"),
                            interval=interval, agent_timeout=10 * interval)
    await role.start()
    print("ready", flush=True)
    try:
        await _until_terminated()
    finally:
        await role.stop(2.0)


async def role_agents(url: str, prefix: str, first: int, count: int, objects: int,
                      interval: float) -> None:
    """``count`` agents ``PREFIX-<i>`` (sources ``first``..), ``objects`` items each,
    attached to a management broker, until SIGTERM."""
    agents = [_item_agent(url, f"{prefix}-{i}", objects, source=i, interval=interval,
                          attach=True) for i in range(first, first + count)]
    await asyncio.gather(*(a.start() for a in agents))
    print("ready", flush=True)
    try:
        await _until_terminated()
    finally:
        await asyncio.gather(*(a.stop(2.0) for a in agents))


async def role_storm(url: str, prefix: str, first: int, count: int, seconds: float,
                     version: int = 1) -> None:
    """``count`` agents (QMF ``version``) raising ``tick`` events: one each at once (the
    warm-up), the storm for ``seconds`` after ``go`` on stdin, as fast as each agent's
    send queue takes them; then one JSON line of counts per agent."""
    agents = [_item_agent(url, f"{prefix}-{i}", 0, source=i, interval=3600.0,
                          max_outgoing=2_000, qmf_versions=(version,))
              for i in range(first, first + count)]
    await asyncio.gather(*(a.start() for a in agents))
    for i, a in enumerate(agents):
        a.raise_event("tick", source=first + i, n=0)
    print("ready", flush=True)
    reader = asyncio.StreamReader()
    await asyncio.get_running_loop().connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    assert (await reader.readline()).strip() == b"go"
    before = [(a.stats["published"], a.stats["dropped"]) for a in agents]
    raised = [0] * count
    started = time.monotonic()
    end = started + seconds

    async def storm(i: int, agent: Agent) -> None:
        queue: asyncio.Queue[Any] = agent._outgoing  # v1 and v2 alike
        limit = queue.maxsize // 2
        n = 0
        while time.monotonic() < end:
            for _ in range(50):
                n += 1
                agent.raise_event("tick", source=first + i, n=n)
            if queue.qsize() > limit:  # the bus is slower: wait for the sender
                # the agent's send queue signals nothing when it drains: poll it
                while queue.qsize() > limit // 2 and time.monotonic() < end:  # noqa: ASYNC110
                    await asyncio.sleep(0.001)
            else:
                await asyncio.sleep(0)
        raised[i] = n

    await asyncio.gather(*(storm(i, a) for i, a in enumerate(agents)))
    await asyncio.gather(*(a.stop(30.0) for a in agents))  # flushes what is queued
    sent = time.monotonic() - started
    out = [{"source": first + i, "raised": raised[i],
            "published": a.stats["published"] - before[i][0],
            "dropped": a.stats["dropped"] - before[i][1]} for i, a in enumerate(agents)]
    print(json.dumps({"agents": out, "seconds": sent}), flush=True)
    await _until_terminated()


async def role_raw_storm(url: str, queue: str, seconds: float, size: int) -> None:
    """The storm's baseline publisher: raw aiormq, ``size``-byte bodies to ``queue``
    (through ``amq.direct``, no publisher confirms) for ``seconds`` after ``go``; then
    one JSON line with the count."""
    import aiormq

    conn = await aiormq.connect(url)
    ch = await conn.channel(publisher_confirms=False)
    print("ready", flush=True)
    reader = asyncio.StreamReader()
    await asyncio.get_running_loop().connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    assert (await reader.readline()).strip() == b"go"
    body = b"x" * size
    sent = 0
    started = time.monotonic()
    end = started + seconds
    while time.monotonic() < end:
        for _ in range(50):
            await ch.basic_publish(body, exchange="amq.direct", routing_key=queue)
        sent += 50
    await conn.close()
    print(json.dumps({"published": sent, "seconds": time.monotonic() - started}), flush=True)
    await _until_terminated()


# --------------------------------------------------------------------------- scenarios


async def raw_storm(url: str, *, processes: int = 2, seconds: float = 10.0, size: int = 64
                    ) -> dict[str, Any]:
    """The bus's own ceiling on this machine for the storm's shape: ``processes`` raw
    aiormq publishers (no QMF) into one queue, one raw consumer (``no_ack``) counting.

    Returns the figures: published, received, their rates, CPU per process.
    """
    import aiormq

    conn = await aiormq.connect(url)
    try:
        ch = await conn.channel()
        queue = f"load-raw-{uuid.uuid4().hex[:8]}"
        await ch.queue_declare(queue, exclusive=True, auto_delete=True)
        await ch.queue_bind(queue, "amq.direct", routing_key=queue)
        got = 0
        last = time.monotonic()

        async def on_message(_msg: Any) -> None:
            nonlocal got, last
            got += 1
            last = time.monotonic()

        await ch.basic_consume(queue, on_message, no_ack=True)
        specs = [["rawstorm", url, queue, str(seconds), str(size)] for _ in range(processes)]
        async with children(specs, 30.0) as kids:
            beam = broker_pid()
            cpu0 = (cpu_seconds(), [cpu_seconds(k.proc.pid) for k in kids],
                    cpu_seconds(beam) if beam else 0.0)
            started = time.monotonic()
            for kid in kids:
                kid.say("go")
            reports = [json.loads(await kid.line(seconds + 60.0)) for kid in kids]
            cpu_pub = sum(cpu_seconds(k.proc.pid) - c for k, c in zip(kids, cpu0[1], strict=True))
            published = sum(r["published"] for r in reports)
            with contextlib.suppress(AssertionError):
                await wait_until(lambda: got >= published, 60.0, "every raw message",
                                 interval=0.1)
            cpu_con = cpu_seconds() - cpu0[0]
            cpu_broker = (cpu_seconds(beam) - cpu0[2]) if beam else None
    finally:
        await conn.close()
    return {"scenario": "raw-storm", "processes": processes, "seconds": seconds,
            "body_bytes": size, "published": published,
            "offered_per_s": round(published / max(r["seconds"] for r in reports)),
            "received": got, "received_per_s": round(got / max(1e-9, last - started)),
            "cpu_s": {"publishers": round(cpu_pub, 2), "consumer": round(cpu_con, 2),
                      "broker": None if cpu_broker is None else round(cpu_broker, 2)}}

@contextlib.asynccontextmanager
async def _echo_target(url: str, qpidd: bool) -> AsyncIterator[tuple[Session, QmfObject]]:
    """A session and the object whose ``echo`` is called: qpidd's broker object, or an
    item of an agent of the run (RabbitMQ)."""
    if qpidd:
        async with Session(timeout=60.0) as session:
            await session.add_broker(url, timeout=10.0)
            (b,) = await session.get_objects(_class="broker", _package="org.apache.qpid.broker",
                                             _timeout=10.0)
            yield session, b
        return
    label = _label("echo")
    agent = _item_agent(url, label, 1)
    await agent.start()
    try:
        async with Session(timeout=60.0, agent_interval=2.0) as session:
            await session.add_broker(url, timeout=10.0)
            found = await wait_until(lambda: _find(session, agent), 15.0, "the echo agent")
            (item,) = await session.get_objects(_class="item", _agent=found, _timeout=10.0)
            yield session, item
    finally:
        await agent.stop()


async def concurrent_calls(url: str, count: int, *, qpidd: bool = False,
                           queues: Callable[[Session], Awaitable[int]] | None = None
                           ) -> dict[str, Any]:
    """``count`` concurrent ``echo`` calls with distinct arguments; each answer checked
    against its own call.  ``queues`` counts the broker's queues (before and after).

    Returns the figures: calls, seconds, calls/s, lost, misrouted, and the leak
    checks (pending tables, tasks, file descriptors, queues before and after).
    """
    async with _echo_target(url, qpidd) as (session, target):
        broker = session.brokers[0]
        for i in range(20):  # warm-up
            assert (await target.echo(i, f"warm-{i}", _timeout=10.0)).body == f"warm-{i}"
        gc.collect()
        tasks, fds, rss0 = task_count(), fd_count(), rss()
        queues0 = await queues(session) if queues else None
        with RssSampler(0.05) as mem:
            started, cpu0 = time.monotonic(), time.process_time()
            results = await asyncio.wait_for(asyncio.gather(
                *(target.echo(i, f"call-{i}", _timeout=120.0) for i in range(count)),
                return_exceptions=True), 180.0)
            took, cpu = time.monotonic() - started, time.process_time() - cpu0
        errors = collections.Counter(type(r).__name__ for r in results
                                     if isinstance(r, BaseException))
        misrouted = sum(1 for i, r in enumerate(results) if not isinstance(r, BaseException)
                        and (r.status, r.out_args.get("sequence"), r.out_args.get("body"))
                        != (0, i, f"call-{i}"))
        after_pending = pending(broker)
        try:
            await wait_until(lambda: task_count() <= tasks, 10.0, "tasks back")
            await wait_until(lambda: fd_count() <= fds, 10.0, "descriptors back")
        except AssertionError:
            pass  # reported in the figures
        queues1 = await queues(session) if queues else None
        return {"scenario": "calls", "bus": "qpidd" if qpidd else "rabbitmq",
                "calls": count, "seconds": round(took, 3),
                "calls_per_s": round(count / took),
                # this process's CPU over the calls (the console, and on RabbitMQ the
                # agent too: it runs in this process), all threads
                "cpu_s": round(cpu, 4), "lost": sum(errors.values()),
                "errors": dict(errors), "misrouted": misrouted,
                "pending_after": list(after_pending), "tasks_before": tasks,
                "tasks_after": task_count(), "fds_before": fds, "fds_after": fd_count(),
                "queues_before": queues0, "queues_after": queues1,
                "rss_mb_before": round(rss0 / MB, 1), "rss_mb_peak": round(mem.peak / MB, 1)}


class HeartbeatCounter(Console):
    """Counts agent heartbeats, per agent label."""

    def __init__(self) -> None:
        self.beats: collections.Counter[str] = collections.Counter()
        #: agents that left: (when, label, why)
        self.left: list[tuple[float, str, str | None]] = []
        self.lag: list[float] = []

    def heartbeat(self, agent: RemoteAgent, timestamp: int) -> None:
        self.beats[agent.label] += 1
        #: how late heartbeats are handled (wall clock at the agent to here), seconds
        self.lag.append(time.time() - timestamp / 1e9)

    def del_agent(self, agent: RemoteAgent) -> None:
        broker = agent.broker
        why = broker._departed_why((agent.broker_bank, agent.agent_bank)) \
            if isinstance(broker, Broker) else None
        self.left.append((time.monotonic(), agent.label, why))


async def many_agents(url: str, agents: int, objects: int, *, processes: int = 4,
                      interval: float = 2.0, trace: bool = False, rcv_objects: bool = False
                      ) -> dict[str, Any]:
    """``agents`` agents of ``objects`` items behind one management-broker role (child
    processes); one ``get_objects`` of all; then every agent must heartbeat again.

    Returns the figures: agents found and how long it took, objects per agent
    (``wrong`` lists agents whose objects are not exactly theirs), seconds, the
    console's RSS before and at peak (and the tracemalloc peak when ``trace``), and
    the heartbeats after the query.
    """
    prefix = _label("agent")
    per = -(-agents // processes)
    specs: list[list[str]] = [["agents", url, prefix, str(first), str(min(per, agents - first)),
                               str(objects), str(interval)]
                              for first in range(0, agents, per)]
    counter = HeartbeatCounter()
    async with children([["role", url, str(interval)]], 60.0):
        async with Session(console=counter, timeout=300.0, agent_interval=interval,
                           missed_heartbeats=5, rcv_objects=rcv_objects,
                           max_objects=2 * agents * objects) as session:
            await session.add_broker(url, timeout=10.0)
            started = time.monotonic()
            async with children(specs, 300.0):
                await wait_until(
                    lambda: len([a for a in session.get_agents()
                                 if a.label.startswith(prefix)]) == agents,
                    120.0, f"{agents} agents known")
                found_after = time.monotonic() - started
                gc.collect()
                rss0 = rss()
                if trace:
                    tracemalloc.start()
                with RssSampler(0.02) as mem:
                    t0 = time.monotonic()
                    objs = await session.get_objects(_class="item", _package=PACKAGE,
                                                     _timeout=600.0)
                    took = time.monotonic() - t0
                traced = tracemalloc.get_traced_memory()[1] if trace else None
                if trace:
                    tracemalloc.stop()
                per_agent: dict[str, list[int]] = collections.defaultdict(list)
                for o in objs:
                    a = o.get_agent()
                    per_agent[a.label if a else "?"].append(o.n)
                    assert a is not None and a.label == f"{prefix}-{o.source}"
                wrong = sorted(label for label, ns in per_agent.items()
                               if sorted(ns) != list(range(objects)))
                counts = collections.Counter(len(v) for v in per_agent.values())
                del objs, per_agent
                # every agent heartbeats again after the query, and is still known
                beats = dict(counter.beats)

                def silent() -> list[str]:
                    return [f"{prefix}-{i}" for i in range(agents)
                            if counter.beats[f"{prefix}-{i}"] <= beats.get(f"{prefix}-{i}", 0)]
                try:
                    await wait_until(lambda: not silent(), 5 * interval,
                                     "a heartbeat from each agent after the query")
                except AssertionError as exc:
                    quiet = silent()
                    known = {a.label for a in session.get_agents()}
                    raise AssertionError(
                        f"{exc}: {len(quiet)} silent, e.g. {quiet[:5]}; of those known to "
                        f"the session: {len([q for q in quiet if q in known])}; beats before "
                        f"the query: {[beats.get(q, 0) for q in quiet[:5]]}; query "
                        f"{t0 - started:.1f} to {t0 + took - started:.1f} s; left: "
                        f"{[(round(t - started, 1), w) for t, _, w in counter.left[:5]]}; "
                        f"heartbeat lag max {max(counter.lag):.1f} s"
                    ) from None
                still = len([a for a in session.get_agents() if a.label.startswith(prefix)])
    return {"scenario": "agents", "agents": agents, "objects_each": objects,
            "processes": len(specs), "found_s": round(found_after, 2),
            "objects": sum(k * v for k, v in counts.items()),
            "objects_per_agent": {str(k): v for k, v in counts.items()}, "wrong": wrong,
            "seconds": round(took, 3), "objects_per_s": round(agents * objects / took),
            "rss_mb_before": round(rss0 / MB, 1), "rss_mb_peak": round(mem.peak / MB, 1),
            "tracemalloc_peak_mb": None if traced is None else round(traced / MB, 1),
            "agents_after": still, "heartbeat_interval": interval}


async def event_storm(url: str, *, agents: int = 4, processes: int = 2, seconds: float = 10.0,
                      maxsize: int = 10_000, topic_max_length: int = 100_000,
                      slow: float = 0.0, qpidd: bool = False) -> dict[str, Any]:
    """Agents in ``processes`` child processes raise ``tick`` events for ``seconds``
    as fast as the bus takes them; one console reads them (sleeping ``slow`` seconds
    per 1,000 read, to make it the slower side).  Every event published must be
    read, buffered, or counted dropped.  With ``qpidd``, QMF v2 agents on qpidd
    (AMQP 1.0: the link credit bounds what qpidd sends ahead; no dead letters).

    Returns the figures: offered and received rates, the accounting, per-source order
    checks, and the console's RSS sampled every 0.25 s.
    """
    prefix = _label("storm")
    per = -(-agents // processes)
    specs = [["storm", url, prefix, str(first), str(min(per, agents - first)), str(seconds),
              "2" if qpidd else "1"] for first in range(0, agents, per)]
    async with Session(timeout=30.0, agent_interval=3600.0, topic_max_length=topic_max_length,
                       rcv_objects=False) as session:
        broker = await session.add_broker(url, timeout=10.0)
        sub = session.events(_class="tick", _package=PACKAGE, maxsize=maxsize)
        read = 0
        last_n: dict[int, int] = {}
        disorder = 0
        warm: set[int] = set()
        last_read = time.monotonic()

        async def consume() -> None:
            nonlocal read, disorder, last_read
            async for ev in sub:
                source, n = ev.arguments["source"], ev.arguments["n"]
                if n == 0:
                    warm.add(source)
                    continue
                read += 1
                last_read = time.monotonic()
                if n <= last_n.get(source, 0):
                    disorder += 1
                last_n[source] = n
                if slow and read % 1000 == 0:
                    await asyncio.sleep(slow)

        reader = asyncio.create_task(consume())
        try:
            async with children(specs, 60.0) as kids:
                await wait_until(lambda: len(warm) == agents, 30.0, "a first tick from each")
                gc.collect()
                dropped0 = broker.topic_dropped
                held0, bad0 = session.held_dropped, session.malformed
                samples: list[tuple[float, int]] = []
                beam = None if qpidd else broker_pid()  # (several qpidd may run)
                cpu0 = (cpu_seconds(), [cpu_seconds(k.proc.pid) for k in kids],
                        cpu_seconds(beam) if beam else 0.0)
                with RssSampler(0.25) as mem:
                    started = time.monotonic()
                    for kid in kids:
                        kid.say("go")
                    reports = [json.loads(await kid.line(seconds + 120.0)) for kid in kids]
                    cpu_agents = sum(cpu_seconds(k.proc.pid) - c
                                     for k, c in zip(kids, cpu0[1], strict=True))
                    sent = [a for r in reports for a in r["agents"]]
                    published = sum(a["published"] for a in sent)

                    def accounted() -> int:
                        return (read + len(sub) + sub.dropped + broker.topic_dropped - dropped0
                                + session.held_dropped - held0 + session.malformed - bad0)
                    with contextlib.suppress(AssertionError):
                        await wait_until(lambda: accounted() >= published, 120.0,
                                         "every event read or counted", interval=0.1)
                    # nothing more arrives (a count above ``published`` would show)
                    await asyncio.sleep(0.5)
                    samples = list(mem.samples)
                    cpu_console = cpu_seconds() - cpu0[0]
                    cpu_broker = (cpu_seconds(beam) - cpu0[2]) if beam else None
                    wall = time.monotonic() - started
                offer_s = max(r["seconds"] for r in reports)
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
            sub.close()
    rss_mb = [round(v / MB, 1) for _, v in samples]
    warmup = max(1, len(rss_mb) // 4)
    return {"scenario": "storm", "agents": agents, "processes": len(specs),
            "seconds": seconds, "raised": sum(a["raised"] for a in sent),
            "agent_dropped": sum(a["dropped"] for a in sent), "published": published,
            "offered_per_s": round(published / offer_s),
            "read": read, "received_per_s": round(read / max(1e-9, last_read - started)),
            "buffered": len(sub), "subscription_dropped": sub.dropped,
            "topic_dropped": broker.topic_dropped - dropped0,
            "held_dropped": session.held_dropped - held0, "malformed": session.malformed - bad0,
            "accounted": accounted(), "disorder": disorder,
            "rss_mb_first": rss_mb[0], "rss_mb_after_warmup": rss_mb[warmup],
            "rss_mb_max": max(rss_mb), "rss_mb_last": rss_mb[-1],
            "rss_growth_after_warmup_mb": round(max(rss_mb[warmup:]) - rss_mb[warmup], 1),
            "rss_samples": len(rss_mb), "wall_s": round(wall, 2),
            "cpu_s": {"agents": round(cpu_agents, 2), "console": round(cpu_console, 2),
                      "broker": None if cpu_broker is None else round(cpu_broker, 2)}}


async def soak(url: str, seconds: float, *, qpidd: bool = False, every: float = 1.0,
               trace: bool = False) -> dict[str, Any]:
    """A console and an agent doing calls (batches of 20 concurrent), queries (all 200
    objects), events (about 500/s, read by a subscription) and object updates
    (published every second) for ``seconds``; RSS (after a ``gc.collect``), the
    asyncio task count and the Python heap's allocated blocks
    (``sys.getallocatedblocks``) sampled every ``every`` seconds.

    Returns the figures: the work done, errors, the samples and the growth after a
    warm-up (the first fifth, at least 3 s): the median of the last three samples
    less the median of the first three.  With ``trace``, the allocation sites that
    grew most from the end of the warm-up to the end (tracemalloc; it slows the run).

    Raises:
        ValueError: ``seconds`` is under 6.
    """
    if seconds < 6:
        raise ValueError(f"a soak needs at least 6 s (3 of warm-up), not {seconds}")
    label = _label("soak")
    versions = (2,) if qpidd else (1,)
    agent = _item_agent(url, label, 200, interval=1.0, qmf_versions=versions)
    await agent.start()
    done: collections.Counter[str] = collections.Counter()
    errors: collections.Counter[str] = collections.Counter()
    samples: list[tuple[float, int, int, int]] = []
    try:
        async with Session(timeout=30.0, agent_interval=1.0) as session:
            broker = await session.add_broker(url, timeout=10.0)
            found = await wait_until(lambda: _find(session, agent), 15.0, "the soak agent")
            items = await session.get_objects(_class="item", _agent=found, _timeout=10.0)
            item = items[0]
            events = session.events(_class="tick", _package=PACKAGE, maxsize=1000)
            updates = session.object_updates(_class="item", _package=PACKAGE, maxsize=1000)
            gc.collect()
            idle_tasks, fds = await resting_task_count(), fd_count()
            stop = asyncio.Event()

            async def guarded(what: str, step: Callable[[], Awaitable[None]]) -> None:
                while not stop.is_set():
                    try:
                        await step()
                    except Exception as exc:  # counted, checked by the caller
                        errors[f"{what}: {type(exc).__name__}"] += 1
                        await asyncio.sleep(0.1)

            seq = 0

            async def calls() -> None:
                nonlocal seq
                base = seq
                seq += 20
                got = await asyncio.gather(*(item.echo(base + i, f"soak-{base + i}",
                                                       _timeout=30.0) for i in range(20)))
                for i, r in enumerate(got):
                    if (r.sequence, r.body) != (base + i, f"soak-{base + i}"):
                        errors["calls: misrouted"] += 1
                done["calls"] += 20
                await asyncio.sleep(0.02)

            async def queries() -> None:
                objs = await session.get_objects(_class="item", _agent=found, _timeout=30.0)
                if sorted(o.n for o in objs) != list(range(200)):
                    errors["queries: wrong objects"] += 1
                done["queries"] += 1
                await asyncio.sleep(0.1)

            ticks = 0

            async def raise_events() -> None:
                nonlocal ticks
                for _ in range(50):
                    ticks += 1
                    agent.raise_event("tick", source=0, n=ticks)
                for obj in agent.objects("item")[:20]:
                    obj.inc("v")
                done["raised"] += 50
                await asyncio.sleep(0.1)

            async def read(sub: Any, what: str) -> None:
                try:
                    await sub.get(5.0)
                except QmfTimeout:
                    if stop.is_set():  # the others stopped first
                        return
                    raise
                done[what] += 1

            workers = [asyncio.create_task(guarded(what, step)) for what, step in (
                ("calls", calls), ("queries", queries), ("events", raise_events),
                ("read events", lambda: read(events, "events read")),
                ("read updates", lambda: read(updates, "updates read")))]
            started = time.monotonic()
            warm = max(3.0, seconds / 5)
            snapshots: list[tracemalloc.Snapshot] = []
            if trace:
                tracemalloc.start(10)
            try:
                while time.monotonic() - started < seconds:
                    await asyncio.sleep(every)
                    gc.collect()
                    samples.append((time.monotonic() - started, rss(), task_count(),
                                    sys.getallocatedblocks()))
                    if trace and not snapshots and samples[-1][0] >= warm:
                        snapshots.append(tracemalloc.take_snapshot())
                if trace:
                    snapshots.append(tracemalloc.take_snapshot())
            finally:
                stop.set()
                await asyncio.wait(workers, timeout=35.0)
                for w in workers:
                    w.cancel()
                await asyncio.gather(*workers, return_exceptions=True)
            events.close()
            updates.close()
            with contextlib.suppress(AssertionError):
                await wait_until(lambda: not any(pending(broker)), 10.0, "idle")
                await wait_until(lambda: task_count() <= idle_tasks, 10.0, "tasks back")
                await wait_until(lambda: fd_count() <= fds, 10.0, "descriptors back")
            end_pending, end_fds = pending(broker), fd_count()
            end_tasks = await resting_task_count()
            dropped = {"events": events.dropped, "updates": updates.dropped,
                       "topic": broker.topic_dropped}
    finally:
        await agent.stop()
    growth: list[str] = []
    if trace:
        tracemalloc.stop()
        if len(snapshots) == 2:
            diff = snapshots[1].compare_to(snapshots[0], "traceback")
            growth = [f"{d.size_diff / 1024:+.1f} kB {d.count_diff:+d}: "
                      + " < ".join(f"{Path(fr.filename).name}:{fr.lineno}"
                                   for fr in list(d.traceback)[-5:]) for d in diff[:8]]
    after = [s for s in samples if s[0] >= warm]
    first = statistics.median(s[1] for s in after[:3])
    last = statistics.median(s[1] for s in after[-3:])
    warm_tasks = [s[2] for s in samples if s[0] < warm] or [samples[0][2]]
    return {"scenario": "soak", "bus": "qpidd" if qpidd else "rabbitmq", "seconds": seconds,
            "done": dict(done), "errors": dict(errors), "dropped": dropped,
            "rss_mb_after_warmup": round(first / MB, 1), "rss_mb_end": round(last / MB, 1),
            "rss_growth_mb": round((last - first) / MB, 2),
            "rss_mb_max": round(max(s[1] for s in after) / MB, 1),
            "tasks_idle_before": idle_tasks, "tasks_idle_after": end_tasks,
            "tasks_max_warmup": max(warm_tasks), "tasks_max_after_warmup":
                max(s[2] for s in after), "tasks_min_after_warmup": min(s[2] for s in after),
            "pending_after": list(end_pending), "fds_before": fds, "fds_after": end_fds,
            "samples": len(samples),
            "blocks_after_warmup": statistics.median(s[3] for s in after[:3]),
            "blocks_end": statistics.median(s[3] for s in after[-3:]),
            # the lowest count of each half after warm-up: the heap's floor, whatever
            # the phase of its swings when a sample is taken
            "blocks_floor_first": min(s[3] for s in after[:max(1, len(after) // 2)]),
            "blocks_floor_last": min(s[3] for s in after[max(1, len(after) // 2):] or after),
            "rss_mb": [round(s[1] / MB, 2) for s in samples], "tasks": [s[2] for s in samples],
            "blocks": [s[3] for s in samples],
            "traced_growth": growth}


# --------------------------------------------------------------------------- command line

def _machine() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "load": os.getloadavg(),
            "maxrss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


async def _run_role(args: list[str]) -> None:
    kind, rest = args[0], args[1:]
    if kind == "role":
        await role_role(rest[0], float(rest[1]))
    elif kind == "agents":
        await role_agents(rest[0], rest[1], int(rest[2]), int(rest[3]), int(rest[4]),
                          float(rest[5]))
    elif kind == "rawstorm":
        await role_raw_storm(rest[0], rest[1], float(rest[2]), int(rest[3]))
    elif kind == "storm":
        await role_storm(rest[0], rest[1], int(rest[2]), int(rest[3]), float(rest[4]),
                         int(rest[5]))
    else:
        raise SystemExit(f"unknown role {kind}")


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (see the module docstring)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--role"]:
        asyncio.run(_run_role(argv[1:]))
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("scenario", choices=["calls", "agents", "storm", "raw-storm", "soak"])
    p.add_argument("--url", default=DEFAULT_URL, help="RabbitMQ URL (AMQP 0-9-1)")
    p.add_argument("--qpidd", help="a qpidd URL: run calls, storm or soak there (QMF v2)")
    p.add_argument("--count", type=int, default=10_000, help="calls in flight")
    p.add_argument("--agents", type=int, help="agents (default 100; storm 4)")
    p.add_argument("--objects", type=int, default=1000, help="objects per agent")
    p.add_argument("--processes", type=int, help="agent processes (default 4; storm 2)")
    p.add_argument("--seconds", type=float, help="storm or soak duration (10; 60)")
    p.add_argument("--rcv-objects", action="store_true",
                   help="agents: the console also receives the agents' object publications")
    p.add_argument("--trace", action="store_true",
                   help="agents: the tracemalloc peak too; soak: what grew (tracemalloc)")
    ns = p.parse_args(argv)
    url = ns.qpidd or ns.url
    figures: dict[str, Any]
    if ns.scenario == "calls":
        figures = asyncio.run(concurrent_calls(url, ns.count, qpidd=bool(ns.qpidd)))
    elif ns.scenario == "agents":
        figures = asyncio.run(many_agents(ns.url, ns.agents or 100, ns.objects,
                                          processes=ns.processes or 4, trace=ns.trace,
                                          rcv_objects=ns.rcv_objects))
    elif ns.scenario == "storm":
        figures = asyncio.run(event_storm(url, agents=ns.agents or 4,
                                          processes=ns.processes or 2,
                                          seconds=ns.seconds or 10.0, qpidd=bool(ns.qpidd)))
    elif ns.scenario == "raw-storm":
        figures = asyncio.run(raw_storm(ns.url, processes=ns.processes or 2,
                                        seconds=ns.seconds or 10.0))
    else:
        figures = asyncio.run(soak(url, ns.seconds or 60.0, qpidd=bool(ns.qpidd),
                                   trace=ns.trace))
    figures["machine"] = _machine()
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())

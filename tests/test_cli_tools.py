"""The ``qmf stat``, ``config``, ``events`` and ``queue-stats`` tools end to end: run as
subprocesses (``python -m qmf_async ...``, URL from ``QMF_URL``) against the real
RabbitMQ, with the management-broker role and the demo broker agent running in this
process on a private vhost of the module (made with rabbitmqctl; the module is skipped
where it cannot make one, since other test modules' roles and agents would answer too).
"""

from __future__ import annotations

import ast
import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import attrs
import pytest
import pytest_asyncio

from qmf_async.agent.broker import ManagementBroker

from ._util import drop_vhost, import_example, make_vhost, qmf_in_process, vhost_url

ROOT = Path(__file__).resolve().parent.parent
CLI = ROOT / "qmf_async" / "cli"
INTERVAL = 0.3
LABEL = f"cli-tools-demo-{uuid.uuid4().hex[:8]}"
DEMO_QUEUES = {"orders", "invoices", "audit", "work-1"}
DEMO_EXCHANGES = {"", "amq.direct", "amq.topic", "amq.fanout"}

aio = pytest.mark.asyncio(loop_scope="module")
integration = pytest.mark.integration


_import_example = import_example


demo = _import_example("demo_agent")


def _unique(what: str) -> str:
    return f"cli-{what}-{uuid.uuid4().hex[:6]}"


# --------------------------------------------------------------------------- no private imports


def test_tools_import_no_private_module() -> None:
    """qmf_async/cli/* use the public API only: no ``qmf_async._x`` (or ``.._x``) import."""
    offenders = []
    for path in sorted(CLI.glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level >= 2:  # relative to the qmf_async package
                    base = "qmf_async" + (f".{node.module}" if node.module else "")
                elif node.level == 1:  # a sibling module of qmf_async.tools.cli: allowed
                    continue
                else:
                    base = node.module or ""
                names = [base] + [f"{base}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                names = [node.value]  # importlib.import_module("qmf_async._x") and the like
            for name in names:
                parts = name.split(".")
                if parts[0] == "qmf_async" and any(_private(p) for p in parts[1:]):
                    offenders.append(f"{path.name}:{getattr(node, 'lineno', '?')}: {name}")
    assert not offenders, offenders


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


# --------------------------------------------------------------------------- pure helpers


def test_units_and_rates() -> None:
    from qmf_async.tools.cli import _render, queue_stats

    assert _render.fmt_bytes(512) == "512 B"
    assert _render.fmt_bytes(21_315) == "20.8 KiB"
    assert _render.fmt_bytes(3 * 1024**3) == "3.0 GiB"
    assert _render.fmt_count(1_234_567) == "1,234,567"
    assert _render.fmt_duration(5_500_000_000) == "5.5s"
    assert _render.fmt_duration(187 * 10**9) == "3m 07s"
    assert _render.fmt_duration((2 * 86400 + 3 * 3600) * 10**9) == "2d 03h"
    now = time.time()
    assert _render.fmt_time(int(now * 1e9), now=now) == time.strftime("%H:%M:%S",
                                                                      time.localtime(now))
    assert _render.fmt_time(0) == "-"
    assert _render.fmt_rate(None) == "-" and _render.fmt_rate(2.5) == "2.50"

    class Q:
        def get(self, name: str, default: Any = None) -> Any:
            return {"name": "q", "msgDepth": 4}.get(name, default)

        def get_agent(self) -> None:
            return None

        def get_object_id(self) -> str:
            return "0-1-1-10-5"

    s = queue_stats.Sample
    q: Any = Q()
    row = queue_stats.rate_row(q, s(1_000_000_000, 7, 10, 4), s(3_000_000_000, 7, 30, 8))
    assert row["interval"] == 2.0 and row["enqueue_rate"] == 10.0 and row["dequeue_rate"] == 2.0
    # re-created queue (other create time), counters going back, no time passed: no rate
    for before in (s(1, 6, 10, 4), s(1, 7, 40, 4), s(3_000_000_000, 7, 10, 4)):
        row = queue_stats.rate_row(q, before, s(3_000_000_000, 7, 30, 8))
        assert row["enqueue_rate"] is None and row["depth"] == 4


# --------------------------------------------------------------------------- the bus


def _rabbitmqctl(*args: str) -> str | None:
    ctl = shutil.which("rabbitmqctl") or shutil.which("rabbitmqctl", path="/usr/sbin:/sbin")
    if ctl is None:
        return None
    try:
        done = subprocess.run([ctl, "-q", "-s", *args], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.decode() if done.returncode == 0 else None


@attrs.frozen
class Vhosts:
    url: str  #: the bus: role and demo agent
    empty_url: str  #: nobody there
    names: tuple[str, str]


@pytest.fixture(scope="module")
def vhosts(amqp_url: str) -> Iterator[Vhosts]:
    parts = urlsplit(amqp_url)
    if parts.hostname not in ("localhost", "127.0.0.1", "::1"):
        pytest.skip("the tools' tests need a private vhost (rabbitmqctl on a local broker)")
    names = (f"qmf-cli-tools-{uuid.uuid4().hex[:8]}", f"qmf-cli-empty-{uuid.uuid4().hex[:8]}")
    made = []
    try:
        for name in names:
            if not make_vhost(amqp_url, name):
                pytest.skip("the tools' tests need a private vhost (the management API or "
                            "rabbitmqctl on a local broker)")
            made.append(name)
        url, empty = (vhost_url(amqp_url, n) for n in names)
        yield Vhosts(url, empty, names)
    finally:
        for name in made:
            drop_vhost(amqp_url, name)


@attrs.frozen
class Bus:
    url: str
    empty_url: str
    vhost: str
    role: ManagementBroker
    model: Any


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def bus(vhosts: Vhosts) -> AsyncIterator[Bus]:
    # the demo agent publishes every INTERVAL; the role ages agents out only after 10 s
    # of silence (3 x INTERVAL by default), which a stall of a busy machine can reach
    role = ManagementBroker(vhosts.url, broker_id=uuid.uuid4(), label=_unique("role"),
                            interval=INTERVAL, agent_timeout=10.0)
    await role.start()
    agent, model = demo.build_demo_agent(vhosts.url, interval=INTERVAL, queues=1, seed=7,
                                         label=LABEL, attach_timeout=2.0)
    try:
        await model.start()
        assert agent.attached, "the demo agent did not attach to the role"
        try:
            yield Bus(vhosts.url, vhosts.empty_url, vhosts.names[0], role, model)
        finally:
            await model.stop()
    finally:
        await role.stop(2.0)


@attrs.frozen
class Result:
    rc: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)

    def json_lines(self) -> list[Any]:
        return [json.loads(line) for line in self.out.splitlines() if line.strip()]

    def one_error_line(self) -> str:
        """The single stderr line of an expected failure (never a traceback)."""
        lines = self.err.strip().splitlines()
        assert "Traceback" not in self.err and len(lines) == 1, self.err
        return lines[0]


def _env(url: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("QMF_URL", "COLUMNS")}
    if url is not None:
        env["QMF_URL"] = url
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


async def _start(url: str | None, *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "qmf_async", *args, env=_env(url), cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)


async def _finish(proc: asyncio.subprocess.Process, timeout: float = 30.0,
                  err_head: str = "") -> Result:
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise AssertionError(f"the tool did not finish within {timeout}s") from None
    assert proc.returncode is not None
    return Result(proc.returncode, out.decode(), err_head + err.decode())


async def qmf(url: str | None, *args: str, timeout: float = 30.0) -> Result:
    """Run ``qmf ARGS`` with ``QMF_URL=url``, in this process on a thread (the loop keeps
    running); the tests of the process itself use :func:`_start` and :func:`_finish`."""
    rc, out, err = await asyncio.to_thread(
        qmf_in_process, *args, env={"QMF_URL": url, "COLUMNS": None}, timeout=timeout)
    return Result(rc, out, err)



async def _wait_listening(proc: asyncio.subprocess.Process) -> str:
    """stderr lines of ``qmf events`` up to its "listening" note."""
    assert proc.stderr is not None
    seen = ""
    while "listening on" not in seen:
        line = await asyncio.wait_for(proc.stderr.readline(), 15)
        assert line, f"qmf events ended before listening: {seen}"
        seen += line.decode()
    return seen


# --------------------------------------------------------------------------- stat


@integration
@aio
async def test_stat_general(bus: Bus) -> None:
    human, js = await asyncio.gather(qmf(bus.url, "stat"), qmf(bus.url, "stat", "-g", "--json"))
    assert human.rc == 0, human.err
    assert "Broker Summary" in human.out and "Aggregate Broker Statistics" in human.out
    assert "amqp-broker" in human.out and LABEL in human.out
    assert "total-enqueues" in human.out and "discards-no-route" in human.out
    assert js.rc == 0, js.err
    (report,) = js.json()
    assert report["agent"] == LABEL and report["properties"]["name"] == "amqp-broker"
    summary = report["summary"]
    assert summary["queues"] >= len(DEMO_QUEUES) and summary["exchanges"] >= 4
    assert summary["connections"] is None  # the demo serves no connection class
    aggregate = report["aggregate"]
    assert set(aggregate) >= {"queue-depth", "total-enqueues", "total-dequeues", "acquires"}
    assert aggregate["total-enqueues"] == {
        "messages": report["statistics"]["msgTotalEnqueues"],
        "bytes": report["statistics"]["byteTotalEnqueues"]}
    assert aggregate["acquires"]["bytes"] is None


@integration
@aio
async def test_stat_exchanges_queues_sorting(bus: Bus) -> None:
    exchanges, queues, down, up, limited, unlimited, bad = await asyncio.gather(
        qmf(bus.url, "stat", "-e"), qmf(bus.url, "stat", "-q"),
        qmf(bus.url, "stat", "-q", "-S", "msgIn", "--json", "-L", "0"),
        qmf(bus.url, "stat", "-q", "-S", "msgin", "-I", "--json"),
        qmf(bus.url, "stat", "-q", "-S", "queue", "-L", "2"),
        qmf(bus.url, "stat", "-q", "-L", "2", "--json"),
        qmf(bus.url, "stat", "-e", "-S", "nosuchcolumn"))
    for r in (exchanges, queues, down, up, limited, unlimited):
        assert r.rc == 0, r.err
    lines = exchanges.out.splitlines()
    assert lines[0] == "Exchanges"
    assert lines[1].split() == ["exchange", "type", "dur", "bind", "msgIn", "msgOut", "msgDrop",
                                "byteIn", "byteOut", "byteDrop"]
    assert {ln.split()[0] for ln in lines[3:]} >= {"(default)", "amq.direct", "amq.topic",
                                                  "amq.fanout"}
    lines = queues.out.splitlines()
    assert lines[1].split()[:5] == ["queue", "dur", "autoDel", "excl", "msg"]
    names = [ln.split()[0] for ln in lines[3:]]
    assert set(names) >= DEMO_QUEUES and names == sorted(names)  # default: by name
    assert any(unit in queues.out for unit in (" KiB", " MiB", " B "))  # bytes with units
    rows = down.json()
    assert {row["queue"] for row in rows} >= DEMO_QUEUES
    values = [row["msgIn"] for row in rows]
    assert values == sorted(values, reverse=True)  # -S: decreasing
    orders = next(row for row in rows if row["queue"] == "orders")
    assert orders["dur"] is True and orders["bind"] == 2  # '' and amq.direct
    assert orders["msgIn"] - orders["msgOut"] == orders["msg"]
    values = [row["msgIn"] for row in up.json()]
    assert values == sorted(values)  # -I: increasing
    assert len([ln for ln in limited.out.splitlines()[3:] if ln.strip()]) == 2
    assert "showing 2 of" in limited.err
    # as qpid-stat: -L counts only with -S
    assert len(unlimited.json()) == len(rows) > 2 and "showing" not in unlimited.err
    assert bad.rc == 2 and "nosuchcolumn" in bad.one_error_line()


@integration
@aio
async def test_stat_one_queue(bus: Bus) -> None:
    human, js = await asyncio.gather(qmf(bus.url, "stat", "-q", "orders"),
                                     qmf(bus.url, "stat", "-q", "orders", "--json"))
    assert human.rc == 0, human.err
    assert human.out.startswith("Queue 'orders' (object ")
    assert "msgTotalEnqueues" in human.out and "Total messages enqueued" in human.out
    assert "byteTotalEnqueues" in human.out and "octet" in human.out
    data = js.json()
    assert data["properties"]["name"] == "orders" and data["agent"] == LABEL
    assert "msgDepth" in data["statistics"] and data["updated"] >= data["created"] > 0


@integration
@aio
async def test_stat_views_the_demo_does_not_serve(bus: Bus) -> None:
    results = await asyncio.gather(*(qmf(bus.url, "stat", view) for view in ("-c", "-u", "-m")))
    for view, r in zip(("connection", "subscription", "memory"), results, strict=True):
        assert r.rc == 5 and r.out == ""
        line = r.one_error_line()
        assert f"serves org.apache.qpid.broker:{view}" in line and "not managed" in line


@integration
@aio
async def test_stat_acl_without_an_acl_module(bus: Bus) -> None:
    human, js = await asyncio.gather(qmf(bus.url, "stat", "--acl"),
                                     qmf(bus.url, "stat", "--acl", "--json"))
    # qpid-stat's words and exit code: the demo broker has no ACL module
    assert (human.rc, human.out.strip()) == (0, "ACL Policy Module is not installed"), human.err
    assert (js.rc, js.json()) == (0, [])


# --------------------------------------------------------------------------- config


@integration
@aio
async def test_config_listings(bus: Bus) -> None:
    summary, summary_json, queues, exchanges = await asyncio.gather(
        qmf(bus.url, "config"), qmf(bus.url, "config", "--json"),
        qmf(bus.url, "config", "queues", "-r", "--json"),
        qmf(bus.url, "config", "exchanges", "amq.", "-r"))
    for r in (summary, summary_json, queues, exchanges):
        assert r.rc == 0, r.err
    assert summary.out.splitlines()[0].split() == ["Total", "Exchanges", str(
        summary_json.json()["exchanges"]["total"])]
    assert "Total Queues" in summary.out and "durable" in summary.out
    data = summary_json.json()
    assert data["queues"]["total"] >= len(DEMO_QUEUES)
    assert data["exchanges"]["by_type"]["topic"] >= 1
    by_name = {q["name"]: q for q in queues.json()}
    orders = by_name["orders"]["bindings"]
    assert {"exchange": "amq.direct", "key": "orders", "arguments": {}} in orders
    assert {"exchange": "", "key": "orders", "arguments": {}} in orders
    assert by_name["orders"]["attributes"] == "--durable"
    lines = exchanges.out.splitlines()
    assert lines[0].split() == ["Type", "Exchange", "Name", "Attributes", "Key", "Queue",
                                 "Arguments"]
    assert ["topic", "amq.topic", "--durable", "#", "audit"] in [ln.split() for ln in lines]
    assert ["invoices.#", "invoices"] in [ln.split() for ln in lines]  # more of its bindings
    assert "''" not in exchanges.out  # the filter keeps names containing "amq."


@integration
@aio
async def test_config_add_bind_unbind_delete(bus: Bus) -> None:
    queue, exchange = _unique("q"), _unique("ex")
    r = await qmf(bus.url, "config", "add", "queue", queue, "--durable", "--max-queue-count",
                  "100", "--argument", "x-note=cli")
    assert (r.rc, r.out.strip()) == (0, f"queue '{queue}' created"), r.err
    r = await qmf(bus.url, "config", "add", "exchange", "topic", exchange)
    assert r.rc == 0 and "created" in r.out, r.err
    r = await qmf(bus.url, "config", "bind", exchange, queue, "k.#")
    assert r.rc == 0, r.err
    listed, detail = await asyncio.gather(
        qmf(bus.url, "config", "exchanges", exchange, "-r", "--json"),
        qmf(bus.url, "stat", "-q", queue, "--json"))
    (ex,) = listed.json()
    assert ex["type"] == "topic"
    assert ex["bindings"] == [{"queue": queue, "key": "k.#", "arguments": {}}]
    props = detail.json()["properties"]
    assert props["durable"] is True
    assert props["arguments"] == {"qpid.max_count": 100, "x-note": "cli"}

    r = await qmf(bus.url, "config", "unbind", exchange, queue, "k.#")
    assert r.rc == 0, r.err
    r = await qmf(bus.url, "config", "del", "exchange", exchange)
    assert (r.rc, r.out.strip()) == (0, f"exchange '{exchange}' deleted"), r.err
    r = await qmf(bus.url, "config", "del", "queue", queue, "--force")
    assert r.rc == 0, r.err
    assert queue not in bus.model.queues and exchange not in bus.model.exchanges


@integration
@aio
async def test_config_failures(bus: Bus) -> None:
    missing, nosuch, exists, reserved, bad_type, bad_bind, no_binding, bad_option = \
        await asyncio.gather(
            qmf(bus.url, "stat", "-q", "nosuchqueue"),
            qmf(bus.url, "config", "del", "queue", "nosuch"),
            qmf(bus.url, "config", "add", "queue", "orders"),
            qmf(bus.url, "config", "add", "exchange", "topic", "amq.cli"),
            qmf(bus.url, "config", "add", "exchange", "bogus", "x"),
            qmf(bus.url, "config", "bind", "amq.direct", "nosuch", "k"),
            qmf(bus.url, "config", "unbind", "amq.direct", "orders", "nokey"),
            qmf(bus.url, "config", "queues", "--no-such-option"))
    assert missing.rc == 5 and missing.out == ""
    assert "no queue named 'nosuchqueue'" in missing.one_error_line()
    assert nosuch.rc == 5 and "no queue named 'nosuch'" in nosuch.one_error_line()
    assert exists.rc == 6 and "already exists" in exists.one_error_line()
    assert reserved.rc == 6 and "reserved" in reserved.one_error_line()
    assert bad_type.rc == 2 and "exchange type 'bogus'" in bad_type.one_error_line()
    assert bad_bind.rc == 5 and "no queue named 'nosuch'" in bad_bind.one_error_line()
    # the method's own not-found answer maps to the not-found code too
    assert no_binding.rc == 5 and "No such binding" in no_binding.one_error_line()
    assert bad_option.rc == 2 and "--no-such-option" in bad_option.one_error_line()


# --------------------------------------------------------------------------- events


async def _declare(bus: Bus, name: str) -> None:
    model = bus.model
    await model.create(model.broker, type="queue", name=name, properties={}, strict=False)


async def _drop(bus: Bus, name: str) -> None:
    model = bus.model
    await model.delete(model.broker, type="queue", name=name, options={})


@integration
@aio
async def test_events_lines_and_filters(bus: Bus) -> None:
    name = _unique("evq")
    lines = await _start(bus.url, "events", "--where", f"qName = '{name}'", "--count", "3",
                         "--duration", "20")
    js = await _start(bus.url, "events", "--json", "--class", "queueDeclare", "--where",
                      f"qName = '{name}'", "--count", "1", "--duration", "20")
    quiet = await _start(bus.url, "events", "--severity", "warn", "--where",
                         f"qName = '{name}'", "--duration", "3")
    heads = await asyncio.gather(*(_wait_listening(p) for p in (lines, js, quiet)))
    await _declare(bus, name)
    await bus.model.create(bus.model.broker, type="binding", name=f"amq.direct/{name}/k",
                           properties={}, strict=False)
    await _drop(bus, name)
    procs = (lines, js, quiet)
    got, one, none = await asyncio.gather(*(_finish(p, err_head=h)
                                            for p, h in zip(procs, heads, strict=True)))
    assert got.rc == 0, got.err
    out = got.out.splitlines()
    assert [ln.split()[2] for ln in out] == ["org.apache.qpid.broker:queueDeclare",
                                             "org.apache.qpid.broker:bind",
                                             "org.apache.qpid.broker:queueDelete"]
    first = out[0].split()
    assert len(first[0]) == 8 and first[0].count(":") == 2  # short time HH:MM:SS
    assert first[1] == "info"
    assert any(p.startswith("broker=amqp://") and p.endswith(bus.vhost) for p in first)
    assert f"agent={LABEL}" in first and f"qName={name}" in first and "disp=created" in first
    assert "exName=amq.direct" in out[1] and "key=k" in out[1]
    assert one.rc == 0, one.err
    (record,) = one.json_lines()
    assert record["event"] == "queueDeclare" and record["severity"] == "info"
    assert record["agent"] == LABEL and record["arguments"]["qName"] == name
    assert record["class"] == "org.apache.qpid.broker:queueDeclare"
    assert isinstance(record["timestamp"], int) and record["broker"].endswith(bus.vhost)
    assert (none.rc, none.out) == (0, "")  # info events are below warn


@integration
@aio
async def test_events_several_brokers_and_reconnect(bus: Bus) -> None:
    """Two URLs -> two connections of one session, each with its copy of an event;
    a connection closed by the broker is re-established and events flow again."""
    first, second = _unique("evq"), _unique("evq")
    proc = await _start(None, "events", bus.url, bus.url, "--class", "queueDeclare",
                        "--where", f"qName IN ('{first}', '{second}')", "--count", "3",
                        "--duration", "30")
    head = await _wait_listening(proc)
    assert head.count(bus.vhost) == 2  # "listening on <url>, <url>"
    await _declare(bus, first)
    assert proc.stdout is not None
    seen = [await asyncio.wait_for(proc.stdout.readline(), 10) for _ in range(2)]
    assert all(first.encode() in line for line in seen)
    # close one of the tool's two connections from the broker side
    table = await asyncio.to_thread(_rabbitmqctl, "list_connections", "pid", "vhost",
                                    "client_properties")
    assert table is not None
    pids = [ln.split("\t")[0] for ln in table.splitlines()
            if f"\t{bus.vhost}\t" in ln and '"qmf-async console"' in ln]
    assert len(pids) == 2, table
    assert await asyncio.to_thread(_rabbitmqctl, "close_connection", pids[0], "cli test") \
        is not None
    assert proc.stderr is not None
    notes = head
    while "reconnected" not in notes:
        notes += (await asyncio.wait_for(proc.stderr.readline(), 15)).decode()
    assert "CONNECTION_FORCED" in notes and "reconnecting" in notes
    await _declare(bus, second)
    r = await _finish(proc, err_head=notes)
    assert r.rc == 0, r.err
    assert second in r.out  # the third event (one of the two copies)
    assert "Traceback" not in r.err
    for name in (first, second):
        await _drop(bus, name)


@integration
@aio
async def test_events_stops_and_errors(bus: Bus) -> None:
    short, bad_sev, bad_where, unreachable, refused = await asyncio.gather(
        qmf(bus.url, "events", "--count", "1", "--duration", "0.5", "--where", "qName = 'x'",
            "--quiet"),
        qmf(bus.url, "events", "--severity", "loud"),
        qmf(bus.url, "events", "--where", "a = = b"),
        qmf(None, "events", "amqp://guest:guest@127.0.0.1:1/"),
        qmf(None, "events", bus.url.replace("guest:guest@", "guest:wrong@")))
    assert short.rc == 1 and "0 of 1 events" in short.one_error_line()
    assert bad_sev.rc == 2 and "unknown severity 'loud'" in bad_sev.one_error_line()
    assert bad_where.rc == 2 and "bad --where selector" in bad_where.one_error_line()
    assert unreachable.rc == 3 and "cannot connect" in unreachable.one_error_line()
    assert refused.rc == 4 and "authentication failed" in refused.one_error_line()


# --------------------------------------------------------------------------- queue-stats


@integration
@aio
async def test_queue_stats(bus: Bus) -> None:
    js, human, bad = await asyncio.gather(
        qmf(bus.url, "queue-stats", "-i", "0.4", "--count", "2", "--json", "-f", "orders,work"),
        qmf(bus.url, "queue-stats", "-i", "0.3", "--count", "1"),
        qmf(bus.url, "queue-stats", "-f", "("))
    assert js.rc == 0, js.err
    reports = js.json_lines()
    assert [r["report"] for r in reports] == [1, 2]
    for report in reports:
        assert {q["queue"] for q in report["queues"]} == {"orders", "work-1"}
        for q in report["queues"]:
            assert q["agent"] == LABEL
            assert 0.2 < q["interval"] < 5.0  # agent sample timestamps, about -i apart
            assert q["enqueue_rate"] == pytest.approx(q["enqueues"] / q["interval"])
            assert q["dequeue_rate"] >= 0 and q["depth"] >= 0
    assert human.rc == 0, human.err
    lines = human.out.splitlines()
    assert lines[0].endswith("queue rates (msg/s)")
    assert lines[1].split() == ["Queue", "Sec", "Depth", "Enq", "Rate", "Deq", "Rate"]
    assert {ln.split()[0] for ln in lines[3:]} >= DEMO_QUEUES
    assert bad.rc == 2 and "bad --filter pattern" in bad.one_error_line()


# --------------------------------------------------------------------------- common errors


@integration
@aio
async def test_unreachable_refused_and_bad_urls(bus: Bus) -> None:
    wrong = bus.url.replace("guest:guest@", "guest:wrong@")
    runs = await asyncio.gather(
        qmf("amqp://guest:guest@127.0.0.1:1/", "stat"),
        qmf(None, "config", wrong),
        qmf("http://localhost/", "stat"),
        qmf(None, "stat", "-e", "amqp://guest:guest@localhost:5672:9/"),
        qmf(bus.url, "stat", "--agent", "nobody"))
    codes = [r.rc for r in runs]
    assert codes == [3, 4, 2, 2, 7], [r.err for r in runs]
    for r in runs:
        r.one_error_line()
    assert "cannot connect" in runs[0].err and "authentication failed" in runs[1].err
    assert "no agent labelled 'nobody'" in runs[-1].err


@integration
@aio
async def test_no_management_agent_answering(bus: Bus) -> None:
    """An empty vhost: nobody answers; then only a management broker, no agent."""
    r = await qmf(bus.empty_url, "queue-stats", "--discover", "0.5", "--count", "1")
    assert r.rc == 7 and "no management agent answers" in r.one_error_line()
    assert "no agent heartbeat within 0.5s" in r.err
    async with ManagementBroker(bus.empty_url, broker_id=uuid.uuid4(), interval=INTERVAL):
        r = await qmf(bus.empty_url, "stat", "-q")
    assert r.rc == 7 and "nothing serves org.apache.qpid.broker:queue" in r.one_error_line()

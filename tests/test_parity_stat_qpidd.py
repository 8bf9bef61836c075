"""``qmf stat`` side by side with the classic ``qpid-stat`` on a genuine qpidd, view by
view (-g -c -e -q, -q QUEUE, -u -m --acl): on the same broker state both print the same
names and the same numbers.  Our side is ``--json`` (default QMF version, and v1 and v2
forced); the classic tables are parsed by the positions of their headers.

Each broker (stock: QMF v1 off; and v1 on) is private to this module and runs with an
ACL file, so that its whole state is known: queues filled by a plain AMQP 1.0 client
(``tests/amqp10_client.py``), one create denied by the ACL, and a plain AMQP 0-10 client
(the qpid.messaging library run by Python 2.7; AMQP 1.0 links are no subscriptions in
qpidd) holding two subscriptions and a ring queue.  Values that move with the tools'
own traffic (their own connection, session and reply queue, the QMF exchanges, memory
and uptime) are compared by what holds whatever tool runs first: the tools' own rows are
left out, counts include exactly one of each, time and memory by range.
"""

from __future__ import annotations

import calendar
import json
import os
import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from .amqp10_client import BlockingClient, LinkDetached
from .conftest import CLASSIC_TOOLS_RUN, ClassicTools, _python27
from .qpidd import Qpidd, QpiddError
from .test_parity_qpidd import (
    COUNTERS,
    FLAGS,
    classic_number,
    make_state,
    parse_classic_table,
    qmf_cli,
    same,
)

pytestmark = pytest.mark.qpidd

#: our QMF versions: v1 (the default on qpidd, also with its v1 off) and v2; the default
#: itself in test_general
VERSIONS = ["1", "2"]
ACL_POLICY = "acl deny all create queue name=forbidden-*\nacl allow all all\n"

#: the plain AMQP 0-10 client: subscriptions, an exchange's traffic and a ring queue,
#: kept open until its stdin closes (Python 2.7, the qpid.messaging library)
HOLDER_010 = r'''
import sys
from qpid.messaging import Connection, Message
host, prefix = sys.argv[1], sys.argv[2]
conn = Connection.establish(host)
ssn = conn.session()
sub = prefix + "-sub"
snd = ssn.sender(sub + "; {create: always}")
for i in range(3):
    snd.send(Message("s%d" % i))
rcv = ssn.receiver(sub)
rcv.capacity = 10
for i in range(3):
    rcv.fetch(timeout=10)
ssn.acknowledge(sync=True)
fan = ssn.receiver("amq.fanout")
fan.capacity = 10
fsnd = ssn.sender("amq.fanout")
for i in range(2):
    fsnd.send(Message("f%d" % i))
for i in range(2):
    fan.fetch(timeout=10)
ssn.acknowledge(sync=True)
ring = ssn.sender(prefix + "-ring; {create: always, node: {x-declare: {arguments: "
                  "{'qpid.max_count': 1, 'qpid.policy_type': 'ring'}}}}")
for i in range(3):
    ring.send(Message("r%d" % i))
for s in (ring, snd, fsnd):
    s.close()
sys.stdout.write("ready\n")
sys.stdout.flush()
sys.stdin.read()
conn.close()
'''

#: exchanges no tool's own traffic goes through: their counters must match exactly
QUIET_EXCHANGES = ("amq.fanout", "amq.topic", "amq.match")
EXCHANGE_COUNTERS = ("bind", "msgIn", "msgOut", "msgDrop", "byteIn", "byteOut", "byteDrop")
#: -g aggregate rows no tool's own traffic moves
STABLE_AGGREGATE = (
    "persistent-enqueues", "persistent-dequeues", "transactional-enqueues",
    "transactional-dequeues", "flow-to-disk-depth", "flow-to-disk-enqueues",
    "flow-to-disk-dequeues", "discards-ttl-expired", "discards-limit-overflow",
    "discards-ring-overflow", "discards-lvq-replace", "discards-subscriber-reject",
    "discards-purged", "reroutes", "abandoned", "abandoned-via-alt")
#: counters that rose between the two tools' samples (seen once in CI: qpid-stat 0,
#: ours 1 just after it): qpidd counts as abandoned what a deleted queue still held, and
#: the tools' own queues come and go between the samples (why that one was, not checked)
GROWING_AGGREGATE = frozenset({"abandoned", "abandoned-via-alt"})
#: qpid-stat -q QUEUE's statistics rows and the queue's statistics
QUEUE_STATISTICS = {
    "queue-depth": ("msgDepth", "byteDepth"),
    "total-enqueues": ("msgTotalEnqueues", "byteTotalEnqueues"),
    "total-dequeues": ("msgTotalDequeues", "byteTotalDequeues"),
    "persistent-enqueues": ("msgPersistEnqueues", "bytePersistEnqueues"),
    "persistent-dequeues": ("msgPersistDequeues", "bytePersistDequeues"),
    "transactional-enqueues": ("msgTxnEnqueues", "byteTxnEnqueues"),
    "transactional-dequeues": ("msgTxnDequeues", "byteTxnDequeues"),
    "flow-to-disk-depth": ("msgFtdDepth", "byteFtdDepth"),
    "flow-to-disk-enqueues": ("msgFtdEnqueues", "byteFtdEnqueues"),
    "flow-to-disk-dequeues": ("msgFtdDequeues", "byteFtdDequeues"),
    "acquires": ("acquires", None),
    "releases": ("releases", None),
    "discards-ttl-expired": ("discardsTtl", None),
    "discards-limit-overflow": ("discardsOverflow", None),
    "discards-ring-overflow": ("discardsRing", None),
    "discards-lvq-replace": ("discardsLvq", None),
    "discards-subscriber-reject": ("discardsSubscriber", None),
    "discards-purged": ("discardsPurge", None),
    "reroutes": ("reroutes", None),
}


@dataclass
class World:
    """A private qpidd with a known state, and the classic tool's outputs on it."""

    broker: Qpidd
    prefix: str
    started: float
    traffic: dict[str, tuple[int, int, int]]
    #: the connections the state holds open: 2 plain AMQP 1.0, 1 AMQP 0-10
    known_connections: int = 3
    classic_runs: dict[tuple[str, ...], str] = field(default_factory=dict)

    @property
    def queues(self) -> set[str]:
        return {*self.traffic, f"{self.prefix}-sub", f"{self.prefix}-ring"}


def hold_010(address: str, prefix: str) -> subprocess.Popen[str]:
    """Start the AMQP 0-10 client; returns once it has made its state."""
    python2 = _python27()
    assert python2 is not None
    proc = subprocess.Popen(
        [python2, "-c", HOLDER_010, address, prefix], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={"PYTHONPATH": str(CLASSIC_TOOLS_RUN.parent / "lib"), "PATH": "/usr/bin:/bin"})
    assert proc.stdout is not None
    line = proc.stdout.readline()  # the client's own 10 s timeouts bound this read
    if line.strip() != "ready":
        proc.kill()
        _, err = proc.communicate(timeout=10)
        raise AssertionError(f"the AMQP 0-10 client failed: {err}")
    return proc


@pytest.fixture(scope="module", params=["stock", "v1"])
def world(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
          classic_tools: ClassicTools) -> Iterator[World]:
    directory = tmp_path_factory.mktemp(f"stat-{request.param}")
    policy = directory / "policy.acl"
    policy.write_text(ACL_POLICY)
    try:
        broker = Qpidd.start(qmf1=request.param == "v1", directory=directory / "broker",
                             extra=["--acl-file", str(policy)])
    except QpiddError as exc:
        pytest.skip(f"qpidd failed to start: {exc}")
    prefix = f"stat-{uuid.uuid4().hex[:6]}"
    holder: subprocess.Popen[str] | None = None
    idle: list[BlockingClient] = []
    try:
        started = time.time()
        traffic = make_state(broker, prefix)
        # two plain AMQP 1.0 connections stay open: one idle, one whose create was denied
        for _ in range(2):
            idle.append(BlockingClient(broker.url, timeout=15))
        with pytest.raises(LinkDetached):
            idle[1].create_sender("forbidden-queue", create=True)
        holder = hold_010(broker.address, prefix)
        yield World(broker, prefix, started, traffic)
    finally:
        if holder is not None:
            holder.communicate("", timeout=15)
        for conn in idle:
            conn.close()
        broker.stop()


def classic(world: World, classic_tools: ClassicTools, *args: str) -> str:
    """qpid-stat's output (run once per broker and view)."""
    if args not in world.classic_runs:
        rc, out, err = classic_tools("qpid-stat", *args, "-b", world.broker.address,
                                     timeout=60)
        assert rc == 0 and not out.startswith("Failed"), (out, err)
        world.classic_runs[args] = out
    return world.classic_runs[args]


def ours(world: World, version: str, *args: str) -> Any:
    chosen = [] if version == "default" else ["--qmf-version", version]
    done = qmf_cli("stat", *args, "--json", *chosen, "-b", world.broker.address)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def sections(out: str) -> dict[str, str]:
    """qpid-stat's output cut into its titled tables (``Title:`` lines)."""
    parts: dict[str, list[str]] = {}
    current: list[str] = []
    for line in out.splitlines():
        if line and not line.startswith(" "):
            current = parts.setdefault(line.rstrip(":"), [])
        current.append(line)
    return {title: "\n".join(lines) for title, lines in parts.items()}


def rows_by_position(table: str) -> list[dict[str, str]]:
    """A qpid-stat table's rows as cells cut at the header's column positions (also
    rows whose first cell is blank, which ``parse_classic_table`` keys by "")."""
    lines = table.splitlines()
    rule = next(i for i, line in enumerate(lines) if line.strip().startswith("====="))
    header = lines[rule - 1]
    names = header.split()
    starts, pos = [], 0
    for name in names:
        pos = header.index(name, pos)
        starts.append(pos)
        pos += len(name)
    return [{name: line[start:(starts[i + 1] if i + 1 < len(starts) else None)].strip()
             for i, (name, start) in enumerate(zip(names, starts, strict=True))}
            for line in lines[rule + 1:] if line.strip()]


def own_queues(rows: list[dict[str, Any]]) -> set[str]:
    """The queues of our tool's own session in a ``qmf stat -q --json`` listing."""
    return {r["queue"] for r in rows if str(r["queue"]).startswith("qmf-async-console-")}


def blocks(out: str) -> dict[str, str]:
    """Our human output cut at its blank lines, by each block's first line."""
    parts = [p for p in out.split("\n\n") if p.strip()]
    return {p.strip().splitlines()[0]: p.strip() for p in parts}


def rows_by_rule(table: str) -> list[dict[str, str]]:
    """Our human table's rows (header, a rule of ``\u2500``, cells three blanks apart)."""
    return rows_by_position(table.replace("\u2500", "="))


def commas(text: str) -> int:
    return int(text.replace(",", "")) if text.strip() else 0


def duration_seconds(text: str) -> float:
    """A qpid-stat duration cell (``45s``, ``3m``, ``2h``, ``1d`` ...) in seconds."""
    text = text.strip()
    total, number = 0.0, ""
    for ch in text:
        if ch.isdigit() or ch == ".":
            number += ch
        else:
            total += float(number) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[ch]
            number = ""
    return total


# --------------------------------------------------------------------------- -g


@pytest.mark.parametrize("version", ["default", *VERSIONS])
def test_general(world: World, version: str, classic_tools: ClassicTools) -> None:
    out = sections(classic(world, classic_tools, "-g"))
    (summary,) = rows_by_position(out["Broker Summary"])
    aggregate = {r["Statistic"]: r for r in rows_by_position(out["Aggregate Broker Statistics"])}
    (report,) = ours(world, version, "-g")
    mine = report["summary"]
    # each tool counts the state's connections and its own one connection; the state's
    # queues (and the fanout subscription's) and its own: qpid-stat one reply queue, ours
    # the queues of its session, as many in each of its runs
    assert int(summary["connections"]) == mine["connections"] == world.known_connections + 1
    known = len(world.queues) + 1
    assert int(summary["queues"]) == known + 1
    assert mine["queues"] == known + len(own_queues(ours(world, version, "-q",
                                                          "--console-queues")))
    assert int(summary["sessions"]) == mine["sessions"] >= 3  # 0-10, plain 1.0, the tool's
    assert int(summary["exchanges"]) == mine["exchanges"] == 8
    age = time.time() - world.started + 5
    assert 0 <= duration_seconds(summary["uptime"]) <= age
    assert 0 <= mine["uptime"] / 1e9 <= age
    assert set(aggregate) == set(report["aggregate"])
    for name in STABLE_AGGREGATE:
        theirs, own = aggregate[name], report["aggregate"][name]
        if name in GROWING_AGGREGATE:  # ours samples after qpid-stat: never fewer
            assert commas(theirs["Messages"]) <= own["messages"], name
            continue
        assert commas(theirs["Messages"]) == own["messages"], name
        if own["bytes"] is not None:
            assert commas(theirs["Bytes"]) == own["bytes"], name
    assert report["aggregate"]["discards-ring-overflow"]["messages"] == 2  # the ring queue


# --------------------------------------------------------------------------- -c


@pytest.mark.parametrize("version", VERSIONS)
def test_connections(world: World, version: str, classic_tools: ClassicTools) -> None:
    theirs = {r["connection"]: r for r in rows_by_position(classic(world, classic_tools, "-c"))}
    mine = {r["connection"]: r for r in ours(world, version, "-c")}
    common = set(theirs) & set(mine)
    # the state's connections in both; each tool's own only in its own listing
    assert len(common) == world.known_connections
    assert len(theirs) == len(mine) == world.known_connections + 1
    (own_classic,) = set(theirs) - common
    assert theirs[own_classic]["cproc"] == "qpid-stat"
    # ours names its process as the qpid clients do (qpid.client_process, _pid): here
    # the test's own process, where qmf_cli runs the tool
    (own,) = set(mine) - common
    assert mine[own]["cpid"] == os.getpid() and mine[own]["cproc"], mine[own]
    age = time.time() - world.started + 5
    for address in common:
        t, m = theirs[address], mine[address]
        assert (t["cproc"], t["cpid"]) == (m["cproc"] or "-", str(m["cpid"] or "")), address
        assert (t["mech"], t["auth"]) == (m["mech"], m["auth"]) == ("ANONYMOUS", "anonymous")
        assert same(m["msgIn"], classic_number(t["msgIn"]))
        assert same(m["msgOut"], classic_number(t["msgOut"]))
        assert 0 <= duration_seconds(t["connected"]) <= age
        assert 0 <= m["connected"] / 1e9 <= age and 0 <= m["idle"] <= m["connected"]
    procs = sorted(str(mine[a]["cproc"]) for a in common)
    # the plain 1.0 client sends no process name; the 0-10 client does
    assert procs.count("None") == 2


# --------------------------------------------------------------------------- -e


@pytest.mark.parametrize("version", VERSIONS)
def test_exchanges(world: World, version: str, classic_tools: ClassicTools) -> None:
    theirs = {r["exchange"]: r for r in rows_by_position(classic(world, classic_tools, "-e"))}
    mine = {r["exchange"]: r for r in ours(world, version, "-e")}
    assert set(theirs) == set(mine) and "" in mine and "amq.fanout" in mine
    for name, m in mine.items():
        assert (theirs[name]["type"], theirs[name]["dur"] == "Y") == (m["type"], bool(m["dur"]))
    for name in QUIET_EXCHANGES:
        for col in EXCHANGE_COUNTERS:
            assert same(mine[name][col], classic_number(theirs[name][col])), (name, col)
    fanout = mine["amq.fanout"]  # the 0-10 client's subscription and two messages
    assert (fanout["bind"], fanout["msgIn"], fanout["msgOut"]) == (1, 2, 2)


# --------------------------------------------------------------------------- -q


@pytest.mark.parametrize("version", VERSIONS)
def test_queues(world: World, version: str, classic_tools: ClassicTools) -> None:
    theirs = parse_classic_table(classic(world, classic_tools, "-q"))
    mine = {r["queue"]: r for r in ours(world, version, "-q")}
    # every queue but the tools' own is in both (the state's, the fanout subscription's);
    # qmf stat leaves the consoles' own out unless --console-queues
    common = set(theirs) & set(mine)
    assert common >= world.queues and len(common) == len(world.queues) + 1
    assert len(set(theirs) - common) == 1  # qpid-stat's reply queue
    assert set(mine) == common
    every = {r["queue"]: r for r in ours(world, version, "-q", "--console-queues")}
    assert set(every) - common == own_queues(list(every.values())) != set()
    assert not any(re.search(r"\s", name) for name in every), sorted(every)
    for name in common:
        for col in COUNTERS:
            assert same(mine[name][col], classic_number(theirs[name][col])), (name, col)
        for col in FLAGS:
            assert bool(mine[name][col]) == (theirs[name][col] == "Y"), (name, col)
    for name, (sent, taken, _size) in world.traffic.items():
        assert (mine[name]["msg"], mine[name]["msgIn"]) == (sent - taken, sent)
    ring = mine[f"{world.prefix}-ring"]
    assert (ring["msg"], ring["msgIn"], ring["msgOut"]) == (1, 3, 2)


@pytest.mark.parametrize(("order", "version"), [("-q -b HOST QUEUE", "1"),
                                              ("-b HOST -q QUEUE", "2")])
def test_one_queue(world: World, version: str, order: str,
                   classic_tools: ClassicTools) -> None:
    name = f"{world.prefix}-ring"
    out = sections(classic(world, classic_tools, "-q", name))
    (props,) = rows_by_position(out["Properties"])
    stats = {r["Statistic"]: r for r in rows_by_position(out["Statistics"])}
    chosen = [] if version == "default" else ["--qmf-version", version]
    argv = (["stat", "-q", "-b", world.broker.address, name] if order.startswith("-q")
            else ["stat", "-b", world.broker.address, "-q", name])
    done = qmf_cli(*argv, "--json", *chosen)
    assert done.returncode == 0, done.stderr
    mine = json.loads(done.stdout)
    p, s = mine["properties"], mine["statistics"]
    assert props["Name"] == p["name"] == name
    assert props["Durable"] == ("Y" if p["durable"] else "N")
    assert props["AutoDelete"] == ("Y" if p["autoDelete"] else "N")
    assert props["Exclusive"] == ("Y" if p["exclusive"] else "N")
    assert props["FlowStopped"] == ("Y" if s["flowStopped"] else "N")
    assert commas(props["FlowStoppedCount"]) == s["flowStoppedCount"]
    assert commas(props["Consumers"]) == s["consumerCount"]
    assert commas(props["Bindings"]) == s["bindingCount"]
    # qpid-stat's rows by its names, and by the statistics they are made of
    assert set(stats) == set(QUEUE_STATISTICS) == set(mine["aggregate"])
    for row, (msgs, byts) in QUEUE_STATISTICS.items():
        assert commas(stats[row]["Messages"]) == s[msgs] == mine["aggregate"][row]["messages"]
        if byts is not None:
            assert commas(stats[row]["Bytes"]) == s[byts] == mine["aggregate"][row]["bytes"]
    assert (s["msgDepth"], s["discardsRing"]) == (1, 2)
    # human output too, in both orders
    human = qmf_cli(*argv, *chosen)
    assert human.returncode == 0 and human.stdout.startswith(f"Queue '{name}'"), human.stderr
    shown = {r["Statistic"]: r for r in rows_by_rule(blocks(human.stdout)["Statistics"])}
    assert set(shown) == set(stats)
    assert shown["discards-ring-overflow"]["Messages"] == stats["discards-ring-overflow"][
        "Messages"] == "2"


# --------------------------------------------------------------------------- -u


@pytest.mark.parametrize("version", VERSIONS)
def test_subscriptions(world: World, version: str, classic_tools: ClassicTools) -> None:
    rows = rows_by_position(classic(world, classic_tools, "-u"))
    theirs = {(r["conn"], r["subscr"]): r for r in rows if r["procName"] != "qpid-stat"}
    mine = {(r["conn"], r["subscr"]): r for r in ours(world, version, "-u")}
    # our tool makes no subscription (AMQP 1.0); qpid-stat's own one is left out
    assert len(rows) == len(theirs) + 1
    assert set(theirs) == set(mine) and len(mine) == 2
    for key, m in mine.items():
        t = theirs[key]
        assert (t["queue"], t["procName"], t["procId"], t["creditMode"]) == (
            m["queue"], m["procName"], str(m["procId"]), m["creditMode"])
        for col in ("browse", "acked", "excl"):
            assert (t[col] == "Y") == bool(m[col]), (key, col)
        assert (commas(t["delivered"]), commas(t["sessUnacked"])) == (
            m["delivered"], m["sessUnacked"])
    by_queue = {m["queue"]: m for m in mine.values()}
    assert by_queue[f"{world.prefix}-sub"]["delivered"] == 3
    assert by_queue[f"{world.prefix}-sub"]["acked"] is True


# --------------------------------------------------------------------------- -m


@pytest.mark.parametrize("version", VERSIONS)
def test_memory(world: World, version: str, classic_tools: ClassicTools) -> None:
    theirs = {r["Statistic"]: commas(r["Value"])
              for r in rows_by_position(classic(world, classic_tools, "-m"))}
    (mine,) = ours(world, version, "-m")
    values = {**mine["properties"], **mine["statistics"]}
    values.pop("name", None)
    assert set(theirs) == set(values) and "malloc_arena" in theirs
    # the allocator's figures move with every request: same order of magnitude
    for key in ("malloc_arena", "malloc_uordblks"):
        assert theirs[key] / 4 <= values[key] <= theirs[key] * 4, key


# --------------------------------------------------------------------------- --acl


@pytest.mark.parametrize("version", VERSIONS)
def test_acl(world: World, version: str, classic_tools: ClassicTools) -> None:
    out = classic(world, classic_tools, "--acl")
    theirs = {r["Statistic"]: r["Value"] for r in rows_by_position(out)}
    (mine,) = ours(world, version, "--acl")
    p, s = mine["properties"], mine["statistics"]
    assert theirs["policy-file"] == p["policyFile"] and p["policyFile"].endswith("policy.acl")
    assert theirs["enforcing"] == ("Y" if p["enforcingAcl"] else "N") == "Y"
    assert theirs["has-transfer-acls"] == ("Y" if p["transferAcl"] else "N")
    loaded = calendar.timegm(time.strptime(theirs["last-acl-load"], "%a %b %d %H:%M:%S %Y"))
    assert loaded == p["lastAclLoad"] // 10**9
    assert commas(theirs["acl-denials"]) == s["aclDenyCount"] == 1  # forbidden-queue
    # the human view names the same rows
    chosen = [] if version == "default" else ["--qmf-version", version]
    human = qmf_cli("stat", "--acl", "-b", world.broker.address, *chosen)
    assert human.returncode == 0, human.stderr
    names = [line.split()[0] for line in human.stdout.splitlines()[3:] if line.strip()]
    assert names[:5] == list(theirs)


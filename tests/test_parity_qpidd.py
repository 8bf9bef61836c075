"""Parity with the classic qpid tools on a genuine qpidd: on the same broker state,
``qmf stat -q --json`` and the classic ``qpid-stat -q`` list the same queues with the
same depths and counters, and an event (a queue declared) is printed by both
``qmf events`` and the classic ``qpid-printevents``.  Run against a stock qpidd (QMF v1
off: events only in v2) and one with v1 on; ``qmf stat`` with its default QMF version
and with v1 and v2 forced (qpidd answers v1 requests even with v1 off).

The queues are made and filled by a plain blocking AMQP 1.0 client
(``tests/amqp10_client.py``, a sender with the ``create-on-demand`` capability), so neither
tool takes part in making the state it reports.  The classic table is parsed by the
positions of its header row and compared by value, not by layout.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from ._util import qmf_in_process
from .amqp10_client import BlockingClient
from .conftest import CLASSIC_TOOLS_RUN, ClassicTools
from .qpidd import ROOT, Qpidd

pytestmark = pytest.mark.qpidd

#: queue -> (messages sent, messages received and accepted, body bytes each)
TRAFFIC = {"a": (5, 2, 11), "b": (3, 0, 40), "c": (7, 7, 3), "d": (0, 0, 0)}
#: the qpid-stat -q columns and the keys of ``qmf stat -q --json``
COUNTERS = ("msg", "msgIn", "msgOut", "bytes", "bytesIn", "bytesOut", "cons", "bind")
FLAGS = ("dur", "autoDel", "excl")
BROKERS = ["qpidd_stock", "qpidd_v1"]


def make_state(broker: Qpidd, prefix: str) -> dict[str, tuple[int, int, int]]:
    """Create the queues of ``TRAFFIC`` under ``prefix``, send and consume their
    messages with a plain AMQP 1.0 client; returns the traffic by full queue name."""
    state = {f"{prefix}-{k}": v for k, v in TRAFFIC.items()}
    with BlockingClient(broker.url, timeout=15) as conn:
        for name, (sent, taken, size) in state.items():
            sender = conn.create_sender(name, create=True)
            for i in range(sent):
                sender.send(f"{i % 10}" * size if size else None)
            sender.close()
            if taken:
                receiver = conn.create_receiver(name, credit=taken)
                for _ in range(taken):
                    receiver.receive(timeout=10)
                    receiver.accept()
                receiver.close()
    return state


def qmf_cli(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """``qmf ARGS``, run in this process (the tools' process is tested in test_cli_*)."""
    rc, out, err = qmf_in_process(*args, env={"QMF_URL": None}, timeout=timeout)
    return subprocess.CompletedProcess(["qmf", *args], rc, out, err)


def classic_number(text: str) -> float | int:
    """A qpid-stat cell as a number (``1.50k`` style cells as floats)."""
    text = text.strip()
    if not text:
        return 0
    scale = {"k": 1e3, "m": 1e6, "g": 1e9}.get(text[-1].lower())
    if scale is not None:
        return float(text[:-1]) * scale
    return int(text)


def parse_classic_table(out: str) -> dict[str, dict[str, str]]:
    """Rows of a qpid-stat table by their first column, cells cut at the positions of
    the header's column names (cells are left-aligned under them)."""
    lines = out.splitlines()
    rule = next(i for i, line in enumerate(lines) if line.strip().startswith("====="))
    header = lines[rule - 1]
    names = header.split()
    starts: list[int] = []
    pos = 0
    for name in names:
        pos = header.index(name, pos)
        starts.append(pos)
        pos += len(name)
    rows: dict[str, dict[str, str]] = {}
    for line in lines[rule + 1:]:
        if not line.strip():
            continue
        cells = {name: line[start:(starts[i + 1] if i + 1 < len(starts) else None)].strip()
                 for i, (name, start) in enumerate(zip(names, starts, strict=True))}
        rows[cells[names[0]]] = cells
    return rows


def same(ours: Any, classic: float | int) -> bool:
    if isinstance(classic, float):  # a scaled cell: 3 significant digits
        return abs(float(ours) - classic) <= 0.01 * max(abs(classic), 1.0)
    return bool(int(ours) == classic)


@pytest.mark.parametrize("version", ["default", "1", "2"])
@pytest.mark.parametrize("which", BROKERS)
def test_queue_stats_match_qpid_stat(which: str, version: str, request: pytest.FixtureRequest,
                                     classic_tools: ClassicTools) -> None:
    broker: Qpidd = request.getfixturevalue(which)
    prefix = f"parity-{uuid.uuid4().hex[:8]}"
    state = make_state(broker, prefix)

    chosen = [] if version == "default" else ["--qmf-version", version]
    done = qmf_cli("stat", "-q", "--json", "-L", "0", *chosen, broker.url)
    assert done.returncode == 0, done.stderr
    ours = {row["queue"]: row for row in json.loads(done.stdout)
            if str(row["queue"]).startswith(prefix)}
    rc, out, err = classic_tools("qpid-stat", "-q", "-b", broker.address, timeout=60)
    assert rc == 0, err
    classic = {k: v for k, v in parse_classic_table(out).items() if k.startswith(prefix)}

    assert sorted(ours) == sorted(classic) == sorted(state)
    for name, (sent, taken, _size) in state.items():
        mine, theirs = ours[name], classic[name]
        # the depths and counters the plain client's traffic made, in both
        assert (mine["msg"], mine["msgIn"], mine["msgOut"]) == (sent - taken, sent, taken)
        for col in COUNTERS:
            assert same(mine[col], classic_number(theirs[col])), (name, col, mine, theirs)
        for col in FLAGS:
            assert bool(mine[col]) == (theirs[col] == "Y"), (name, col, mine, theirs)
        assert mine["cons"] == 0 and mine["bind"] == 1  # the default exchange's binding
    assert ours[f"{prefix}-b"]["bytes"] > ours[f"{prefix}-a"]["bytes"] > 0


class Tool:
    """A long-running tool whose stdout is read line by line in the background."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=env, cwd=ROOT, bufsize=1)
        self.out: list[str] = []
        self.err: list[str] = []
        self._threads = [threading.Thread(target=self._pump, args=(s, sink), daemon=True)
                         for s, sink in ((self.proc.stdout, self.out),
                                         (self.proc.stderr, self.err))]
        for t in self._threads:
            t.start()

    @staticmethod
    def _pump(stream: Any, sink: list[str]) -> None:
        for line in stream:
            sink.append(line)

    def text(self) -> str:
        return "".join(self.out)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        for t in self._threads:
            t.join(5)


def poll(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.05)


@contextlib.contextmanager
def running(argv: list[str], env: dict[str, str] | None = None) -> Iterator[Tool]:
    tool = Tool(argv, env)
    try:
        yield tool
    finally:
        tool.stop()


def declare(broker: Qpidd, name: str) -> None:
    with BlockingClient(broker.url, timeout=15) as conn:
        conn.create_sender(name, create=True).close()


@pytest.mark.parametrize("which", BROKERS)
def test_queue_declared_event_seen_by_both(which: str, request: pytest.FixtureRequest,
                                           classic_tools: ClassicTools) -> None:
    broker: Qpidd = request.getfixturevalue(which)
    prefix = f"parity-ev-{uuid.uuid4().hex[:8]}"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    ours_argv = [sys.executable, "-m", "qmf_async", "events", "--json", "--class",
                 "queueDeclare", broker.url]
    classic_argv = ["bash", str(CLASSIC_TOOLS_RUN), "qpid-printevents", broker.address]
    with running(ours_argv, env) as ours, running(classic_argv) as classic:
        poll(lambda: "listening on" in "".join(ours.err) or ours.proc.poll() is not None,
             20, "qmf events listening")
        assert ours.proc.poll() is None, "".join(ours.err)
        poll(lambda: "brokerConnected" in classic.text() or classic.proc.poll() is not None,
             20, "qpid-printevents connected")
        assert classic.proc.poll() is None, "".join(classic.err)
        # qpid-printevents subscribes after printing brokerConnected: declare queues
        # until it has printed one, then ours must have printed that one too
        names: list[str] = []
        deadline = time.monotonic() + 20
        seen: list[str] = []
        while not seen:
            assert time.monotonic() < deadline, f"qpid-printevents printed none of {names}"
            names.append(f"{prefix}-{len(names)}")
            declare(broker, names[-1])
            end = time.monotonic() + 1.0
            while not seen and time.monotonic() < end:
                seen = [n for n in names if f"qName={n}" in classic.text()]
                time.sleep(0.05)
        first = seen[0]
        assert "queueDeclare" in next(line for line in classic.out if f"qName={first}" in line)

        def ours_saw() -> Any:
            for line in list(ours.out):
                record = json.loads(line)
                if record["arguments"].get("qName") == first:
                    return record
            return None
        record = poll(ours_saw, 10, f"qmf events printing the declare of {first}")
        assert record["event"] == "queueDeclare"
        assert record["package"] == "org.apache.qpid.broker"

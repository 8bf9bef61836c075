"""Console callbacks as the classic console gives them, against a genuine qpidd: a
stock one (QMF v2 only), one with QMF v1 on too, and one publishing QMF v1 only
(``--mgmt-qmf2 no``).

Objects that existed before the console come through ``object_props`` before their
``object_stats`` within a publication interval (1 s here), agents' heartbeats and
events reach their callbacks; the classic ``objectProps``/``objectStats`` of the
qpid-queue-stats pattern print what the classic console (Python 2.7) prints.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from qmf_async import Session
from qmf_async.console import Console
from tests._util import wait_until
from tests.conftest import _python27
from tests.qpidd import Qpidd, QpiddError

pytestmark = [pytest.mark.qpidd]

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = Path(__file__).resolve().parent / "classic_scripts" / "object_callbacks.py"
ELEMENTS = SCRIPT.with_name("record_elements.py")
CLASSIC_LIB = ROOT.parent / "shared" / "classic-tools" / "lib"
MODES = ["stock", "v1", "v1only"]


@pytest.fixture(scope="module")
def qpidd_v1_only(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Qpidd]:
    """A qpidd that publishes QMF v1 only (``--mgmt-qmf1 yes --mgmt-qmf2 no``)."""
    try:
        broker = Qpidd.start(qmf1=True, qmf2=False,
                             directory=tmp_path_factory.mktemp("qpidd-v1only"))
    except QpiddError as exc:
        pytest.skip(f"qpidd failed to start: {exc}")
    yield broker
    broker.stop()


def _broker(mode: str, request: pytest.FixtureRequest) -> Qpidd:
    name = {"stock": "qpidd_stock", "v1": "qpidd_v1", "v1only": "qpidd_v1_only"}[mode]
    broker: Qpidd = request.getfixturevalue(name)
    return broker


async def _create_queues(url: str, names: list[str]) -> None:
    async with Session.connect(url, rcv_objects=False, rcv_events=False) as session:
        (broker,) = await session.get_objects(_class="broker")
        for name in names:
            await broker.create("queue", name, {}, False)


class Recorder(Console):
    """What the callbacks received, in order."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.names: dict[Any, str] = {}
        self.calls: dict[Any, list[str]] = {}
        self.heartbeats = 0
        self.events: list[str] = []
        self.infos: list[Any] = []
        self.agents: list[Any] = []

    def broker_info(self, broker: Any) -> None:
        self.infos.append(broker)

    def new_agent(self, agent: Any) -> None:
        self.agents.append(agent)

    def _note(self, obj: Any, kind: str) -> None:
        if obj.get_class_key().name != "queue":
            return
        oid = obj.get_object_id()
        self.calls.setdefault(oid, []).append(kind)
        if kind == "p" and str(obj.name).startswith(self.prefix):
            self.names[oid] = obj.name

    def object_props(self, broker: Any, obj: Any) -> None:
        self._note(obj, "p")

    def object_stats(self, broker: Any, obj: Any) -> None:
        self._note(obj, "s")

    def heartbeat(self, agent: Any, timestamp: int) -> None:
        self.heartbeats += 1

    def event(self, broker: Any, event: Any) -> None:
        name = event.get_arguments().get("qName")
        if isinstance(name, str) and name.startswith(self.prefix):
            self.events.append(name)

    def complete(self) -> set[str]:
        """The names of the queues seen through both callbacks."""
        return {n for oid, n in self.names.items() if "s" in self.calls[oid]}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("bound", [False, True], ids=["all", "bind_class"])
async def test_console_callbacks_as_the_classic_console(
        mode: str, bound: bool, request: pytest.FixtureRequest) -> None:
    qpidd = _broker(mode, request)
    prefix = f"cb-{uuid.uuid4().hex[:8]}-"
    before = [f"{prefix}{i}" for i in range(2)]
    await _create_queues(qpidd.url, before)
    rec = Recorder(prefix)
    async with Session(rec, user_bindings=bound) as session:
        broker = await session.add_broker(qpidd.url)
        if bound:
            await session.bind_class("org.apache.qpid.broker", "queue")
            await session.bind_event("org.apache.qpid.broker", "queueDeclare")
        # an event raised at once (before a v1-only qpidd is known to be one) arrives
        await _create_queues(qpidd.url, [f"{prefix}early"])
        # the objects that existed before: within a publication interval or two
        await wait_until(lambda: rec.complete() >= set(before), 10.0,
                         message=f"callbacks for {before}: {rec.calls}")
        # object_props came first for each: the classic console's order
        assert all(rec.calls[oid][0] == "p" for oid in rec.names), rec.calls
        # events (a declared queue raises queueDeclare) and heartbeats
        await wait_until(lambda: rec.events and rec.heartbeats, 10.0,
                         message="event and heartbeat")
        assert rec.events == [f"{prefix}early"]
        assert rec.infos == [broker] and rec.agents
        # a qpidd publishing v1 only is followed over v1
        assert broker.qmf_version == (1 if mode == "v1only" else 2)


async def test_qmf_version_1_on_a_stock_qpidd_says_why_nothing_arrives(
        qpidd_stock: Qpidd, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "qmf_async.session")
    async with Session(Console(), qmf_version=1, agent_interval=0.5,
                       missed_heartbeats=2) as session:
        await session.add_broker(qpidd_stock.url)
        await wait_until(lambda: "no QMF v1 heartbeat" in caplog.text, 10.0,
                         message="the warning")
    assert "publishes QMF v2 only (--mgmt-qmf1 no)" in caplog.text


@pytest.fixture(scope="module")
def classic_lib(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    py2 = _python27()
    if py2 is None or not CLASSIC_LIB.exists():
        pytest.skip("the classic console needs Python 2.7 and ../shared/classic-tools/lib")
    lib = tmp_path_factory.mktemp("classic-cb") / "lib"
    shutil.copytree(CLASSIC_LIB, lib)  # the 0-10 spec cache is written beside the spec
    return py2, lib


def _run(python: str, path: str, *args: str, script: Path = SCRIPT) -> str:
    done = subprocess.run([python, str(script), *args], capture_output=True, text=True,
                          timeout=90, env={**os.environ, "PYTHONPATH": path}, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("mode", MODES)
def test_classic_object_callbacks_print_what_the_classic_console_prints(
        mode: str, request: pytest.FixtureRequest, classic_lib: tuple[str, Path]) -> None:
    # qpid-queue-stats' pattern: userBindings=True, bindClass(queue), objectProps fills a
    # map that objectStats reads; the queues exist before the console
    qpidd = _broker(mode, request)
    prefix = f"cq-{uuid.uuid4().hex[:8]}"
    names = [f"{prefix}-{i}" for i in range(3)]
    asyncio.run(_create_queues(qpidd.url, names))
    ours = _run(sys.executable, str(ROOT), qpidd.address, prefix, "3")
    assert ours.splitlines() == [f"objectProps: {' '.join(names)}",
                                 f"objectStats: {' '.join(names)}",
                                 "objectProps first: True"]
    py2, lib = classic_lib
    assert _run(py2, str(lib), qpidd.address, prefix, "3") == ours


def test_classic_records_over_v2_list_the_statistics_that_arrived(
        qpidd_stock: Qpidd, classic_lib: tuple[str, Path]) -> None:
    # a stock qpidd leaves some statistics out of a v2 queue's periodic update (the
    # latency ones of a queue that has had no message): the classic console lists what
    # arrived in an objectStats update, and reads a missing one as None
    queue = f"rq-{uuid.uuid4().hex[:8]}"
    asyncio.run(_create_queues(qpidd_stock.url, [queue]))
    ours = _run(sys.executable, str(ROOT), qpidd_stock.address, queue, script=ELEMENTS)
    lines = dict(line.split(": ", 1) for line in ours.splitlines())
    assert set(lines) == {"query properties", "query statistics", "query unlisted",
                          "update statistics", "update unlisted"}, ours
    assert "messageLatencySamples=None" in lines["update unlisted"], ours
    py2, lib = classic_lib
    theirs = dict(line.split(": ", 1)
                  for line in _run(py2, str(lib), qpidd_stock.address, queue,
                                   script=ELEMENTS).splitlines())
    # the query answer is not compared: this session asks qpidd's broker agent over v1
    # (every statistic, docs/classic.md), the classic console over v2
    for key in ("query properties", "update statistics", "update unlisted"):
        assert lines[key] == theirs[key], key

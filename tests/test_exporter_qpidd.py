"""The exporter in-process on a genuine qpidd (no Prometheus): the snapshot, the live
updates, deletions, on QMF v2 only (stock) and with v1 on; and the project's own agent
on the same qpidd exported generically from its schema."""

from __future__ import annotations

import asyncio
import contextlib
import re
import select
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator, Callable

import pytest

from qmf_async import Session
from qmf_async.exporter import Exporter, LiveStore

from ._util import wait_until
from .agent_v2_helpers import PKG, counter_agent
from .qpidd import Qpidd, send_messages

pytest.importorskip("prometheus_client")
from qmf_async.transport import NativeAmqp10Transport

pytestmark = pytest.mark.qpidd


@contextlib.asynccontextmanager
async def _exporter(url: str, store: LiveStore) -> AsyncIterator[tuple[Session, Exporter]]:
    async with Session(manage_connections=True) as session:
        async with Exporter(session, store, tick=0.2, stale_after=2.0) as exporter:
            await session.add_broker(url, timeout=10)
            exporter.check_brokers()
            yield session, exporter


def _broker_total(text: str, where: str,
                  metric: str = "qpidd_broker_messages_enqueued_total") -> float | None:
    prefix = f'{metric}{{broker="{where}"}} '
    for line in text.splitlines():
        if line.startswith(prefix):
            return float(line[len(prefix):])
    return None


@pytest.mark.parametrize("v1", [False, True], ids=["stock-v2-only", "qmf1-on"])
async def test_queues_come_update_and_go(v1: bool, request: pytest.FixtureRequest) -> None:
    broker: Qpidd = request.getfixturevalue("qpidd_v1" if v1 else "qpidd_stock")
    name = f"exp-{uuid.uuid4().hex[:12]}"
    where = broker.address
    async with _exporter(broker.url, LiveStore()) as (session, exporter):
        await wait_until(lambda: exporter.snapshots >= 1, 30, message="the first snapshot")
        text = exporter.render().decode()
        assert f'qpidd_up{{broker="{where}"}} 1.0' in text
        assert f'qpidd_broker_uptime_seconds{{broker="{where}"}}' in text
        assert "qmf-reply-" not in text  # the consoles' own queues are left out
        (qmf_broker,) = await session.get_objects(_class="broker")
        await qmf_broker.create("queue", name, {}, False)
        series = f'qpidd_queue_messages{{broker="{where}",vhost="/",queue="{name}"}} 0'
        await wait_until(lambda: series in exporter.render().decode(), 20,
                         message="the new queue's series")
        await asyncio.to_thread(send_messages, where, name, 25)
        enqueued = (f'qpidd_queue_messages_enqueued_total{{broker="{where}",vhost="/",'
                    f'queue="{name}"}} 25')
        await wait_until(lambda: enqueued in exporter.render().decode(), 20,
                         message="the 25 messages counted")
        total = await wait_until(lambda: _broker_total(exporter.render().decode(), where), 10)
        await qmf_broker.delete("queue", name, {})
        await wait_until(lambda: f'queue="{name}"' not in exporter.render().decode(), 20,
                         message="the deleted queue leaves")
        # the broker-wide counter keeps the deleted queue's messages: rate() stays right
        # (read after two more publications of the broker object)
        uptime = "qpidd_broker_uptime_seconds"
        deleted_at = _broker_total(exporter.render().decode(), where, uptime) or 0.0
        await wait_until(lambda: (_broker_total(exporter.render().decode(), where, uptime)
                                  or 0.0) >= deleted_at + 2, 20, message="two publications")
        assert (_broker_total(exporter.render().decode(), where) or 0) >= total >= 25
        text = exporter.render().decode()
        assert f'qpidd_queues_declared_total{{broker="{where}"}}' in text
        assert f'qpidd_queues_deleted_total{{broker="{where}"}}' in text
        assert exporter.dropped() == 0


async def test_the_project_agent_is_exported_generically(qpidd_stock: Qpidd) -> None:
    store = LiveStore(generic=True, packages=[PKG])
    async with _exporter(qpidd_stock.url, store) as (_, exporter):
        async with counter_agent(qpidd_stock.url, transport=NativeAmqp10Transport,
                                 interval=0.5) as agent:
            base = "qmf_org_qmfasync_v2test_counter"

            def seen() -> bool:
                text = exporter.render().decode()
                return f"{base}_count{{" in text and 'object="tocks"' in text

            await wait_until(seen, 20, message="the agent's counters")
            text = exporter.render().decode()
            line = next(ln for ln in text.splitlines()
                        if ln.startswith(f"{base}_count{{") and 'object="tocks"' in ln)
            assert line.endswith(" 100") and f'agent="{agent.v2_name}"' in line
            age = (f'qmf_exporter_agent_last_update_age_seconds{{agent="{agent.v2_name}",'
                   f'broker="{qpidd_stock.address}"}}')
            assert age in text


def _read_until(proc: subprocess.Popen[bytes], seen: bytearray, pattern: str,
                timeout: float) -> str:
    """Read ``proc``'s stderr into ``seen`` until a line matches ``pattern``; the line."""
    assert proc.stderr is not None
    deadline = time.monotonic() + timeout
    while True:
        for line in seen.decode(errors="replace").splitlines():
            if re.search(pattern, line):
                return line
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"no line {pattern!r} within {timeout}s: {seen.decode()!r}")
        ready, _, _ = select.select([proc.stderr], [], [], left)
        if ready:
            chunk = proc.stderr.read1(65536)  # type: ignore[attr-defined]
            if not chunk:
                raise AssertionError(f"qmf exporter ended: {seen.decode()!r}")
            seen += chunk


async def test_the_exporter_follows_the_connection_state_stream(
        qpidd_fresh: Callable[[bool], Qpidd]) -> None:
    """A snapshot after each (re)connection, from the session's ``broker_states()``:
    the housekeeping tick is an hour here, and no ``check_brokers()`` is called (on
    main the exporter polled ``broker.connected`` at each tick and saw nothing)."""
    broker = qpidd_fresh(False)
    async with Session(manage_connections=True, reconnect_min_delay=0.1,
                       reconnect_max_delay=0.5) as session, \
            Exporter(session, LiveStore(), tick=3600.0) as exporter:
        added = await session.add_broker(broker.url, timeout=10)
        await wait_until(lambda: exporter.snapshots >= 1, 30, message="the first snapshot")
        await asyncio.to_thread(broker.stop)
        await wait_until(lambda: not added.connected, 30, message="the loss seen")
        again = await asyncio.to_thread(Qpidd.start, qmf1=False, port=broker.port,
                                        directory=broker.directory)
        broker.pid = again.pid
        await wait_until(lambda: exporter.snapshots >= 2, 40,
                         message="a snapshot after the reconnection")
        assert added.reconnects >= 1


def test_qmf_exporter_notes_a_lost_and_a_regained_broker(
        qpidd_fresh: Callable[[bool], Qpidd]) -> None:
    """As ``qmf events`` and ``qmf collect``: one line when the broker is lost, one when
    it is back; no traceback."""
    broker = qpidd_fresh(False)
    proc = subprocess.Popen(
        [sys.executable, "-m", "qmf_async", "exporter", "--listen", "127.0.0.1:0",
         "-b", broker.address, "--tick", "0.2"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seen = bytearray()
    try:
        serving = _read_until(proc, seen, r"^qmf exporter: serving http://", 30)
        metrics = serving.split("serving ", 1)[1]

        def up() -> bool:
            with urllib.request.urlopen(metrics, timeout=10) as r:
                return f'qpidd_up{{broker="{broker.address}"}} 1' in r.read().decode()

        deadline = time.monotonic() + 30
        while not up():
            assert time.monotonic() < deadline, "the exporter did not connect"
            time.sleep(0.1)
        broker.stop()
        lost = _read_until(proc, seen, r"^qmf exporter: lost the connection to ", 30)
        assert f"amqp://{broker.address}/ " in lost, lost  # no vhost on qpidd
        again = Qpidd.start(qmf1=False, port=broker.port, directory=broker.directory)
        broker.pid = again.pid
        back = _read_until(proc, seen, r"^qmf exporter: reconnected to ", 40)
        assert back == f"qmf exporter: reconnected to amqp://{broker.address}/", back
    finally:
        proc.terminate()
        _, rest = proc.communicate(timeout=30)
        seen += rest
    assert proc.returncode == 0, seen.decode()
    assert "Traceback" not in seen.decode(), seen.decode()

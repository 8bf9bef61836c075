"""The exporter in-process on a genuine qpidd (no Prometheus): the snapshot, the live
updates, deletions, on QMF v2 only (stock) and with v1 on; and the project's own agent
on the same qpidd exported generically from its schema."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator

import pytest

from qmf_async import Session
from qmf_async.exporter import Exporter, LiveStore

from ._util import wait_until
from .agent_v2_helpers import PKG, counter_agent
from .qpidd import Qpidd, send_messages

pytest.importorskip("proton")
pytest.importorskip("prometheus_client")
from qmf_async.transport import ProtonTransport

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
        async with counter_agent(qpidd_stock.url, transport=ProtonTransport,
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

"""The exporter on a RabbitMQ bus (QMF v1 over AMQP 0-9-1): the management-broker role
and the demo agent, whose simulated broker publishes qpidd's classes; the exporter gives
them the ``qpidd_`` families, labelled with the bus it reached them on."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from qmf_async import Session
from qmf_async.agent.broker import ManagementBroker
from qmf_async.exporter import Exporter, LiveStore

from ._util import import_example, private_vhost, wait_until

pytest.importorskip("prometheus_client")

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent
demo = import_example("demo_agent", ROOT / "examples" / "demo_agent.py")


@pytest.fixture
def bus_url(amqp_url: str) -> Iterator[str]:
    with private_vhost(amqp_url, "qmf-exporter-test") as url:
        yield url


async def test_the_demo_agents_queues_on_a_rabbitmq_bus(bus_url: str) -> None:
    label = f"exporter-test-{uuid.uuid4().hex[:8]}"
    role = ManagementBroker(bus_url, broker_id=uuid.uuid4(), interval=0.25,
                            label=f"{label}-role")
    await role.start()
    async with contextlib.AsyncExitStack() as stack:
        stack.push_async_callback(role.stop, 2.0)
        _, model = demo.build_demo_agent(bus_url, interval=0.25, queues=1, seed=7,
                                         label=label, attach_timeout=1.0)
        await model.start()
        stack.push_async_callback(model.stop)
        session = await stack.enter_async_context(Session(manage_connections=True))
        exporter = await stack.enter_async_context(Exporter(session, LiveStore(), tick=0.2))
        await session.add_broker(bus_url, timeout=10)
        exporter.check_brokers()
        parts = urlsplit(bus_url)
        where = f"{parts.hostname}:{parts.port or 5672}"

        def orders() -> str | None:
            text = exporter.render().decode()
            for line in text.splitlines():
                if line.startswith("qpidd_queue_messages_enqueued_total{") \
                        and 'queue="orders"' in line:
                    return line
            return None

        first = await wait_until(orders, 20, message="the demo agent's queue orders")
        assert f'broker="{where}"' in first
        # its traffic goes on: the counter grows
        count = float(first.rsplit(" ", 1)[1])
        await wait_until(lambda: float((orders() or " 0").rsplit(" ", 1)[1]) > count, 20,
                         message="orders' enqueues grow")
        text = exporter.render().decode()
        assert f'qpidd_up{{broker="{where}"}} 1.0' in text
        assert exporter.dropped() == 0

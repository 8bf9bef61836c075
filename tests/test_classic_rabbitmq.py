"""The classic API on a RabbitMQ bus: the management-broker role and the RabbitMQ
bridge serve RabbitMQ's own queues as qpidd's classes (QMF v1 over AMQP 0-9-1), and a
classic script reads and manages them as it would on qpidd."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiormq
import pytest

from qmf_async.agent import Agent
from qmf_async.agent.broker import ManagementBroker
from qmf_async.bridge.rabbitmq import RabbitApi, RabbitBridge

from ._util import private_vhost, wait_until

pytestmark = pytest.mark.integration

INTERVAL = 0.5
API_URL = os.environ.get("QMF_RABBITMQ_API", "http://guest:guest@localhost:15672/")


@pytest.fixture(scope="module")
def bus_url(amqp_url: str) -> Iterator[str]:
    with private_vhost(amqp_url, "qmf-classic") as url:
        if url == amqp_url:
            pytest.skip("needs a private vhost (local RabbitMQ with rabbitmqctl)")
        yield url


@pytest.fixture
async def bridge(bus_url: str) -> AsyncIterator[RabbitBridge]:
    from urllib.parse import unquote, urlsplit
    role = ManagementBroker(bus_url, interval=INTERVAL)
    await role.start()
    agent = Agent(bus_url, label="classic-bridge-test", interval=INTERVAL)
    b = RabbitBridge(agent, RabbitApi(API_URL, timeout=5.0), interval=INTERVAL,
                     vhost=unquote(urlsplit(bus_url).path[1:]))
    await b.start()
    yield b
    await b.stop()
    await role.stop()


async def test_a_classic_script_reads_and_manages_rabbitmq(bus_url: str,
                                                          bridge: RabbitBridge) -> None:
    name = f"classic-{uuid.uuid4().hex[:8]}"
    conn = await aiormq.connect(bus_url)
    try:
        ch = await conn.channel()
        await ch.queue_declare(name)
        for i in range(3):
            await ch.basic_publish(f"m{i}".encode(), routing_key=name)

        def script() -> dict[str, Any]:
            from qmf.console import Session
            from qpidtoollibs import BrokerAgent
            out: dict[str, Any] = {}
            sess = Session(timeout=10)
            try:
                broker = sess.addBroker(bus_url)
                out["broker"] = repr(broker)
                deadline = time.monotonic() + 15  # the bridge reads RabbitMQ's API
                while True:
                    queues = [q for q in sess.getObjects(_class="queue") if q.name == name]
                    if (queues and queues[0].msgDepth == 3) or time.monotonic() > deadline:
                        break
                    time.sleep(0.1)
                q = queues[0]
                out["depth"] = q.msgDepth
                out["repr"] = repr(q)
                out["oid_text"] = repr(q.getObjectId())
                out["purge"] = q.purge(0).status
                (br,) = sess.getObjects(_class="broker")
                r = br.echo(9, "over rabbit")
                out["echo"] = (r.status, r.sequence, r.body)
                agent = BrokerAgent(sess)
                out["tl_queue"] = agent.getQueue(name).name
                out["tl_echo"] = agent.echo(2, "tl")
            finally:
                sess.close()
            return out

        out = await asyncio.to_thread(script)
        assert out["broker"].startswith("Broker connected at: localhost:")
        assert out["depth"] == 3
        assert out["repr"].startswith("org.apache.qpid.broker:queue[0-")
        assert out["repr"].endswith(name)
        assert out["purge"] == 0
        assert out["echo"] == (0, 9, "over rabbit")
        assert out["tl_queue"] == name
        assert out["tl_echo"] == {"sequence": 2, "body": "tl"}

        async def emptied() -> bool:
            ok = await ch.queue_declare(name, passive=True)
            return ok.message_count == 0

        await wait_until(emptied, timeout=10)
    finally:
        await conn.close()

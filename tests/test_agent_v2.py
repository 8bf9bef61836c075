"""The project's agent speaking QMF v2 on RabbitMQ (AMQP 0-9-1): it declares
``qmf.default.direct`` and ``qmf.default.topic`` as qpidd has them, and the project's
v2 console core over AMQP 0-9-1 finds it, lists its objects, calls its methods and
receives its events and data indications; the management-broker role answers v2 for
its ``agent`` objects."""

from __future__ import annotations

import random
import time

import pytest

from qmf_async.agent.broker import AGENT_CLASS, ManagementBroker
from qmf_async.protocol import QueryDone, texts_from_schema
from qmf_async.transport import AiormqTransport
from qmf_async.wire import V2SchemaId

from ._util import private_vhost, wait_until
from .agent_v2_helpers import Driver, console_sees_the_agent, counter_agent

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("versions", [(2,), (1, 2)], ids=["v2-only", "v1-and-v2"])
async def test_the_v2_console_core_finds_queries_and_calls_the_agent_over_0_9_1(
        amqp_url: str, versions: tuple[int, ...]) -> None:
    async with counter_agent(amqp_url, versions=versions, transport=AiormqTransport) as agent:
        assert agent.v2_live
        t = AiormqTransport(amqp_url)
        await t.connect()
        try:
            driver = Driver(t)
            await driver.open(("qmf.default.topic", "agent.ind.#"))
            await console_sees_the_agent(driver, agent)
            assert driver.core.malformed == 0
        finally:
            await t.close()


async def test_an_agent_on_the_default_transport_declares_the_v2_exchanges(
        amqp_url: str) -> None:
    """On a vhost without ``qmf.default.direct`` and ``qmf.default.topic``, an agent
    on the default (automatic) transport declares them and speaks v2: the exchange
    declaration is part of every transport's contract, the automatic one's too."""
    with private_vhost(amqp_url, "qmf-agent-v2-auto") as url:
        if url == amqp_url:
            pytest.skip("needs a fresh vhost (rabbitmqctl or the management API)")
        async with counter_agent(url, versions=(2,)) as agent:
            assert agent.v2_live
            t = AiormqTransport(url)
            await t.connect()
            try:
                driver = Driver(t)
                await driver.open(("qmf.default.topic", "agent.ind.#"))
                await driver.send(driver.core.send_locate(time.monotonic()))
                await wait_until(lambda: agent.v2_name in driver.core.agents, timeout=10.0,
                                 message="the agent's locate answer")
            finally:
                await t.close()


async def test_the_management_broker_role_answers_v2_for_its_agent_objects(
        amqp_url: str) -> None:
    """On RabbitMQ the role's own agent answers v2 requests to ``broker`` (naming
    itself ``broker``, as qpidd does) with the ``agent`` objects of attached agents."""
    with private_vhost(amqp_url, "qmf-agent-v2-role") as url:
        bank = random.randrange(1000, 1 << 20)
        async with ManagementBroker(url, broker_bank=bank, interval=0.5,
                                    transport_factory=AiormqTransport) as mb, \
                counter_agent(url, versions=(1, 2), transport=AiormqTransport) as agent:
            assert agent.attached and mb.agent.v2_name == (
                f"qmf-async:management-broker:{mb.broker_id}")
            t = AiormqTransport(url)
            await t.connect()
            try:
                driver = Driver(t)
                await driver.open()
                await driver.send(driver.core.send_locate(time.monotonic()))
                await wait_until(lambda: mb.agent.v2_name in driver.core.agents, timeout=10.0,
                                 message="the role's locate answer")
                agent_id = V2SchemaId("org.apache.qpid.broker", "agent")

                async def labels() -> list[str]:
                    cid = await driver.send(driver.core.send_query(None, schema_id=agent_id))
                    ev = await driver.answer(cid)
                    assert isinstance(ev, QueryDone) and ev.agent == "broker"
                    return [texts_from_schema(d.values, AGENT_CLASS)["label"] for d in ev.items]

                async def listed() -> bool:
                    return agent.label in await labels()

                await wait_until(listed, timeout=10.0, interval=0.2,
                                 message="the attached agent among the role's agent objects")
                # the same objects by the role's own name, which its answers then carry
                cid = await driver.send(driver.core.send_query(mb.agent.v2_name,
                                                               schema_id=agent_id))
                ev = await driver.answer(cid)
                assert isinstance(ev, QueryDone) and ev.agent == mb.agent.v2_name
                assert agent.label in [texts_from_schema(d.values, AGENT_CLASS)["label"]
                                       for d in ev.items]
            finally:
                await t.close()

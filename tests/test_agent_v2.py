"""The project's agent speaking QMF v2 on RabbitMQ (AMQP 0-9-1): it declares
``qmf.default.direct`` and ``qmf.default.topic`` as qpidd has them, and the project's
v2 console core over AMQP 0-9-1 finds it, lists its objects, calls its methods and
receives its events and data indications."""

from __future__ import annotations

import pytest

from qmf_async.transport import AiormqTransport

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

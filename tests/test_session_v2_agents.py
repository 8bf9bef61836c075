"""The Session over QMF v2 with the project's own agents: on RabbitMQ (AMQP 0-9-1,
``qmf_version=2``), a v2-only agent with no management broker (schemas asked of the
agent itself with the v1 ``S`` on its v2 address, as v2 agents answer it) and an agent
speaking both versions behind the management-broker role; on qpidd (v2 by default), a
v2-only agent.  Objects, a method with an object reference, events and updates."""

from __future__ import annotations

import random
from typing import Any

import pytest

from qmf_async import QmfObject, Session
from qmf_async.agent.broker import ManagementBroker
from qmf_async.transport import AiormqTransport, NativeAmqp10Transport

from ._util import private_vhost, wait_until
from .agent_v2_helpers import PKG, count_of, counter_agent


async def _exercise(session: Session, agent: Any) -> None:
    """What a user does with an agent: list, call (with a reference), hear events."""
    resets = session.events(_class="counterReset")
    updates = session.object_updates(_class="counter")
    await resets.ready()
    await updates.ready()
    await wait_until(lambda: agent.v2_name in [a.name for a in session.get_agents()],
                     timeout=15.0, message="the agent's heartbeat")

    async def counters() -> list[QmfObject]:
        found = await session.get_objects(_class="counter", _package=PKG, _timeout=5.0)
        return found if len(found) == 2 else []
    objs = await wait_until(counters, timeout=15.0, interval=0.2, message="the counters")
    assert sorted(o.name for o in objs) == ["ticks", "tocks"]
    ticks = next(o for o in objs if o.name == "ticks")
    tocks = next(o for o in objs if o.name == "tocks")
    owner = ticks.get_agent()
    assert owner is not None and owner.name == agent.v2_name and owner.qmf_version == 2
    assert [a.name for a in session.get_agents()].count(agent.v2_name) == 1
    assert (await ticks.add(5)).total == 5
    assert (await ticks.absorb(tocks.get_object_id())).total == 105
    assert count_of(agent, "ticks") == 105
    assert (await ticks.reset()).previous == 105
    event = await resets.get(timeout=10.0)
    assert (event.arguments, event.agent) == ({"name": "ticks", "previous": 105}, owner)

    async def reset_seen() -> bool:
        obj = await updates.get(timeout=10.0)
        return obj.name == "ticks" and obj.count == 0
    await wait_until(reset_seen, timeout=15.0, message="the update after the reset")
    (again,) = await session.get_objects(_objectId=ticks.get_object_id())
    assert (again.name, again.count) == ("ticks", 0)


@pytest.mark.integration
async def test_a_v2_only_agent_on_rabbitmq_without_a_management_broker(amqp_url: str) -> None:
    with private_vhost(amqp_url, "qmf-session-v2") as url:
        async with counter_agent(url, versions=(2,), interval=0.5,
                                 transport=AiormqTransport) as agent, \
                Session.connect(url, qmf_version=2, broker_timeout=0.5,
                                _transport_factory=AiormqTransport) as session:
            assert session.brokers[0].qmf_version == 2
            assert not session.brokers[0].has_management
            await session.wait_for_agents(1, timeout=10.0)
            await _exercise(session, agent)


@pytest.mark.integration
async def test_an_agent_behind_the_role_on_rabbitmq_over_v2(amqp_url: str) -> None:
    with private_vhost(amqp_url, "qmf-session-v2-role") as url:
        bank = random.randrange(1000, 1 << 20)
        async with ManagementBroker(url, broker_bank=bank, interval=0.5,
                                    transport_factory=AiormqTransport), \
                counter_agent(url, versions=(1, 2), interval=0.5,
                              transport=AiormqTransport) as agent, \
                Session.connect(url, qmf_version=2,
                                _transport_factory=AiormqTransport) as session:
            assert session.brokers[0].has_management
            await _exercise(session, agent)
            # the agent speaks v1 too: its v1 entry, once heard of, is hidden (one agent)
            hidden = session.brokers[0]._twins.hidden
            await wait_until(lambda: len(hidden) == 1, timeout=15.0,
                             message="the agent's v1 twin heard of and hidden")
            assert agent.label not in [a.label for a in session.get_agents()
                                       if a.qmf_version == 1]
            assert [a.name for a in session.get_agents()].count(agent.v2_name) == 1


@pytest.mark.qpidd
async def test_a_v2_only_agent_on_a_stock_qpidd(qpidd_stock: Any) -> None:
    async with counter_agent(qpidd_stock.url, versions=(2,), interval=0.5,
                             transport=NativeAmqp10Transport) as agent, \
            Session.connect(qpidd_stock.url) as session:
        assert session.brokers[0].qmf_version == 2
        await _exercise(session, agent)

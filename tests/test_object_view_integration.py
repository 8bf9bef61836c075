"""The console's object view against the real RabbitMQ, with the management-broker role
and the demo agent: a console that connects while the agent is already publishing
reads the name and the statistics of every object update it is handed, over a
stream of mixed ``c``/``i`` (queues created, republished and deleted meanwhile)."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from qmf_async import Change, QmfObject, UnknownClassError

from .test_session_integration import (  # noqa: F401  (bus is a fixture)
    INTERVAL,
    Bus,
    bus,
    open_session,
    running_demo,
    running_role,
    wait_for,
)

pytestmark = pytest.mark.integration


async def test_a_late_console_reads_name_and_statistics_of_every_update(
        bus: Bus) -> None:  # noqa: F811  (the fixture)
    async with running_role(bus) as _role, running_demo(bus) as (agent, _model):
        assert agent.attached
        # the agent publishes for a few intervals before the console exists (setup, not
        # an assertion: what follows polls with deadlines)
        await asyncio.sleep(4 * INTERVAL)
        async with open_session(bus) as (session, _brokers):
            remote = await wait_for(session, agent)
            # what the agent republished for the new console (c and i) has passed by
            # the time the user subscribes: the first updates seen are statistics
            await asyncio.sleep(3 * INTERVAL)
            updates = session.object_updates(_class="queue", maxsize=100_000)
            (broker_obj,) = await session.get_objects(_class="broker", _agent=remote)
            mine = (agent.broker_bank, agent.agent_bank)
            got: list[QmfObject] = []
            created = [f"view-{uuid.uuid4().hex[:6]}-{i}" for i in range(3)]
            deadline = time.monotonic() + 30.0
            step = 0

            def kinds() -> set[Change]:
                return {o.get_changes() & ~Change.DELETED for o in got}

            while (len(got) < 60 or not {Change.PROPERTIES, Change.STATISTICS} <= kinds()
                   or not any(o.is_deleted() for o in got)):
                assert time.monotonic() < deadline, f"{len(got)} updates, kinds {kinds()}"
                # mixed c/i: new queues (c and i of unknown objects), a republish of
                # everything (c and i of known ones), deletions
                if step < len(created):
                    await broker_obj.create("queue", created[step], {"durable": False}, False)
                elif step == len(created):
                    agent.republish()
                elif step == len(created) + 1:
                    await broker_obj.delete("queue", created[0], {})
                step += 1
                try:
                    obj = await updates.get(2.0)
                except TimeoutError:
                    continue
                if obj.get_object_id().agent_key() == mine:
                    got.append(obj)
            for obj in got:
                # every update answers a property and a statistic, whatever it carried
                assert isinstance(obj.name, str) and obj.name, obj
                assert isinstance(obj.msgDepth, int), obj
                assert obj.get_properties() and obj.get_statistics()
            names = {o.name for o in got}
            assert set(created) <= names
            assert session.completion_failures == 0
            # the console joined late: it completed what it first saw as statistics
            assert session.completion_queries >= 1
            # a typo is an error, a real class with objects is not
            with pytest.raises(UnknownClassError, match="queue"):
                await session.get_objects(_class="queu", _agent=remote)
            assert await session.get_objects(_class="queue", _agent=remote)

"""Two qpidds in one Session: agents, objects, filters, events and updates are never
confused between the brokers (issue 33, item 3).

Both qpidds' own agents have the banks ``1.0``, and over QMF v2 an object's id is
made from its name: a queue of the same name has the same 16-byte id on both.  The
broker connection is part of an agent's and an object id's identity.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from qmf_async import BrokerObjectId, Event, ObjectId, QmfObject, Session

from ._util import wait_until

pytestmark = [pytest.mark.qpidd]

PKG = "org.apache.qpid.broker"


async def _broker_object(session: Session, broker: Any) -> QmfObject:
    (found,) = await session.get_objects(_class="broker", _package=PKG, _broker=broker)
    return found


async def test_two_qpidds_in_one_session_are_never_confused(qpidd_stock: Any,
                                                            qpidd_v1: Any) -> None:
    name = f"twin-{uuid.uuid4().hex[:8]}"
    async with Session(timeout=10.0) as s:
        b1 = await s.add_broker(qpidd_stock.url, timeout=10.0)
        b2 = await s.add_broker(qpidd_v1.url, timeout=10.0)
        await wait_until(lambda: len(s.get_agents(b1)) >= 1 and len(s.get_agents(b2)) >= 1,
                         timeout=10.0, message="the agents of both brokers")
        (a1,) = [a for a in s.get_agents(b1) if (a.broker_bank, a.agent_bank) == (1, 0)]
        (a2,) = [a for a in s.get_agents(b2) if (a.broker_bank, a.agent_bank) == (1, 0)]
        # agents: same banks, other broker -> different agents
        assert a1 != a2 and len({a1, a2}) == 2 and {a1: 1, a2: 2}[a1] == 1

        events1 = s.events(_agent=a1, _class="queueDeclare")
        events2 = s.events(_agent=a2, _class="queueDeclare")
        updates1 = s.object_updates(_class="queue", _agent=a1, where=f"name = '{name}'")
        updates2 = s.object_updates(_class="queue", _broker=b2, where=f"name = '{name}'")
        for sub in (events1, events2, updates1, updates2):
            await sub.ready()
        brokers = [await _broker_object(s, b) for b in (b1, b2)]
        for broker_obj in brokers:
            assert (await broker_obj.create("queue", name, {}, False)).status == 0
        try:
            # objects: the same queue name on both brokers, never one object
            (q1,) = await s.get_objects(_class="queue", name=name, _agent=a1)
            (q2,) = await s.get_objects(_class="queue", name=name, _broker=b2)
            assert q1.get_broker() is b1 and q2.get_broker() is b2
            oid1, oid2 = q1.get_object_id(), q2.get_object_id()
            assert isinstance(oid1, BrokerObjectId) and oid1.broker is b1
            assert oid1.raw == oid2.raw  # over v2 the id is made from the name ...
            assert oid1 != oid2 and len({oid1, oid2}) == 2  # ... the broker tells them apart
            plain = ObjectId.parse(str(oid1))  # a plain id names it on any broker
            assert plain == oid1 and plain == oid2
            # the filters ask one broker each; an id a session handed out, its broker
            assert {q.get_broker() for q in await s.get_objects(_class="queue",
                                                                _agent=a2)} == {b2}
            (by_id,) = await s.get_objects(_objectId=oid2)
            assert by_id.get_broker() is b2 and by_id.get_object_id() == oid2
            both = await s.get_objects(_class="queue", name=name)
            assert {o.get_object_id() for o in both} == {oid1, oid2}
            # references: an object's refs are ids of its own broker
            vhosts = {v.get_broker(): v for v in await s.get_objects(_class="vhost")}
            assert q1.vhostRef == vhosts[b1].get_object_id()
            assert q1.vhostRef != vhosts[b2].get_object_id()
            assert {vhosts[b1].get_object_id(): "one",
                    vhosts[b2].get_object_id(): "two"}[q2.vhostRef] == "two"

            # events and updates of one agent or broker only
            async def first_of(sub: Any) -> Any:
                while True:
                    item = await sub.get(timeout=20.0)
                    if isinstance(item, Event) and item.arguments.get("qName") != name:
                        continue
                    return item
            got = await asyncio.gather(first_of(events1), first_of(events2),
                                       first_of(updates1), first_of(updates2))
            assert [x.agent for x in got[:2]] == [a1, a2]
            assert [x.get_broker() for x in got[2:]] == [b1, b2]
            assert got[2].get_object_id() == oid1 and got[3].get_object_id() == oid2
            # what one subscription holds is of its own broker only
            assert all(e.agent == a1 for e in await _held(events1))
            assert all(e.agent == a2 for e in await _held(events2))
            assert all(o.get_broker() is b1 for o in await _held(updates1))
            assert all(o.get_broker() is b2 for o in await _held(updates2))
        finally:
            for broker_obj in brokers:
                await broker_obj.delete("queue", name, {})


async def _held(sub: Any) -> list[Any]:
    """What ``sub`` holds now (taken out)."""
    items = []
    while len(sub):
        items.append(await sub.get(timeout=1.0))
    return items

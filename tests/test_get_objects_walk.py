"""The walk of one ``get_objects`` against a stock qpidd goes down and back up once
(issue 37; docs/architecture.md, "The walk of get_objects").

Every Python call made during the query is recorded with ``sys.setprofile``, each with
the stack it was made on, the frames sorted into the console's levels:

- session level: the ``Session`` and the components it holds (``_session``,
  ``_query``, ``_updates``, ``_streams``, ``_bindings``);
- broker level: a ``Broker`` and its parts (``_broker``, ``_v1events``,
  ``_agentlist``, ``_schemas``, ``_calls``, ``_v1route``, ``_v2``, ``_v2parts``,
  ``_waits``), and below them the runtime and the transports.

The walk goes down (session, broker, transport publish) and back up (transport
delivery, broker dispatch, the protocol core, the query's sink at the session level)
once: no stack holds a broker-level frame, above it a session-level frame, and above
that a broker-level (or lower) frame again.  That is what a broker asking its session
for something (``V2Link._prefetch`` calling ``Session.get_packages`` and
``get_classes``, which went back down through the Broker) or the session calling a
broker back from a notification (``Session._schema_seen`` routing the bodies a broker
held, from inside that broker's dispatch) looks like; both were there at 0eecff0.
The pure layers (``protocol``, ``wire``) and the proxies may be called from anywhere.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from types import FrameType
from typing import Any

import pytest

from qmf_async import Session

from .test_session_integration import bus, managed_env

__all__ = ["bus"]  # the RabbitMQ tests' private vhost fixture

SESSION_LEVEL = frozenset({"_session", "_query", "_updates", "_streams", "_bindings"})
BROKER_LEVEL = frozenset({"_broker", "_v1events", "_agentlist", "_schemas", "_calls",
                          "_v1route", "_v2", "_v2parts", "_waits"})
_CONSOLE = os.sep + os.path.join("qmf_async", "console") + os.sep
_BELOW = (os.sep + os.path.join("qmf_async", "transport") + os.sep,
          os.sep + os.path.join("qmf_async", "runtime") + os.sep)


def _level(frame: FrameType) -> str | None:
    """``S`` (session level), ``B`` (broker level and below), None (anything else)."""
    path = frame.f_code.co_filename
    if _CONSOLE in path:
        module = os.path.splitext(os.path.basename(path))[0]
        if module in SESSION_LEVEL:
            return "S"
        return "B" if module in BROKER_LEVEL else None
    return "B" if any(part in path for part in _BELOW) else None


def _name(frame: FrameType) -> str:
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_code.co_qualname}"


class Walk:
    """The distinct stacks (outermost first, console and I/O frames only) on which a
    call was made while the walk ran."""

    def __init__(self) -> None:
        self.stacks: dict[tuple[tuple[str, str], ...], None] = {}

    def __enter__(self) -> Walk:
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.setprofile(None)

    def _profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call" or _level(frame) is None:
            return
        chain: list[tuple[str, str]] = []
        f: FrameType | None = frame
        while f is not None:
            level = _level(f)
            if level is not None:
                chain.append((level, _name(f)))
            f = f.f_back
        self.stacks.setdefault(tuple(reversed(chain)), None)

    def zigzags(self) -> Iterator[str]:
        """The stacks that go down again after coming up into the session."""
        for stack in self.stacks:
            state = 0  # 1: a broker-level frame; 2: a session frame above one
            for level, _ in stack:
                if level == "B" and state == 0:
                    state = 1
                elif level == "S" and state == 1:
                    state = 2
                elif level == "B" and state == 2:
                    yield " > ".join(name for _, name in stack)
                    break

    def reached(self, *names: str) -> bool:
        """Whether one stack holds frames of each of ``names`` (``module:function``
        prefixes), in this order."""
        for stack in self.stacks:
            want = list(names)
            for _, name in stack:
                if want and name.startswith(want[0]):
                    want.pop(0)
            if not want:
                return True
        return False


_QUERY = ("_session.py:Session.get_objects", "_query.py:ObjectQueries.collect",
          "_broker.py:Broker.send_query")
#: each walk's way down: (frames of one stack, in order), for every step
_DOWN = {
    1: [(*_QUERY, "_broker.py:Broker.send_v1_query", "_broker.py:Broker.publish")],
    # the classes (P, Q) and schemas (S) asked through the broker, in tasks of their
    # own (gathered), before the query
    2: [(*_QUERY, "_v2.py:V2Link.send_query", "_v2.py:V2Link._prefetch",
         "_broker.py:Broker.classes_named", "_schemas.py:SchemaFetches.ask_catalog"),
        ("_broker.py:Broker.request", "_waits.py:Waits.request", "_broker.py:Broker.publish"),
        ("_schemas.py:SchemaFetches.ask_schema", "_broker.py:Broker.request",
         "_broker.py:Broker.publish"),
        (*_QUERY, "_v2.py:V2Link.send_query", "_waits.py:Waits.send",
         "_broker.py:Broker.publish")],
    # the fast path sends its v1 G from a task of its own
    None: [(*_QUERY, "_v1route.py:V1Route.start"),
           ("_v1route.py:V1Route._run", "_broker.py:Broker.send_v1_query",
            "_broker.py:Broker.publish")],
}
#: each walk's way back up: (frames of one stack, in order), for every step
_UP = {
    # the core's records go to the query's sink from the delivery (a record whose
    # schema was fetched first: from the delivery of the schema's answer)
    1: [("_broker.py:Broker._route_delivery", "_query.py:ObjectQueries.collect")],
    # the v2 link's answer converts each part as it arrives
    2: [("_broker.py:Broker._route_delivery", "_v2.py:V2Link.dispatch", "_v2parts.py:V2Answer.push",
         "_query.py:ObjectQueries.collect")],
    # the fast path gathers the v1 answer, names its records in its task, then hands
    # them to the query's sink
    None: [("_broker.py:Broker._route_delivery", "_v1route.py:V1Route._records"),
           ("_v1route.py:V1Route._run", "_query.py:ObjectQueries.collect")],
}


@pytest.mark.qpidd
@pytest.mark.parametrize("version", [1, 2, None], ids=["v1", "v2", "v2-fast-path"])
async def test_get_objects_goes_down_and_back_up_once(qpidd_stock: Any,
                                                      version: int | None) -> None:
    """Over QMF v1 (a stock qpidd still answers a v1 ``G``), over v2 (the V2Link's
    query, schemas fetched ahead of it) and over v2's fast path to qpidd's own agent
    (``V1Route``: a v1 ``G`` on a v2 connection): a fresh session, so that the
    schemas are fetched inside the walk."""
    async with Session.connect(qpidd_stock.url, qmf_version=version) as session:
        with Walk() as walk:
            queues = await session.get_objects(_class="queue")
    assert queues, "qpidd lists its queues"
    assert list(walk.zigzags()) == []
    # the class's schema was fetched inside the walk, and arrived through the broker
    assert walk.reached("_broker.py:Broker._route_delivery", "_v1events.py:V1Events._schema_seen")
    # down: the session's query through the broker's one send path to the transport
    for down in _DOWN[version]:
        assert walk.reached(*down), down
    for up in _UP[version]:
        assert walk.reached(*up), up


@pytest.mark.integration
async def test_get_objects_over_rabbitmq_goes_down_and_back_up_once(bus: Any) -> None:
    """QMF v1 over AMQP 0-9-1: the demo agent on RabbitMQ, attached to the
    management-broker role; a session that follows no publications, so that the
    class's schema is fetched inside the walk."""
    async with managed_env(bus, rcv_objects=False, rcv_events=False) as env:
        with Walk() as walk:
            queues = await env.session.get_objects(_class="queue", _agent=env.remote)
    assert queues
    assert list(walk.zigzags()) == []
    assert walk.reached("_broker.py:Broker._route_delivery", "_v1events.py:V1Events._schema_seen")
    for down in _DOWN[1]:
        assert walk.reached(*down), down
    assert walk.reached("_aiormq.py:AiormqTransport.publish")
    for up in _UP[1]:
        assert walk.reached(*up), up

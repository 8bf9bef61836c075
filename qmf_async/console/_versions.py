"""Which QMF version one broker connection speaks to qpidd, as it goes
(:class:`VersionTurn`): the v1 binding keys of the connection's topic endpoint, the v1
event keys bound early while the version is being chosen, and the turn of a v2
connection to v1 when qpidd publishes v1 only.  The choice itself is pure state, the
protocol core's :class:`~qmf_async.protocol.VersionChoice`; this is its asyncio side.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from .. import names
from ..errors import QmfError
from ..protocol import AgentArrived, ConsoleProtocol, VersionChoice
from ._agentlist import AgentList, ConnectionSide
from ._objects import RemoteAgent
from ._v1events import V1Events

__all__ = ["TurnHost", "VersionTurn"]

# the session's logger: a broker's messages are the console's
log = logging.getLogger("qmf_async.session")

#: the v1 binding that keeps the list of v1 agents current (the broker's agent objects)
V1_AGENT_LIST = ("console.obj.*.*.org.apache.qpid.broker.agent",)


class TurnHost(ConnectionSide, Protocol):
    """What a :class:`VersionTurn` needs of its broker (a ``Broker`` is one)."""

    def retire_v2(self) -> bool: ...


class VersionTurn:
    """The QMF version of the broker ``host``'s connections (see the module doc), with
    the broker's version choice (``choice``), agent list (``agents``), v1 core and
    v1 event handlers (``events``); ``binding_keys`` and ``agent_left`` are the
    session's (the v1 keys its settings ask for; an agent left)."""

    def __init__(self, host: TurnHost, *, choice: VersionChoice, agents: AgentList,
                 core: ConsoleProtocol, events: V1Events,
                 binding_keys: Callable[[], list[str]],
                 agent_left: Callable[[RemoteAgent], None]) -> None:
        self.host = host
        self.choice = choice
        self.agents = agents
        self.core = core
        self.events = events
        self.binding_keys = binding_keys
        self.agent_left = agent_left
        #: the v1 binding keys of the current connection's topic endpoint
        self.keys: list[str] = []

    def start(self, version: int, choosing: bool) -> list[str]:
        """A new connection speaking QMF ``version`` (``choosing``: v2 with the version
        left to choose); returns the v1 keys its topic endpoint binds.  Over v2, the
        v1 topic serves the agents that speak v1 only (their heartbeats and, per agent,
        their objects and events); while choosing, qpidd's v1 event keys are bound too
        until it is known to publish v2 (its first v2 heartbeat): a qpidd that publishes
        v1 only (see :meth:`v1_beat_of_qpidd`) loses none of its events."""
        self.keys = (self.binding_keys() if version == 1
                     else ["console.heartbeat.#", *V1_AGENT_LIST])
        self.keys += self.choice.start(version == 2 and choosing, self.binding_keys())
        return list(self.keys)

    async def bind_early(self, keys: Sequence[str]) -> None:
        """Over v2, while qpidd is not known to publish v2: also bind the v1 event
        keys among the user's new ``keys`` (see ``VersionChoice``).

        Raises:
            TransportError: the broker refused a binding.
        """
        host = self.host
        transport, topic = host.transport, host.topic_queue
        if host.v2 is None or host.session.options.qmf_version is not None \
                or transport is None or topic is None or not host.connected:
            return
        for key in self.choice.more_keys(keys, self.keys):
            self.keys.append(key)
            await transport.bind(topic, names.MANAGEMENT_EXCHANGE, key)

    def v1_beat_of_qpidd(self, link_bound: bool) -> None:
        """Over v2, with the QMF version left to choose: a v1 heartbeat of qpidd's
        agent (``link_bound``: the v2 link has its bindings).  Two of them and no v2
        heartbeat on this connection: this qpidd publishes QMF v1 only
        (``--mgmt-qmf2 no``, it still answers v2 requests), and the connection turns
        to v1 (:meth:`speak_v1`)."""
        host = self.host
        if self.choice.v1_beat(link_bound and host.has_management
                               and host.session.options.qmf_version is None):
            host.spawn(self.speak_v1())

    async def speak_v1(self) -> None:
        """Turn the connection to QMF v1: the broker retires its v2 link (its requests
        still finish), the topic endpoint takes the v1 bindings (qpidd then publishes
        every object to it at its next interval), qpidd's agent is listed as its v1
        agent, and objects read before keep working (their methods go over v1)."""
        host = self.host
        transport, topic = host.transport, host.topic_queue
        if transport is None or topic is None or not host.retire_v2():
            return
        log.info("qpidd on %s publishes QMF v1 only (--mgmt-qmf2 no): speaking QMF v1 "
                 "there", host.where)
        agents = self.agents
        agents.twins.clear()
        new = [k for k in self.binding_keys() if k not in self.keys]
        self.keys = [*self.keys, *new]
        old = agents.agents.pop((1, 0), None)
        if old is not None:
            self.agent_left(old)
        # agents the v1 side saw while v2 was spoken (qpidd's own, left to v2) are
        # listed now as any v1 agent
        for banks, info in list(self.core.agents.items()):
            if banks not in agents.agents:
                agents.on_arrived(AgentArrived(banks, info.label))
        for ev in self.choice.turn():  # the early keys are bound for good now
            self.events.event(ev)
        for key in new:
            try:
                await transport.bind(topic, names.MANAGEMENT_EXCHANGE, key)
            except QmfError as exc:
                log.warning("v1 binding %s on %s failed: %s", key, host.where, exc)

    async def expect_v1_beats(self) -> None:
        """``qmf_version=1`` on qpidd: warn when its agent sends no v1 heartbeat
        within ``missed_heartbeats`` agent intervals (a stock qpidd, ``--mgmt-qmf1
        no``, answers v1 requests but publishes nothing over v1)."""
        host = self.host
        options = host.session.options
        wait = options.agent_interval * options.missed_heartbeats
        await asyncio.sleep(wait)
        if host.connected and host.v2 is None and not self.choice.v1_beats:
            log.warning("qpidd on %s sent no QMF v1 heartbeat in %gs: it publishes QMF v2 "
                        "only (--mgmt-qmf1 no), so with qmf_version=1 no objects, events "
                        "or heartbeats arrive; leave qmf_version unset (QMF v2) or start "
                        "qpidd with --mgmt-qmf1 yes", host.where, wait)

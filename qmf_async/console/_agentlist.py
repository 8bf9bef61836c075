"""The agents known on one broker connection (:class:`AgentList`): the v1 agents its
protocol core reports, the v2 agents its v2 link reports, and, over v2, the v1 twins
of v2 agents hidden (v2 serves them) and the v1 bindings of agents that speak v1 only;
their aging (heartbeats missed, as of when the input was drained: the drain probe).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Coroutine
from typing import Any, Protocol

from .. import names
from ..errors import QmfError
from ..protocol import (
    AgentArrived,
    AgentLeft,
    AgentRelabeled,
    ConsoleProtocol,
    DrainClock,
    Outgoing,
    Twins,
)
from ..transport import TransportProtocol
from ._dispatch import v1_banks
from ._links import BrokerLink, SessionSettings
from ._objects import RemoteAgent
from ._sessionevents import AgentChange, SessionEvent

__all__ = ["AgentChange", "AgentList", "AgentListHost", "ConnectionSide"]

# the session's logger: a broker's messages are the console's
log = logging.getLogger("qmf_async.session")

MANAGEMENT = names.MANAGEMENT_EXCHANGE


class ConnectionSide(BrokerLink, Protocol):
    """What the broker's per-connection parts (its :class:`AgentList`, its version
    turn) read of it: the session, the transport and topic endpoint of the current
    connection, the v2 link, and where to run background work (a ``Broker`` is one)."""

    @property
    def session(self) -> SessionSettings: ...

    @property
    def v2(self) -> object: ...

    @property
    def transport(self) -> TransportProtocol | None: ...

    @property
    def topic_queue(self) -> str | None: ...

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None: ...


class AgentListHost(ConnectionSide, Protocol):
    """What an :class:`AgentList` needs of its broker (a ``Broker`` is one)."""

    def publish(self, out: Outgoing, *, content_type: str | None = ...) -> Awaitable[None]: ...

    def emit(self, event: SessionEvent) -> None: ...


class AgentList:
    """The agent list of the broker ``host`` (``agents``, by banks, in the order the
    core's directory has them), kept from the events of its v1 core (``core``) and its
    v2 link; every arrival and departure goes up as an :class:`AgentChange` through
    the broker's ``emit`` (returned by the broker's dispatch, aging or removal).  None
    of its methods raises."""

    def __init__(self, host: AgentListHost, core: ConsoleProtocol, drain: DrainClock) -> None:
        self.host = host
        self.core = core
        #: as of when every delivery the broker received has been handled
        self.drain = drain
        self.agents: dict[tuple[int, int], RemoteAgent] = {}
        #: over v2: the v1 agents that are also known over v2 (hidden)
        self.twins = Twins()

    def _tell(self, agent: RemoteAgent, added: bool) -> None:
        self.host.emit(AgentChange(agent, added))

    def v2_owns(self, banks: tuple[int, int] | None) -> bool:
        """Over v2, what v1 says of the broker's own agent (1.0), and of agents also
        reached over v2 (their v1 twins), is left to v2."""
        return self.host.v2 is not None and (banks is None or banks == (1, 0)
                                               or banks in self.twins)

    def v2_arrived(self, agent: RemoteAgent) -> None:
        """Over v2: ``agent`` arrived (its link says so): it joins the agent list, the
        session hears of it, and its v1 twins, if known, are hidden."""
        self.agents[(agent.broker_bank, agent.agent_bank)] = agent
        self._tell(agent, True)
        v1_labels = {banks: known.label for banks, known in self.agents.items()
                     if not known.name and banks != (1, 0)}
        for banks in self.twins.v2_arrived(agent.name, v1_labels):
            self._unlist_v1(banks)

    def v2_left(self, banks: tuple[int, int]) -> None:
        """Over v2: the agent of ``banks`` left (its link says so): it leaves the agent
        list, the session hears of it, and its v1 twins, if still alive over v1, are
        listed again.  Nothing happens for banks of no known agent."""
        agent = self.agents.pop(banks, None)
        if agent is None:
            return
        self._tell(agent, False)
        directory = self.core.agents
        alive = {hidden: info.label for hidden in self.twins.hidden
                 if (info := directory.get(hidden)) is not None}
        for back in self.twins.v2_left(agent.name, alive):
            self.on_arrived(AgentArrived(back, alive[back]))

    def _v2_names(self) -> list[str]:
        return [agent.name for agent in self.agents.values() if agent.name]

    def _unlist_v1(self, banks: tuple[int, int]) -> None:
        """A v1 agent is hidden as a twin: it leaves the agent list (v2 serves it)."""
        agent = self.agents.pop(banks, None)
        if agent is not None:
            self._follow_v1_agent(agent, False)
            self._tell(agent, False)

    def on_arrived(self, ev: AgentArrived) -> None:
        banks = v1_banks(ev.agent)
        if self.v2_owns(banks):
            return
        broker = self.host
        if broker.v2 is not None and self.twins.v1_arrived(banks, ev.label, self._v2_names()):
            return
        agent = RemoteAgent(broker, banks[0], banks[1], ev.label, broker.where)
        self.agents[banks] = agent
        if broker.v2 is not None:
            self._follow_v1_agent(agent, True)
        self._tell(agent, True)

    def _follow_v1_agent(self, agent: RemoteAgent, add: bool) -> None:
        """Over v2: bind (or unbind) the v1 objects and events of a v1-only agent."""
        broker = self.host
        transport, topic = broker.transport, broker.topic_queue
        if transport is None or topic is None or not broker.connected:
            return
        keys = [f"console.obj.{agent.broker_bank}.{agent.agent_bank}.#",
                f"console.event.{agent.broker_bank}.{agent.agent_bank}.#"]
        call = transport.bind if add else transport.unbind

        async def run() -> None:
            for key in keys:
                try:
                    await call(topic, MANAGEMENT, key)
                except QmfError as exc:
                    log.info("v1 binding %s of %s on %s failed: %s", key, agent, broker.where,
                             exc)
        broker.spawn(run())

    def on_relabeled(self, ev: AgentRelabeled) -> None:
        banks = v1_banks(ev.agent)
        if self.v2_owns(banks):
            return
        broker = self.host
        if broker.v2 is not None and self.twins.v1_arrived(banks, ev.label, self._v2_names()):
            self._unlist_v1(banks)
            return
        self.agents[banks] = RemoteAgent(broker, banks[0], banks[1], ev.label, broker.where)

    def on_left(self, ev: AgentLeft) -> None:
        banks = v1_banks(ev.agent)
        if self.v2_owns(banks):
            self.twins.forget(banks)
            return
        agent = self.agents.pop(banks, None)
        if agent is not None:
            if self.host.v2 is not None:
                self._follow_v1_agent(agent, False)
            self._tell(agent, False)

    def forget_v2(self) -> None:
        """The broker is removed: every v2 agent leaves (those of the v1 core leave by
        its events)."""
        for banks, agent in list(self.agents.items()):
            if agent.name:  # v2 agents: not in the v1 core's directory
                del self.agents[banks]
                self._tell(agent, False)

    def age(self, now: float, probe_key: str | None,
            loss_queue: str | None) -> tuple[float, list[Any]]:
        """Age the agents out whose heartbeats stopped, as of the last moment this
        console is known to have handled everything it had received.

        A console busy with a large answer may have heartbeats waiting in its own
        input (the transport's buffer, the socket, the broker's queue): they are not
        missed.  Over AMQP 0-9-1, when an agent is overdue, a probe is sent through
        the topic endpoint; when it comes back (read, or dropped from the queue's
        head: everything queued before it was handled or counted) the agents are
        aged as of its sending (a probe not back after ``_PROBE_RETRY`` seconds with
        nothing received meanwhile was lost: the agents are aged at once).  Over
        AMQP 1.0 (and other transports), as of the last moment the transport had
        nothing buffered.  ``probe_key``, ``loss_queue``: the connection's probe key
        and loss endpoint (None: none).  Returns the moment aged as of, and the
        core's events (for the broker to act on).
        """
        broker, core = self.host, self.core
        settings = broker.session.options
        # the session's limits may have been changed since this broker was added
        core.agent_interval = settings.agent_interval
        core.min_agent_interval = settings.min_agent_interval
        core.missed_heartbeats = settings.missed_heartbeats
        core.max_held = settings.max_held
        transport = broker.transport
        probing = (probe_key is not None and loss_queue is not None
                   and transport is not None and transport.capabilities.drain_probe)
        sent_at = now
        now, probe = self.drain.as_of(
            now, probing=probing, overdue=probing and broker.connected and core.overdue(now),
            backlog=transport.backlog if transport is not None else 0)
        if probe and probe_key is not None:
            self._send_probe(probe_key, sent_at)
        return now, core.age(now)

    def _send_probe(self, key: str, now: float) -> None:
        """Send a drain probe (its sending time inside) to the topic endpoint, on
        ``qpid.management`` under its own ``key``."""
        async def send() -> None:
            try:
                await self.host.publish(Outgoing(MANAGEMENT, key, DrainClock.probe(now)),
                                        content_type=None)
            except QmfError as exc:  # the loss, if any, is reported by the runtime
                # without a probe, age as before: as of now
                log.debug("drain probe to %s failed: %s", self.host.where, exc)
                self.drain.probe_failed(time.monotonic())
        self.host.spawn(send())

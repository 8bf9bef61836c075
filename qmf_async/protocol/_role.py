"""The management-broker role, sans-I/O: its agent directory and its answers.

:class:`RoleDirectory` knows which agent holds which bank, who attached, who was only
heard, who went silent, when a bank is free again.  :class:`RoleProtocol` answers what
comes to ``broker`` (``B``, ``P``, ``Q``, ``S``, ``A``, and the ``q`` a qpid-style
agent announces there) from the directory and the role's schema registry: each
request becomes the :class:`~._envelope.Outgoing` answers to send and, where the role
has more to do, an event (:class:`ConsoleArrived`, :class:`AgentAttached`,
:class:`AttachRefused`, :class:`SchemaForward`, :class:`ClassAnnounced`,
:class:`~._agent.RequestDropped`).

The role (:mod:`qmf_async.agent._role`) feeds them requests, heartbeats and the time,
and does what they answer (sends, the ``agent`` objects it publishes, the schema
fetches and learning it starts); nothing here does I/O or keeps a task.

Rules:

- An attaching agent keeps the bank it asks for (under this broker bank, from
  ``first_agent_bank`` up) unless another agent holds it; an agent only heard (by
  heartbeat, never attached: *adopted*) gives its bank up to one that attaches.
  Otherwise the next free bank, round robin.  A new agent is refused (None) when
  ``max_agents`` are known, whatever bank it asks for.
- A heartbeat under ``console.heartbeat.<broker bank>.<agent bank>`` from an unknown
  agent adopts it; from an agent aged out, brings it back.
- An agent silent for ``agent_timeout`` is aged out (no longer live); its bank stays
  reserved for it for ``bank_grace`` more seconds, then is free.
- Answers are packed as qpidd packs them: consecutive indications of one opcode
  together (at most ``per_body`` a body), ``z`` and ``s`` alone.
- A console's ``B`` makes every live agent re-publish (``x``, what qpidd does when a
  console binds); the role's own ``B`` (its probe for a second role) is only answered.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from typing import Any, Final

from ..errors import EncodeError
from ..frozen import frozen
from ..names import MANAGEMENT_EXCHANGE, agent_key
from ..wire import (
    AttachRequest,
    AttachResponse,
    BrokerRequest,
    BrokerResponse,
    ClassIndication,
    ClassKey,
    ClassQuery,
    CommandComplete,
    ConsoleAdded,
    Message,
    PackageIndication,
    PackageQuery,
    SchemaRegistry,
    SchemaRequest,
    SchemaResponse,
    encode,
)
from ._agent import RequestDropped, packed, reply_target
from ._envelope import Outgoing

__all__ = ["MAX_BANK", "AgentAttached", "AttachRefused", "ClassAnnounced", "ConsoleArrived",
           "RoleDirectory", "RolePeer", "RoleProtocol", "SchemaForward"]

log = logging.getLogger("qmf_async.agent.broker")

#: the largest agent bank (28 bits)
MAX_BANK: Final = (1 << 28) - 1
_NO_SYSTEM_ID: Final = uuid.UUID(int=0)


class RolePeer:
    """One agent the role knows (mutable: the directory and the role update it).

    ``adopted``: heard by heartbeat, never attached; ``live``: False once aged out
    (its bank still reserved); ``classes``: the class keys it listed; ``learned``: its
    schemas were all fetched."""

    __slots__ = ("adopted", "agent_bank", "classes", "expired_at", "label", "last_seen",
                 "learned", "live", "reply_to", "system_id")

    def __init__(self, label: str, system_id: uuid.UUID, agent_bank: int,
                 reply_to: str | None, adopted: bool, now: float) -> None:
        self.label = label
        self.system_id = system_id
        self.agent_bank = agent_bank
        self.reply_to = reply_to
        self.adopted = adopted
        self.last_seen = now
        self.live = True
        self.expired_at = 0.0
        self.classes: set[ClassKey] = set()
        self.learned = False

    def __repr__(self) -> str:
        state = "live" if self.live else "aged out"
        return f"<RolePeer {self.agent_bank} {self.label!r} {state}>"


class RoleDirectory:
    """The agents of one management broker, by agent bank (see the module's rules).
    Times are the caller's clock."""

    def __init__(self, broker_bank: int, *, first_agent_bank: int = 10,
                 max_agents: int = 10_000, agent_timeout: float = 30.0,
                 bank_grace: float = 60.0) -> None:
        self.broker_bank = broker_bank
        self.first_agent_bank = first_agent_bank
        self.max_agents = max_agents
        self.agent_timeout = agent_timeout
        self.bank_grace = bank_grace
        #: the agents known, live or aged out, by agent bank
        self.peers: dict[int, RolePeer] = {}
        self._next_bank = first_agent_bank

    def live(self) -> list[RolePeer]:
        """The live agents, in the order they became known."""
        return [p for p in self.peers.values() if p.live]

    # ------------------------------------------------------------------ input

    def attach(self, broker_bank: int, agent_bank: int, label: str, system_id: uuid.UUID,
               reply_to: str, now: float) -> tuple[RolePeer, bool] | None:
        """An ``A`` asking for ``broker_bank.agent_bank``: the agent, live, with the bank
        it gets, and whether it is new (False: a re-attach, or an adopted agent saying
        who it is, which may serve other classes now: not learned any more).  None when
        ``max_agents`` are known."""
        bank = self._bank_for(broker_bank, agent_bank, label, system_id)
        if bank is None:
            return None
        peer = self.peers.get(bank)
        if peer is None:
            peer = self.peers[bank] = RolePeer(label, system_id, bank, reply_to, False, now)
            return peer, True
        peer.label, peer.system_id, peer.reply_to = label, system_id, reply_to
        peer.adopted = False
        peer.last_seen = now
        peer.learned = False
        peer.live = True
        return peer, False

    def heartbeat_bank(self, routing_key: str) -> int | None:
        """The agent bank of a heartbeat key ``console.heartbeat.<bb>.<ab>`` when the
        agent is of this broker bank (None: another broker bank, the broker's own
        agent, or a malformed key)."""
        parts = routing_key.split(".")
        if len(parts) != 4:
            return None
        try:
            bb, ab = int(parts[2]), int(parts[3])
        except ValueError:
            return None
        return ab if bb == self.broker_bank and 0 < ab <= MAX_BANK else None

    def heartbeat(self, agent_bank: int, now: float) -> tuple[RolePeer | None, str]:
        """A heartbeat of the agent of ``agent_bank``: (the agent, what happened):
        ``"adopted"`` (unknown until now), ``"back"`` (aged out before), ``""`` (known
        and live); (None, ``"full"``) when an unknown agent finds the directory full."""
        peer = self.peers.get(agent_bank)
        what = ""
        if peer is None:
            if len(self.peers) >= self.max_agents:
                return None, "full"
            peer = self.peers[agent_bank] = RolePeer("", _NO_SYSTEM_ID, agent_bank, None,
                                                     True, now)
            what = "adopted"
        elif not peer.live:
            peer.live = True
            what = "back"
        peer.last_seen = now
        return peer, what

    def age(self, now: float) -> tuple[list[RolePeer], list[int]]:
        """(agents aged out now, banks freed now)."""
        aged: list[RolePeer] = []
        freed: list[int] = []
        for bank, peer in list(self.peers.items()):
            if peer.live and now - peer.last_seen > self.agent_timeout:
                peer.live = False
                peer.expired_at = now
                aged.append(peer)
            elif not peer.live and now - peer.expired_at > self.bank_grace:
                del self.peers[bank]
                freed.append(bank)
        return aged, freed

    def reconnected(self, now: float) -> list[RolePeer]:
        """The role was away (it heard nothing): the live agents' clocks restart now.
        Returns them."""
        live = self.live()
        for peer in live:
            peer.last_seen = now
        return live

    # ------------------------------------------------------------------ internals

    def _bank_for(self, broker_bank: int, agent_bank: int, label: str,
                  system_id: uuid.UUID) -> int | None:
        full = len(self.peers) >= self.max_agents
        if broker_bank in (0, self.broker_bank) and \
                self.first_agent_bank <= agent_bank <= MAX_BANK:
            holder = self.peers.get(agent_bank)
            if (holder is None and not full) or (holder is not None and (
                    holder.adopted or (holder.label, holder.system_id) == (label, system_id))):
                return agent_bank
        if full:
            return None
        while True:
            bank = self._next_bank
            self._next_bank = bank + 1 if bank < MAX_BANK else self.first_agent_bank
            if bank not in self.peers:
                return bank


# ---------------------------------------------------------------------- the answers


@frozen(slots=True)
class ConsoleArrived:
    """A console's ``B``: the agents were asked to re-publish; the role's own agent
    should too."""


@frozen(slots=True)
class AgentAttached:
    """An ``A`` was answered: ``peer`` holds its bank (``new``: first seen now)."""

    peer: RolePeer
    new: bool


@frozen(slots=True)
class AttachRefused:
    """An ``A`` was refused (``z`` 1): ``max_agents`` are known."""

    label: str


@frozen(slots=True)
class SchemaForward:
    """An ``S`` for a class live agents listed but the role has not fetched yet: ask
    ``holders`` (the first few, one after the other), then answer ``seq`` on
    ``reply_to`` with the schema or ``z`` 1 "Schema not available"."""

    seq: int
    reply_to: str
    class_key: ClassKey
    holders: tuple[RolePeer, ...]


@frozen(slots=True)
class ClassAnnounced:
    """A qpid-style agent announced ``class_key`` to ``broker`` with its reply key
    ``reply_to``: ask it for the schema there (what qpidd does)."""

    class_key: ClassKey
    reply_to: str


class RoleProtocol:
    """The answers of one management broker (see the module's rules): ``broker_id`` is
    what ``b`` carries; ``directory`` the agents; ``registry`` the schemas it serves
    (its own class and those learned)."""

    def __init__(self, broker_id: uuid.UUID, directory: RoleDirectory,
                 registry: SchemaRegistry, *, per_body: int = 22) -> None:
        self.broker_id = broker_id
        self.directory = directory
        self.registry = registry
        self.per_body = per_body

    def agent_key(self, peer: RolePeer) -> str:
        """The routing key of ``peer``: ``agent.<broker bank>.<agent bank>``."""
        return agent_key(self.directory.broker_bank, peer.agent_bank)

    def request(self, msg: Message, reply_to: str | None, now: float, *,
                own_reply: str | None = None) -> list[Any]:
        """One message that came to ``broker`` with reply key ``reply_to`` (``own_reply``:
        the role's own, whose ``B`` is its probe): the :class:`Outgoing` answers to
        send, in order, and the events for the role."""
        if isinstance(msg, PackageIndication):
            return []  # a qpid agent announcing a package; its classes follow
        if reply_to is None:
            return [RequestDropped(msg.OPCODE, "no reply key")]
        if isinstance(msg, BrokerRequest):
            out: list[Any] = self.reply(reply_to, [BrokerResponse(self.broker_id, msg.seq)])
            if reply_to != own_reply:
                for peer in self.directory.live():
                    out += self.encoded(MANAGEMENT_EXCHANGE, self.agent_key(peer),
                                         [ConsoleAdded()])
                out.append(ConsoleArrived())
            return out
        if isinstance(msg, PackageQuery):
            replies: list[Message] = [PackageIndication(msg.seq, p)
                                      for p in self.registry.packages()]
            return self.reply(reply_to, [*replies, CommandComplete(msg.seq)])
        if isinstance(msg, ClassQuery):  # an unknown package: z 0 and nothing
            replies = [ClassIndication(msg.seq, s.kind, s.class_key)
                       for s in self.registry.classes(msg.package)]
            return self.reply(reply_to, [*replies, CommandComplete(msg.seq)])
        if isinstance(msg, SchemaRequest):
            return self._schema_request(msg, reply_to)
        if isinstance(msg, AttachRequest):
            return self._attach(msg, reply_to, now)
        if isinstance(msg, ClassIndication):
            return self._class_indication(msg, reply_to)
        return [RequestDropped(msg.OPCODE, "not a request the management broker serves")]

    def reply(self, reply_to: str, messages: Sequence[Message]) -> list[Outgoing]:
        """``messages`` to the reply key ``reply_to``, packed (``z`` and ``s`` alone)."""
        exchange, key = reply_target(reply_to)
        out: list[Outgoing] = []
        for batch in packed(messages, self.per_body, "zs"):
            out += self.encoded(exchange, key, batch)
        return out

    def encoded(self, exchange: str, key: str, messages: Sequence[Message],
                reply_to: str | None = None) -> list[Outgoing]:
        """``messages`` as one body to ``exchange`` under ``key`` (none when they do
        not encode: logged)."""
        try:
            body = encode(messages, self.registry)
        except EncodeError as exc:
            log.error("management broker: cannot encode %s: %s",
                      "".join(m.OPCODE for m in messages), exc)
            return []
        return [Outgoing(exchange, key, body, reply_to)]

    # ------------------------------------------------------------------ internals

    def _schema_request(self, msg: SchemaRequest, reply_to: str) -> list[Any]:
        key = msg.class_key
        schema = self.registry.get(key)
        if schema is not None:
            return self.reply(reply_to, [SchemaResponse(msg.seq, schema)])
        directory = self.directory
        holders = tuple(p for p in directory.live() if key in p.classes)
        if holders:  # listed by an agent, not fetched yet: the role asks it
            return [SchemaForward(msg.seq, reply_to, key, holders)]
        known = set(self.registry.packages()) | {
            k.package for p in directory.peers.values() for k in p.classes}
        text = "Class key not found" if key.package in known else "Package not found"
        return self.reply(reply_to, [CommandComplete(msg.seq, 1, text)])

    def _attach(self, msg: AttachRequest, reply_to: str, now: float) -> list[Any]:
        attached = self.directory.attach(msg.broker_bank, msg.agent_bank, msg.label,
                                         msg.system_id, reply_to, now)
        if attached is None:
            return [*self.reply(reply_to, [CommandComplete(msg.seq, 1, "Too many agents")]),
                    AttachRefused(msg.label)]
        peer, new = attached
        answer = AttachResponse(msg.seq, self.directory.broker_bank, peer.agent_bank)
        return [*self.reply(reply_to, [answer]), AgentAttached(peer, new)]

    def _class_indication(self, msg: ClassIndication, reply_to: str) -> list[Any]:
        if msg.class_key in self.registry:
            return []
        peer = next((p for p in self.directory.peers.values() if p.reply_to == reply_to),
                    None)
        if peer is not None:
            peer.classes.add(msg.class_key)
        return [ClassAnnounced(msg.class_key, reply_to)]

"""The management-broker role's agent directory, sans-I/O: which agent holds which
bank, who attached, who was only heard, who went silent, when a bank is free again.

The role (:mod:`qmf_async.agent._role`) feeds it attach requests, heartbeats and the
time, and acts on what it answers (the ``a`` reply, the ``agent`` objects it publishes,
the schema learning it starts); nothing here does I/O or keeps a task.

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
"""

from __future__ import annotations

import uuid
from typing import Final

from ..wire import ClassKey

__all__ = ["MAX_BANK", "RoleDirectory", "RolePeer"]

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

"""What the console's v1 and v2 cores share about agents: one directory
(:class:`AgentDirectory`) with one aging rule (:func:`silence_allowed`), the v2 name
this project's agents take, and the rule that lists an agent seen over both versions
once.

Directory: the agents one core knows on one connection, by key (banks over v1, the
agent's name over v2), each with its heartbeat ``interval`` and when it was
``last_seen``, and why those that left went (bounded).  The cores differ in what they
learn of an agent (v1 measures the interval from heartbeat gaps; v2 is told it, with
the agent's values), not in how they keep and age it.

Aging: an agent silent for more than ``missed`` heartbeat intervals (each at least
``floor``) is taken for gone, ``grace`` seconds later while it owes an answer (a busy
agent building a large answer may skip heartbeats).

Twins: an agent seen over both versions.

An agent of this project that speaks QMF v1 and v2 takes the v2 name
``qmf-async:<product>:<instance>``, its product being its v1 label with ``:`` written
``_`` (:func:`agent_v2_name` builds it, :func:`is_twin` reads it; nothing else does).
A console that reaches such an agent over v2 lists it once: its v1 entry, the *twin*,
is hidden while the v2 agent is known, and listed again when the v2 agent leaves while
the v1 agent is still alive.  :class:`Twins` keeps that rule for one broker connection,
as plain state: agents in, which banks to hide or list again out.  No I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Final, Generic, Protocol, TypeVar

__all__ = ["AGENT_VENDOR", "AgentDirectory", "Twins", "agent_v2_name", "is_twin",
           "silence_allowed"]

#: the vendor part of the v2 names this project's agents take
AGENT_VENDOR: Final = "qmf-async"

Banks = tuple[int, int]


def silence_allowed(interval: float, missed: int, floor: float, grace: float = 0.0) -> float:
    """Seconds an agent may stay silent before it is taken for gone: ``missed`` times
    its heartbeat ``interval`` (at least ``floor``), plus ``grace``."""
    return missed * max(interval, floor) + grace


class AgentEntry(Protocol):
    """What the directory reads of an agent: its heartbeat interval (s) and when it
    was last seen (the caller's clock)."""

    interval: float
    last_seen: float


K = TypeVar("K", bound=Hashable)
E = TypeVar("E", bound=AgentEntry)


def _no_grace(key: object) -> float:
    return 0.0


def _never(key: object) -> bool:
    return False


class AgentDirectory(Generic[K, E]):
    """The agents one console core knows on one connection (see the module).

    ``agents`` maps key to entry in the order they arrived; ``departed`` maps the keys
    of agents seen leaving to why (newest last, at most ``max_departed``).  Both dicts
    are kept for the directory's life (cleared, never replaced)."""

    __slots__ = ("agents", "departed", "max_departed")

    def __init__(self, max_departed: int = 4096) -> None:
        self.agents: dict[K, E] = {}
        self.departed: dict[K, str] = {}
        self.max_departed = max_departed

    def __len__(self) -> int:
        return len(self.agents)

    def add(self, key: K, entry: E) -> None:
        """``entry`` is the agent of ``key`` from now on (back, if it had left)."""
        self.agents[key] = entry
        self.departed.pop(key, None)

    def leave(self, key: K, why: str) -> E | None:
        """The agent of ``key`` left for ``why``: its entry (None: it was not known)."""
        entry = self.agents.pop(key, None)
        if entry is None:
            return None
        departed = self.departed
        departed.pop(key, None)
        if len(departed) >= self.max_departed:
            del departed[next(iter(departed))]
        departed[key] = why
        return entry

    def departed_why(self, key: K) -> str | None:
        """Why the agent of ``key``, not known now, left (None: never seen leaving,
        or back)."""
        if key in self.agents:
            return None
        return self.departed.get(key)

    def silent(self, now: float, missed: int, floor: float, *,
               grace: Callable[[K], float] = _no_grace,
               exempt: Callable[[K], bool] = _never) -> list[tuple[K, float]]:
        """The agents taken for gone at ``now`` by :func:`silence_allowed` (``grace``
        for each key; ``exempt`` keys never), with how long each was silent."""
        out: list[tuple[K, float]] = []
        for key, entry in self.agents.items():
            silent = now - entry.last_seen
            if silent > silence_allowed(entry.interval, missed, floor, grace(key)) \
                    and not exempt(key):
                out.append((key, silent))
        return out

    def clear(self) -> list[K]:
        """Every agent is forgotten (the connection ended; not remembered as
        departed); returns their keys."""
        keys = list(self.agents)
        self.agents.clear()
        return keys


def agent_v2_name(label: str, instance: str) -> str:
    """The v2 name of an agent of this project labelled ``label`` over v1:
    ``qmf-async:<label, ':' as '_'>:<instance>``."""
    return f"{AGENT_VENDOR}:{label.replace(':', '_')}:{instance}"


def is_twin(label: str, v2_name: str | None) -> bool:
    """True when the v1 agent labelled ``label`` and the v2 agent ``v2_name`` are one
    agent of this project (an empty label is nobody's twin)."""
    if not label or not v2_name:
        return False
    parts = v2_name.split(":", 2)
    return len(parts) == 3 and parts[0] == AGENT_VENDOR and parts[1] == label.replace(":", "_")


class Twins:
    """Which v1 agents of one connection are hidden as twins of known v2 agents."""

    __slots__ = ("hidden",)

    def __init__(self) -> None:
        #: the banks of the v1 agents hidden now
        self.hidden: set[Banks] = set()

    def __contains__(self, banks: object) -> bool:
        return banks in self.hidden

    def clear(self) -> None:
        """A new connection: nothing is hidden."""
        self.hidden.clear()

    def forget(self, banks: Banks) -> None:
        """The v1 agent of ``banks`` left: it is no longer hidden."""
        self.hidden.discard(banks)

    def v1_arrived(self, banks: Banks, label: str, v2_names: Iterable[str]) -> bool:
        """A v1 agent arrived while the v2 agents ``v2_names`` are known: True when it
        is the twin of one of them (it is hidden then, and not listed)."""
        if any(is_twin(label, name) for name in v2_names):
            self.hidden.add(banks)
            return True
        return False

    def v2_arrived(self, v2_name: str, v1_labels: Mapping[Banks, str]) -> list[Banks]:
        """A v2 agent arrived; ``v1_labels`` are the v1 agents listed now (banks to
        label).  Returns the banks of its twins, hidden from now on (the caller takes
        them off its list)."""
        found = [banks for banks, label in v1_labels.items()
                 if banks not in self.hidden and is_twin(label, v2_name)]
        self.hidden.update(found)
        return found

    def v2_left(self, v2_name: str, alive: Mapping[Banks, str]) -> list[Banks]:
        """A v2 agent left; ``alive`` are the v1 agents still alive (banks to label).
        Returns the banks of its twins that are alive, to list again; hidden twins
        that are no longer alive are forgotten."""
        back: list[Banks] = []
        for banks in list(self.hidden):
            label = alive.get(banks)
            if label is None:
                self.hidden.discard(banks)
            elif is_twin(label, v2_name):
                self.hidden.discard(banks)
                back.append(banks)
        return sorted(back)

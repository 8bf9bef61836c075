"""Which QMF version a connection to qpidd speaks, when the console leaves it to
choose: :class:`VersionChoice`, pure state (no I/O, no event loop).

Over AMQP 1.0 the console speaks QMF v2 to qpidd.  A qpidd started with
``--mgmt-qmf2 no`` publishes v1 only (it still answers v2 requests); the console then
turns the connection to v1.  Until it knows which qpidd it has (qpidd's first v2
heartbeat, or two v1 heartbeats and no v2 one) the v1 event keys are bound too and
qpidd's v1 events are held, so that a qpidd publishing v1 only loses none of them:

- a v2 heartbeat of qpidd's agent: it publishes v2, the held events are dropped (v2
  delivers them), none is held any more, and its v1 events still arriving on the early
  bindings are dropped unread (the bindings stay: over AMQP 1.0, detaching one makes
  qpidd raise events of this console amid those the user follows);
- two v1 heartbeats and no v2 one: the connection turns to v1, and the held events
  are delivered.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable
from typing import Any, Final

from ..names import EVENT_KEY_PREFIX

__all__ = ["QPIDD_V1_EVENT", "VersionChoice"]

#: the routing key prefix of qpidd's agent's (1.0) v1 events
QPIDD_V1_EVENT: Final = EVENT_KEY_PREFIX + "1.0."
#: qpidd's agent's banks
_QPIDD: Final = (1, 0)
#: v1 events held at most while the version is being chosen (the oldest dropped)
_MAX_HELD: Final = 10_000


class VersionChoice:
    """The choice of one connection (see the module doc); :meth:`start` at each
    connection.  ``v1_beats`` counts qpidd's v1 heartbeats (on a v1 connection too:
    none in a while means qpidd publishes v2 only)."""

    __slots__ = ("early_keys", "held", "turning", "v1_beats", "v2_beat")

    def __init__(self, max_held: int = _MAX_HELD) -> None:
        self.v1_beats = 0
        #: a v2 heartbeat of qpidd's agent came on this connection
        self.v2_beat = False
        self.turning = False
        #: the v1 event keys bound while the version is being chosen
        self.early_keys: list[str] = []
        #: qpidd's v1 events held meanwhile (delivered if the connection turns to v1)
        self.held: collections.deque[Any] = collections.deque(maxlen=max_held)

    def start(self, choosing: bool, keys: Iterable[str]) -> list[str]:
        """A new connection; ``choosing``: over v2 with the version left to choose.
        Returns the early keys to bind: the event keys among ``keys`` (none when not
        choosing)."""
        self.v1_beats, self.v2_beat, self.turning = 0, False, False
        self.held.clear()
        self.early_keys = [k for k in keys if k.startswith(EVENT_KEY_PREFIX)] if choosing \
            else []
        return list(self.early_keys)

    def more_keys(self, keys: Iterable[str], bound: Iterable[str]) -> list[str]:
        """While choosing (no v2 heartbeat yet): the event keys among the user's new
        ``keys`` not in ``bound``, to bind early as well (noted as early keys)."""
        if self.v2_beat:
            return []
        already = set(bound)
        new = [k for k in keys if k.startswith(EVENT_KEY_PREFIX) and k not in already]
        self.early_keys.extend(new)
        return new

    def v2_beat_of(self, banks: tuple[int, int]) -> None:
        """A v2 heartbeat of the agent of ``banks``: qpidd's first shows that it
        publishes v2 (what was held is dropped, nothing more is held)."""
        if banks == _QPIDD and not self.v2_beat:
            self.v2_beat = True
            self.held.clear()
            self.early_keys = []

    def v1_beat(self, can_turn: bool) -> bool:
        """A v1 heartbeat of qpidd's agent over v2; ``can_turn``: the connection could
        turn (a management broker, the version left to choose, the v2 side bound).
        True when it must turn to v1 now: the second, with no v2 heartbeat (once)."""
        if not can_turn or self.v2_beat or self.turning:
            return False
        self.v1_beats += 1
        if self.v1_beats < 2:
            return False
        self.turning = True
        return True

    def hold(self, banks: tuple[int, int] | None, event: Any) -> None:
        """A v1 event left to the v2 side: held when it is qpidd's and the version is
        being chosen (else dropped)."""
        if banks == _QPIDD and self.early_keys:
            self.held.append(event)

    def drops(self, routing_key: str) -> bool:
        """Whether a v1 message under ``routing_key`` is one of qpidd's v1 events on
        an early binding after qpidd was seen to publish v2 (dropped unread)."""
        return self.v2_beat and routing_key.startswith(QPIDD_V1_EVENT)

    def turn(self) -> list[Any]:
        """The connection turns to v1: the early keys are bound for good; returns the
        held events, in order, to deliver now."""
        self.early_keys = []
        held = list(self.held)
        self.held.clear()
        return held

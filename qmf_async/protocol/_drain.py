"""As of when a console has handled everything it had received: :class:`DrainClock`,
pure state (no I/O, no event loop), for aging agents without missing heartbeats
that wait in the console's own input.

A console busy with a large answer may have heartbeats waiting in its input (the
transport's buffer, the socket, the broker's queue): they are not missed.  Where the
bus can carry a probe through the console's topic queue (AMQP 0-9-1: a message to
itself behind what is queued), an overdue agent sends one; when it comes back (read,
or dropped from the queue's head: everything queued before it was handled or
counted) the agents are aged as of its sending; a probe not back after ``retry``
seconds with nothing received meanwhile was lost, and the agents are aged at once.
Elsewhere, as of the last moment the transport had nothing buffered.
"""

from __future__ import annotations

import struct
from typing import Final

__all__ = ["DrainClock"]

#: what a drain probe's body starts with (its sending time follows)
_PROBE: Final = b"qmf-async drain probe "


class DrainClock:
    """The moment the console is known to have handled all its input (see the
    module doc).  ``received`` counts the deliveries handled (the console adds one
    per delivery)."""

    __slots__ = ("drained_at", "received", "retry", "sent", "sent_received")

    def __init__(self, now: float, retry: float = 5.0) -> None:
        self.drained_at = now
        self.retry = retry
        #: when the probe in flight was sent (None: none in flight)
        self.sent: float | None = None
        self.received = 0
        self.sent_received = 0

    def start(self, now: float) -> None:
        """A new connection: a probe of an earlier one never comes back."""
        self.sent = None
        self.drained_at = now

    @staticmethod
    def probe(now: float) -> bytes:
        """The body of a probe sent at ``now``."""
        return _PROBE + struct.pack("!d", now)

    def back(self, body: bytes, now: float) -> bool:
        """Whether ``body`` is a probe (then noted as come back, at ``now``)."""
        if len(body) != len(_PROBE) + 8 or not body.startswith(_PROBE):
            return False
        (sent,) = struct.unpack("!d", body[len(_PROBE):])
        self.drained_at = max(self.drained_at, min(sent, now))
        self.sent = None
        return True

    def as_of(self, now: float, *, probing: bool, overdue: bool, backlog: int
              ) -> tuple[float, bool]:
        """The moment to age the agents as of, at ``now``, and whether to send a
        probe now (then noted as sent).  ``probing``: the bus carries probes;
        ``overdue``: an agent is overdue (and the console connected); ``backlog``:
        what the transport has buffered (without probes)."""
        if not probing:
            if backlog > 0:
                return min(now, self.drained_at), False
            self.drained_at = now
            return now, False
        if not overdue:
            self.drained_at = now
            return now, False
        sent, send = self.sent, False
        if sent is not None and now - sent > self.retry and self.received == self.sent_received:
            # nothing came in since the probe left: it was lost, the input is idle, and
            # the overdue agents are silent indeed
            self.drained_at = now
        elif sent is None or now - sent > self.retry:
            self.sent, self.sent_received, send = now, self.received, True
        return self.drained_at, send

    def probe_failed(self, now: float) -> None:
        """The probe could not be sent: age as without one, as of ``now``."""
        self.sent = None
        self.drained_at = now

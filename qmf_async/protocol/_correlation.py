"""Sequence numbers mapped to outstanding requests, as plain state.  No I/O.

A console sends a request with a fresh sequence number and waits for the reply
(request/response) or for indications ending in ``z`` (query/indication).  A
:class:`Correlator` owns the numbers of one broker connection and the table of
:class:`Pending` entries.  Routing a reply never completes anything itself: it
appends an event (:class:`~qmf_async.protocol.Reply` or
:class:`~qmf_async.protocol.QueryDone`) to the caller's list and releases the
number.  Futures and timers belong to whoever drives the correlator.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable
from typing import Any

from ..errors import QmfError, UsageError
from ..wire import CommandComplete, Message, RawObjectRecord
from ._events import QueryDone, Reply, RequestFailed

#: what a reply can be: a decoded message, or an object record kept as its bytes
ReplyMessage = Message | RawObjectRecord

#: receives the records of one query as they arrive (instead of collecting them)
ItemSink = Callable[[ReplyMessage], None]

__all__ = ["Correlator", "ItemSink", "Pending", "ReplyMessage"]

_SEQ_MASK = 0xFFFFFFFF


class Pending:
    """One outstanding request, as data.

    ``query`` entries collect indications (``p``, ``q``, ``g``, ``s``) until ``z``
    (in ``items``, or handed to ``sink`` as they arrive); other entries complete
    with their first reply whose opcode is in ``expect`` (any, when empty).
    ``agent`` is whatever the caller uses to name the addressed agent (the
    console core uses ``(brokerBank, agentBank)``, None for the management
    broker).  ``holds`` counts bodies for this query held back until their schema
    arrives; ``done`` is the ``z`` received while some were held, ``done_arrival``
    the receive position of its body.  ``deadline`` is the caller's, in the
    caller's clock (see :meth:`Correlator.expired`).
    """

    __slots__ = ("agent", "deadline", "done", "done_arrival", "expect", "holds", "items",
                 "query", "seq", "sink")

    def __init__(self, seq: int, *, query: bool, agent: Hashable | None = None,
                 expect: str = "", sink: ItemSink | None = None,
                 deadline: float | None = None) -> None:
        self.seq = seq
        self.query = query
        self.agent = agent
        self.expect = expect
        self.sink = sink
        self.items: list[ReplyMessage] = []
        self.holds = 0
        self.done: CommandComplete | None = None
        self.done_arrival: int | None = None
        self.deadline = deadline

    def __repr__(self) -> str:
        kind = "query" if self.query else "request"
        return f"<Pending {kind} seq={self.seq} agent={self.agent!r} holds={self.holds}>"


class Correlator:
    """Sequence numbers -> :class:`Pending` entries of one connection."""

    __slots__ = ("_next", "_pending")

    def __init__(self, start: int | None = None) -> None:
        # a random first number in [1, 2**31) (os.urandom: the random module is not
        # loaded for this alone; docs/benchmarks.md, "Start-up")
        self._next = start if start is not None else \
            1 + int.from_bytes(os.urandom(4), "big") % ((1 << 31) - 1)
        self._pending: dict[int, Pending] = {}

    def __len__(self) -> int:
        return len(self._pending)

    def __contains__(self, seq: int) -> bool:
        return seq in self._pending

    def get(self, seq: int) -> Pending | None:
        return self._pending.get(seq)

    def entries(self) -> list[Pending]:
        """The open entries, oldest first."""
        return list(self._pending.values())

    def next_seq(self) -> int:
        """A sequence number that is neither 0 nor in use."""
        pending = self._pending
        while True:
            seq = self._next
            self._next = (seq + 1) & _SEQ_MASK
            if seq != 0 and seq not in pending:
                return seq

    def register(self, *, query: bool, agent: Hashable | None = None, expect: str = "",
                 sink: ItemSink | None = None, seq: int | None = None,
                 deadline: float | None = None) -> Pending:
        """A new entry under a fresh (or the given) sequence number.

        Raises:
            UsageError: ``seq`` is given and already in use.
        """
        if seq is None:
            seq = self.next_seq()
        elif seq in self._pending:
            raise UsageError(f"sequence number {seq} is in use")
        entry = Pending(seq, query=query, agent=agent, expect=expect, sink=sink,
                        deadline=deadline)
        self._pending[seq] = entry
        return entry

    def discard(self, seq: int, entry: Pending | None = None) -> bool:
        """Drop the entry of ``seq`` (timeout, cancellation); its number is free again.

        With ``entry`` given, only that entry is dropped (not a newer one that
        reuses the number).  Returns whether an entry was dropped.
        """
        found = self._pending.get(seq)
        if found is None or (entry is not None and found is not entry):
            return False
        del self._pending[seq]
        return True

    def resolve(self, msg: ReplyMessage, events: list[Any], *,
                arrival: int | None = None) -> bool:
        """Route a reply to its entry; False when no entry takes ``msg``.

        A finished request appends :class:`Reply` or :class:`QueryDone` to
        ``events`` and releases its number.  ``arrival`` is the position of the
        reply's body in the order bodies were received (None: the newest).  A
        query whose ``z`` came while some of its bodies wait for a schema stays
        open for those bodies, received before the ``z``; replies received after
        it (duplicates) are ignored, as they are once the query is finished.
        """
        seq = msg.seq
        entry = self._pending.get(seq)
        if entry is None:
            return False
        if entry.query:
            if entry.done is not None and _after(entry, arrival):
                return False
            if type(msg) is CommandComplete:
                entry.done = msg
                entry.done_arrival = arrival
                if entry.holds == 0:
                    del self._pending[seq]
                    events.append(QueryDone(seq, entry.items, msg.code, msg.text))
                return True
            sink = entry.sink
            if sink is not None:
                sink(msg)  # streamed to the caller, not kept
            else:
                entry.items.append(msg)
            return True
        if type(msg) is CommandComplete:
            del self._pending[seq]
            if msg.code != 0:
                events.append(QueryDone(seq, [], msg.code, msg.text))
            else:
                events.append(Reply(seq, msg))
            return True
        if entry.expect and msg.OPCODE not in entry.expect:
            return False
        del self._pending[seq]
        events.append(Reply(seq, msg))
        return True

    def item_sink(self, seq: int, arrival: int | None) -> ItemSink | None:
        """The sink of the query waiting for ``seq``, when a record received at
        ``arrival`` goes to it; None otherwise (route it with :meth:`resolve`).

        For a run of records of one body: what :meth:`resolve` would do with each,
        looked up once.  Valid until the next reply of that query is resolved.
        """
        entry = self._pending.get(seq)
        if entry is None or not entry.query or entry.sink is None:
            return None
        if entry.done is not None and _after(entry, arrival):
            return None
        return entry.sink

    def after_end(self, seq: int, arrival: int | None) -> bool:
        """True when a body received at ``arrival`` for query ``seq`` came after its ``z``."""
        entry = self._pending.get(seq)
        return (entry is not None and entry.query and entry.done is not None
                and _after(entry, arrival))

    def hold(self, seq: int) -> bool:
        """A body for ``seq`` waits for a schema: keep the query open until :meth:`unhold`."""
        entry = self._pending.get(seq)
        if entry is None or not entry.query:
            return False
        entry.holds += 1
        return True

    def unhold(self, seq: int, events: list[Any]) -> None:
        """A held body of ``seq`` was routed (or dropped); a ``z`` that waited for
        it finishes the query now (a :class:`QueryDone` in ``events``)."""
        entry = self._pending.get(seq)
        if entry is None:
            return
        entry.holds = max(0, entry.holds - 1)
        done = entry.done
        if entry.holds == 0 and done is not None:
            del self._pending[seq]
            events.append(QueryDone(seq, entry.items, done.code, done.text))

    def fail(self, seq: int, error: QmfError, events: list[Any]) -> bool:
        """Fail the entry of ``seq`` (a :class:`RequestFailed` in ``events``)."""
        if self._pending.pop(seq, None) is None:
            return False
        events.append(RequestFailed(seq, error))
        return True

    def fail_all(self, error: QmfError, events: list[Any]) -> None:
        """Fail every entry with ``error`` (connection lost, closed)."""
        for seq in self._pending:
            events.append(RequestFailed(seq, error))
        self._pending.clear()

    def fail_agent(self, agent: Hashable, error: QmfError, events: list[Any]) -> int:
        """Fail the entries addressed to ``agent``; returns how many."""
        seqs = [seq for seq, entry in self._pending.items() if entry.agent == agent]
        for seq in seqs:
            del self._pending[seq]
            events.append(RequestFailed(seq, error))
        return len(seqs)

    def expired(self, now: float) -> list[int]:
        """Numbers of the entries whose ``deadline`` is not after ``now`` (not released)."""
        return [seq for seq, entry in self._pending.items()
                if entry.deadline is not None and entry.deadline <= now]


def _after(entry: Pending, arrival: int | None) -> bool:
    return arrival is None or entry.done_arrival is None or arrival > entry.done_arrival

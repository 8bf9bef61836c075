"""Protocol core: sequence numbers mapped to pending waits.  No I/O.

A console sends a request with a fresh sequence number and waits for the reply
(request/response) or for indications ending in ``z`` (query/indication).  A
:class:`Correlator` owns the numbers of one broker connection; its entries are
removed when they complete, time out, are cancelled or fail, so numbers are
released in every case.  :meth:`Correlator.expire_after` times a wait out; waits
that share a timeout value share one loop timer.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any

from ..errors import CommandError, QmfError
from ..wire import CommandComplete, Message, RawObjectRecord

#: what a reply can be: a decoded message, or an object record kept as its bytes
Reply = Message | RawObjectRecord

__all__ = ["Correlator", "Pending"]

_SEQ_MASK = 0xFFFFFFFF
#: distinct timeout values served by shared timers; more fall back to a timer per wait
_MAX_LANES = 8


class Pending:
    """One outstanding request.

    ``query`` entries collect indications (``p``, ``q``, ``g``, ``s``) until ``z``;
    other entries complete with their first reply.  ``on_item`` (queries) is called
    with each indication as it arrives, for streaming callers.
    """

    __slots__ = (
        "agent",
        "context",
        "done_arrival",
        "done_msg",
        "expect",
        "future",
        "holds",
        "items",
        "on_item",
        "query",
        "seq",
        "timer",
    )

    def __init__(self, seq: int, *, query: bool, agent: Any = None, expect: str = "",
                 on_item: Callable[[Reply], None] | None = None, context: Any = None) -> None:
        self.seq = seq
        self.query = query
        self.agent = agent
        self.expect = expect
        self.future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.items: list[Reply] = []
        self.on_item = on_item
        self.holds = 0  # bodies for this seq held back until their schema arrives
        self.done_msg: CommandComplete | None = None
        self.done_arrival: int | None = None  # receive order of the body with the z
        self.context = context
        self.timer: _Lane | asyncio.TimerHandle | None = None  # see Correlator.expire_after

    def _finish(self) -> None:
        if self.future.done():
            return
        z = self.done_msg
        assert z is not None
        if z.code != 0:
            exc = CommandError(z.code, z.text)
            exc.partial = list(self.items)  # type: ignore[attr-defined]
            self.future.set_exception(exc)
        else:
            self.future.set_result(self.items)


class _Lane:
    """The expiry of waits that share one timeout value.

    Their deadlines (start + timeout, on the loop's monotonic clock) come in the order
    they were added, so one loop timer, armed for the oldest wait still in the lane,
    serves them all: adding and removing a wait is a dict operation, not a timer heap
    push and pop.  Each wait still fails at its own deadline.
    """

    __slots__ = ("handle", "lanes", "loop", "timeout", "waits")

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout: float,
                 lanes: dict[float, _Lane]) -> None:
        self.loop = loop
        self.timeout = timeout
        self.lanes = lanes
        self.waits: dict[Pending, float] = {}  # insertion order = deadline order
        self.handle: asyncio.TimerHandle | None = None

    def add(self, entry: Pending) -> None:
        deadline = self.loop.time() + self.timeout
        self.waits[entry] = deadline
        if self.handle is None:
            self.handle = self.loop.call_at(deadline, self._expire)

    def _expire(self) -> None:
        self.handle = None
        waits = self.waits
        now = self.loop.time()
        while waits:
            entry = next(iter(waits))
            deadline = waits[entry]
            if deadline > now:
                self.handle = self.loop.call_at(deadline, self._expire)
                return
            del waits[entry]
            entry.timer = None
            future = entry.future
            if not future.done():
                future.set_exception(TimeoutError())
        if self.lanes.get(self.timeout) is self:  # idle: forget it
            del self.lanes[self.timeout]


class Correlator:
    """Sequence numbers -> :class:`Pending` entries of one connection."""

    def __init__(self, start: int | None = None) -> None:
        self._next = start if start is not None else random.randrange(1, 1 << 31)
        self._pending: dict[int, Pending] = {}
        self._lanes: dict[float, _Lane] = {}

    def __len__(self) -> int:
        return len(self._pending)

    def __contains__(self, seq: int) -> bool:
        return seq in self._pending

    def get(self, seq: int) -> Pending | None:
        return self._pending.get(seq)

    def next_seq(self) -> int:
        """A sequence number that is neither 0 nor in use."""
        while True:
            seq = self._next
            self._next = (self._next + 1) & _SEQ_MASK
            if seq != 0 and seq not in self._pending:
                return seq

    def register(self, *, query: bool, agent: Any = None, expect: str = "",
                 on_item: Callable[[Reply], None] | None = None, context: Any = None,
                 seq: int | None = None, release_on_done: bool = True) -> Pending:
        """A new pending entry under a fresh (or the given) sequence number.

        With ``release_on_done`` (the default) the entry is also released when its
        future completes by other means than this correlator (for instance cancelled
        by the awaiting task).  Callers that always :meth:`discard` the entry in a
        ``finally`` can pass ``False`` and save a loop callback per request.
        """
        if seq is None:
            seq = self.next_seq()
        entry = Pending(seq, query=query, agent=agent, expect=expect, on_item=on_item,
                        context=context)
        self._pending[seq] = entry
        if release_on_done:
            entry.future.add_done_callback(lambda _f: self._release(seq, entry))
        return entry

    def expire_after(self, entry: Pending, timeout: float) -> None:
        """Fail ``entry``'s future with ``TimeoutError`` in ``timeout`` seconds.

        The timer stops when the entry is released (reply, failure, :meth:`discard`).
        Waits with the same timeout share one loop timer (see :class:`_Lane`).
        """
        if entry.timer is not None:
            self._stop_timer(entry)
        lane = self._lanes.get(timeout)
        loop = asyncio.get_running_loop()
        if lane is None or lane.loop is not loop:
            if lane is None and len(self._lanes) >= _MAX_LANES:
                future = entry.future

                def expire() -> None:
                    entry.timer = None
                    if not future.done():
                        future.set_exception(TimeoutError())

                entry.timer = loop.call_later(timeout, expire)
                return
            lane = self._lanes[timeout] = _Lane(loop, timeout, self._lanes)
        lane.add(entry)
        entry.timer = lane

    @staticmethod
    def _stop_timer(entry: Pending) -> None:
        timer = entry.timer
        entry.timer = None
        if isinstance(timer, _Lane):
            timer.waits.pop(entry, None)
        elif timer is not None:
            timer.cancel()

    def _release(self, seq: int, entry: Pending) -> None:
        if self._pending.get(seq) is entry:
            del self._pending[seq]
        if entry.timer is not None:
            self._stop_timer(entry)

    def discard(self, entry: Pending) -> None:
        """Drop an entry (timeout, cancellation); its number is free again."""
        self._release(entry.seq, entry)
        if not entry.future.done():
            entry.future.cancel()

    def resolve(self, msg: Reply, *, arrival: int | None = None) -> bool:
        """Route a reply to its entry; False when no entry waits for ``msg.seq``.

        ``arrival`` is the position of the reply's body in the order bodies were
        received (None: the newest).  A query whose ``z`` came while some of its
        bodies wait for a schema stays open for those bodies, received before the
        ``z``; replies received after it (duplicates) are ignored, as they are
        once the query is finished.
        """
        entry = self._pending.get(msg.seq)
        if entry is None or entry.future.done():
            return False
        if entry.query and self._after_end(entry, arrival):
            return False
        if isinstance(msg, CommandComplete):
            if entry.query or msg.code != 0:
                entry.done_msg = msg
                entry.done_arrival = arrival
                if entry.holds == 0:
                    entry._finish()
                    self._release(msg.seq, entry)
            else:
                entry.future.set_result(msg)
                self._release(msg.seq, entry)
            return True
        if entry.query:
            if entry.on_item is not None:
                entry.on_item(msg)  # streamed to the caller, not kept
            else:
                entry.items.append(msg)
            return True
        if entry.expect and msg.OPCODE not in entry.expect:
            return False
        entry.future.set_result(msg)
        self._release(msg.seq, entry)  # at once: the done callback runs a turn later
        return True

    def item_sink(self, seq: int, arrival: int | None) -> Callable[[Reply], None] | None:
        """The ``on_item`` of the query waiting for ``seq``, when a record received at
        ``arrival`` goes to it; None otherwise (route it with :meth:`resolve`).

        For a run of records of one body: what :meth:`resolve` would do with each,
        looked up once.  Valid until the next reply of that query is resolved.
        """
        entry = self._pending.get(seq)
        if (entry is None or not entry.query or entry.on_item is None
                or entry.future.done() or self._after_end(entry, arrival)):
            return None
        return entry.on_item

    @staticmethod
    def _after_end(entry: Pending, arrival: int | None) -> bool:
        if not entry.query or entry.done_msg is None:
            return False
        return arrival is None or entry.done_arrival is None or arrival > entry.done_arrival

    def after_end(self, seq: int, arrival: int | None) -> bool:
        """True when a body received at ``arrival`` for query ``seq`` came after its ``z``."""
        entry = self._pending.get(seq)
        return entry is not None and self._after_end(entry, arrival)

    def hold(self, seq: int) -> bool:
        """A body for ``seq`` waits for a schema: keep the query open until :meth:`unhold`."""
        entry = self._pending.get(seq)
        if entry is None or not entry.query:
            return False
        entry.holds += 1
        return True

    def unhold(self, seq: int) -> None:
        entry = self._pending.get(seq)
        if entry is None:
            return
        entry.holds = max(0, entry.holds - 1)
        if entry.holds == 0 and entry.done_msg is not None:
            entry._finish()
            self._release(seq, entry)

    def fail_all(self, exc: QmfError) -> None:
        """Fail every pending wait with ``exc`` (connection lost, closed)."""
        for entry in list(self._pending.values()):
            if entry.timer is not None:
                self._stop_timer(entry)
            if not entry.future.done():
                entry.future.set_exception(exc)
        self._pending.clear()

    def fail_agent(self, agent: Any, exc: QmfError) -> int:
        """Fail the waits addressed to ``agent``; returns how many."""
        count = 0
        for entry in list(self._pending.values()):
            if entry.agent == agent and not entry.future.done():
                if entry.timer is not None:
                    self._stop_timer(entry)
                entry.future.set_exception(exc)
                count += 1
        return count


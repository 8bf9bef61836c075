"""Protocol core: sequence numbers mapped to pending waits.  No I/O.

A console sends a request with a fresh sequence number and waits for the reply
(request/response) or for indications ending in ``z`` (query/indication).  A
:class:`Correlator` owns the numbers of one broker connection; its entries are
removed when they complete, time out, are cancelled or fail, so numbers are
released in every case.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any

from ._errors import CommandError, QmfError
from ._messages import CommandComplete, Message

__all__ = ["Correlator", "Pending", "wait_reply"]

_SEQ_MASK = 0xFFFFFFFF


class Pending:
    """One outstanding request.

    ``query`` entries collect indications (``p``, ``q``, ``g``, ``s``) until ``z``;
    other entries complete with their first reply.  ``on_item`` (queries) is called
    with each indication as it arrives, for streaming callers.
    """

    __slots__ = ("seq", "query", "agent", "future", "items", "on_item", "holds", "done_msg",
                 "done_arrival", "expect", "context")

    def __init__(self, seq: int, *, query: bool, agent: Any = None, expect: str = "",
                 on_item: Callable[[Message], None] | None = None, context: Any = None) -> None:
        self.seq = seq
        self.query = query
        self.agent = agent
        self.expect = expect
        self.future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.items: list[Message] = []
        self.on_item = on_item
        self.holds = 0  # bodies for this seq held back until their schema arrives
        self.done_msg: CommandComplete | None = None
        self.done_arrival: int | None = None  # receive order of the body with the z
        self.context = context

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


class Correlator:
    """Sequence numbers -> :class:`Pending` entries of one connection."""

    def __init__(self, start: int | None = None) -> None:
        self._next = start if start is not None else random.randrange(1, 1 << 31)
        self._pending: dict[int, Pending] = {}

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
                 on_item: Callable[[Message], None] | None = None, context: Any = None,
                 seq: int | None = None) -> Pending:
        """A new pending entry under a fresh (or the given) sequence number."""
        if seq is None:
            seq = self.next_seq()
        entry = Pending(seq, query=query, agent=agent, expect=expect, on_item=on_item,
                        context=context)
        self._pending[seq] = entry
        entry.future.add_done_callback(lambda _f, s=seq, e=entry: self._release(s, e))
        return entry

    def _release(self, seq: int, entry: Pending) -> None:
        if self._pending.get(seq) is entry:
            del self._pending[seq]

    def discard(self, entry: Pending) -> None:
        """Drop an entry (timeout, cancellation); its number is free again."""
        self._release(entry.seq, entry)
        if not entry.future.done():
            entry.future.cancel()

    def resolve(self, msg: Message, *, arrival: int | None = None) -> bool:
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
        if self._after_end(entry, arrival):
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
            if not entry.future.done():
                entry.future.set_exception(exc)
        self._pending.clear()

    def fail_agent(self, agent: Any, exc: QmfError) -> int:
        """Fail the waits addressed to ``agent``; returns how many."""
        count = 0
        for entry in list(self._pending.values()):
            if entry.agent == agent and not entry.future.done():
                entry.future.set_exception(exc)
                count += 1
        return count


async def wait_reply(future: asyncio.Future[Any], timeout: float) -> Any:
    """Await ``future`` for at most ``timeout`` seconds.

    Cheaper than ``wait_for(shield(...))`` on the hot path: one timer, no extra task.
    The future itself is failed with ``TimeoutError`` on expiry (the caller discards
    its entry either way).

    Raises:
        TimeoutError: nothing arrived in time.
    """
    def expire() -> None:
        if not future.done():
            future.set_exception(TimeoutError())

    handle = asyncio.get_running_loop().call_later(timeout, expire)
    try:
        return await future
    finally:
        handle.cancel()

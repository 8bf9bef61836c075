"""Sequence numbers and the futures of a peer's own requests (asyncio level).

Used by the agent (its attach ``A``/``a``) and the management-broker role (its ``B``
probe, ``P``/``Q``/``S`` to agents).  The console's sans-I/O pending table lives in
the protocol core; this is the small asyncio face the agent side needs.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Generic, TypeVar

from ..errors import QmfTimeout

__all__ = ["RequestFutures"]

_M = TypeVar("_M")


class _Pending(Generic[_M]):
    """Answers to one request, collected until ``complete(message)`` says so."""

    __slots__ = ("complete", "future", "messages")

    def __init__(self, complete: Callable[[_M], bool]) -> None:
        self.future: asyncio.Future[list[_M]] = asyncio.get_running_loop().create_future()
        self.messages: list[_M] = []
        self.complete = complete

    def add(self, msg: _M) -> None:
        if self.future.done():
            return
        self.messages.append(msg)
        if self.complete(msg):
            self.future.set_result(self.messages)


def _first(_msg: object) -> bool:
    return True


class RequestFutures(Generic[_M]):
    """Allocates sequence numbers and routes answers to the request that sent them.

    ``seq = c.next_seq(); fut = c.expect(seq, complete)``; every answer with that
    sequence goes to :meth:`feed`, and the future gets the list of answers once
    ``complete(answer)`` is true (the first answer when ``complete`` is omitted).
    :meth:`wait` bounds the wait and always forgets the sequence; :meth:`fail_all`
    fails every waiting request (on a connection loss or at stop).
    """

    def __init__(self, first: int = 1, *, mask: int = 0xFFFFFFFF) -> None:
        """Sequence numbers start at ``first`` and wrap within ``mask``.

        Raises:
            Nothing: it does not raise.
        """
        self._seq = itertools.count(first)
        self._mask = mask
        self._pending: dict[int, _Pending[_M]] = {}

    def __len__(self) -> int:
        return len(self._pending)

    def __contains__(self, seq: object) -> bool:
        return seq in self._pending

    def next_seq(self) -> int:
        """A new sequence number (not one that is still pending).

        Raises:
            Nothing: it does not raise.
        """
        while True:
            seq = next(self._seq) & self._mask
            if seq not in self._pending:
                return seq

    def expect(self, seq: int, complete: Callable[[_M], bool] | None = None
               ) -> asyncio.Future[list[_M]]:
        """Start collecting the answers to request ``seq``; their future.

        Raises:
            RuntimeError: no running event loop.
        """
        pending = _Pending(complete or _first)
        self._pending[seq] = pending
        return pending.future

    def feed(self, seq: int, msg: _M) -> bool:
        """Hand one answer over; False when no request ``seq`` is waiting.

        Raises:
            Nothing: it does not raise.
        """
        pending = self._pending.get(seq)
        if pending is None:
            return False
        pending.add(msg)
        return True

    def forget(self, seq: int) -> None:
        """Stop waiting for ``seq`` (its future is cancelled when still open).

        Raises:
            Nothing: it does not raise.
        """
        pending = self._pending.pop(seq, None)
        if pending is not None and not pending.future.done():
            pending.future.cancel()

    async def wait(self, seq: int, timeout: float) -> list[_M]:
        """The answers to ``seq`` (see :meth:`expect`), within ``timeout`` seconds; the
        sequence is forgotten in every case.

        Raises:
            QmfTimeout: no complete answer in time (``TimeoutError`` chained).
            QmfError: whatever :meth:`fail_all` failed it with.
            KeyError: ``seq`` is not expected.
        """
        future = self._pending[seq].future
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        except TimeoutError as exc:
            raise QmfTimeout(f"no answer to request {seq} within {timeout}s") from exc
        finally:
            self.forget(seq)

    def fail_all(self, exc: BaseException) -> None:
        """Fail every waiting request with ``exc`` and forget them all.

        Raises:
            Nothing: it does not raise.
        """
        pending, self._pending = self._pending, {}
        for p in pending.values():
            if not p.future.done():
                p.future.set_exception(exc)
                p.future.exception()  # retrieved: nobody may be waiting any more
